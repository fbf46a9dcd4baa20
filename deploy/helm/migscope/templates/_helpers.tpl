{{/*
Names. Object names are <fullname>-<component>; fullname is <release>-migscope unless the
release name already contains the chart name.
*/}}
{{- define "migscope.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "migscope.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* <fullname>-<suffix>, kept within 63 characters. Call with (list $ "suffix"). */}}
{{- define "migscope.componentName" -}}
{{- $root := index . 0 -}}
{{- printf "%s-%s" (include "migscope.fullname" $root | trunc (int (sub 62 (len (index . 1))))) (index . 1) | trimSuffix "-" }}
{{- end }}

{{- define "migscope.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. Call with (list $ "component"). */}}
{{- define "migscope.labels" -}}
{{- $root := index . 0 -}}
helm.sh/chart: {{ include "migscope.chart" $root }}
{{ include "migscope.selectorLabels" . }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/part-of: migscope
{{- with $root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels. Call with (list $ "component"). */}}
{{- define "migscope.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "migscope.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* Image reference. Call with (list $ .Values.image.exporter). */}}
{{- define "migscope.image" -}}
{{- $root := index . 0 -}}
{{- $img := index . 1 }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default $root.Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/* ServiceAccount names: serviceAccount.names.<component>, else <fullname>-<component>. */}}
{{- define "migscope.serviceAccountName" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 }}
{{- default (include "migscope.componentName" (list $root $component)) (index $root.Values.serviceAccount.names $component) }}
{{- end }}
{{- define "migscope.exporter.serviceAccountName" -}}
{{ include "migscope.serviceAccountName" (list . "exporter") }}
{{- end }}
{{- define "migscope.report.serviceAccountName" -}}
{{ include "migscope.serviceAccountName" (list . "report") }}
{{- end }}
{{- define "migscope.apply.serviceAccountName" -}}
{{ include "migscope.serviceAccountName" (list . "apply") }}
{{- end }}

{{/* The web-config file as the exporter reads it: the user's, or server TLS from tlsSecret. */}}
{{- define "migscope.exporter.webConfig" -}}
{{- $wc := .Values.exporter.webConfig -}}
{{- if $wc.config }}
{{- toYaml $wc.config }}
{{- else if $wc.tlsSecret }}
tls_server_config:
  cert_file: /etc/migscope/tls/tls.crt
  key_file: /etc/migscope/tls/tls.key
{{- else }}
{{- fail "exporter.webConfig.enabled needs exporter.webConfig.existingSecret, .config or .tlsSecret" }}
{{- end }}
{{- end }}

{{/* "true" when the exporter serves HTTPS (as far as the chart can tell). */}}
{{- define "migscope.exporter.tls" -}}
{{- $wc := .Values.exporter.webConfig -}}
{{- if $wc.enabled }}
{{- if kindIs "bool" $wc.tls }}
{{- if $wc.tls }}true{{ end }}
{{- else if or $wc.tlsSecret (and $wc.config (hasKey $wc.config "tls_server_config")) }}true
{{- end }}
{{- end }}
{{- end }}

{{/* "true" when every TLS connection must present a client certificate (the kubelet cannot). */}}
{{- define "migscope.exporter.mtls" -}}
{{- $wc := .Values.exporter.webConfig -}}
{{- if and $wc.enabled $wc.config }}
{{- $tls := default (dict) $wc.config.tls_server_config }}
{{- if eq (toString (default "" $tls.client_auth_type)) "RequireAndVerifyClientCert" }}true{{ end }}
{{- end }}
{{- end }}

{{/* Scrape scheme of a ServiceMonitor/PodMonitor endpoint. Call with (list $ .Values.serviceMonitor). */}}
{{- define "migscope.scrapeScheme" -}}
{{- $root := index . 0 -}}
{{- $mon := index . 1 -}}
{{- if $mon.scheme }}{{ $mon.scheme }}{{ else if include "migscope.exporter.tls" $root }}https{{ else }}http{{ end }}
{{- end }}

{{/*
Relabelings of both monitors: the target's node becomes the `node` label (the exporter emits
none; the analyzer and the dashboards group by it), then the operator's pod/namespace/
container target labels are dropped so the workload's labels on *_pod_info series are kept.
Call with (list $ .Values.serviceMonitor).
*/}}
{{- define "migscope.relabelings" -}}
{{- $mon := index . 1 -}}
- sourceLabels: [__meta_kubernetes_pod_node_name]
  targetLabel: node
  action: replace
{{- if $mon.instanceFromNode }}
- sourceLabels: [__meta_kubernetes_pod_node_name]
  targetLabel: instance
  action: replace
{{- end }}
{{- if $mon.dropTargetLabels }}
- regex: {{ $mon.dropTargetLabels | quote }}
  action: labeldrop
{{- end }}
{{- with $mon.relabelings }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Storage volume of the reports. */}}
{{- define "migscope.report.volume" -}}
{{- $s := .Values.report.storage -}}
- name: reports
{{- if eq $s.type "emptyDir" }}
  emptyDir: {}
{{- else if eq $s.type "pvc" }}
  persistentVolumeClaim:
    claimName: {{ include "migscope.componentName" (list . "reports") }}
{{- else if eq $s.type "existingClaim" }}
  persistentVolumeClaim:
    claimName: {{ required "report.storage.existingClaim is required with report.storage.type=existingClaim" $s.existingClaim }}
{{- else }}
{{- fail (printf "report.storage.type must be emptyDir, pvc or existingClaim, not %q" $s.type) }}
{{- end }}
{{- end }}

{{/*
`migscope analyze` arguments shared by the report and the apply job (without --out).
Every flag must exist in `migscope analyze --help` (tests/deploy/test_helm.py checks).
*/}}
{{- define "migscope.analyzeArgs" -}}
{{- $a := .Values.analyzer -}}
- analyze
- {{ printf "--prometheus=%s" (required "analyzer.prometheusUrl is required" $a.prometheusUrl) | quote }}
{{- include "migscope.analyzer.validateAccess" . }}
{{- if $a.bearerTokenSecret }}
- --bearer-token-file=/etc/migscope/prometheus/{{ $a.bearerTokenSecret.key | default "token" }}
{{- end }}
{{- with $a.tenant }}
- {{ printf "--tenant=%s" . | quote }}
{{- end }}
{{- range $name, $value := $a.headers }}
- {{ printf "--header=%s: %s" $name (toString $value) | quote }}
{{- end }}
{{- if $a.headersSecret }}
- --header-file=/etc/migscope/prometheus-headers/{{ $a.headersSecret.key | default "headers" }}
{{- end }}
{{- if $a.basicAuth.username }}
- {{ printf "--basic-auth-user=%s" $a.basicAuth.username | quote }}
- --basic-auth-password-file=/etc/migscope/prometheus-basic-auth/{{ $a.basicAuth.passwordSecret.key | default "password" }}
{{- end }}
{{- with (include "migscope.analyzer.ca" .) }}
- --ca-file=/etc/migscope/prometheus-ca/{{ (fromJson .).key | default "ca.crt" }}
{{- end }}
{{- if $a.tls.clientCertSecret }}
- --client-cert=/etc/migscope/prometheus-client/tls.crt
- --client-key=/etc/migscope/prometheus-client/tls.key
{{- end }}
{{- if $a.tls.insecureSkipVerify }}
- --insecure-skip-verify
{{- end }}
- --timeout={{ $a.timeout }}
- {{ printf "--window=%s" $a.window | quote }}
- --step={{ $a.step }}
- --stats={{ $a.stats }}
- --headroom={{ $a.headroom }}
- --objective={{ $a.objective }}
- --time-limit={{ $a.timeLimit }}
- --pending-pods={{ $a.pendingPods }}
{{- if $a.pricePerGpuHour }}
- --price-per-gpu-hour={{ $a.pricePerGpuHour }}
{{- end }}
{{- if $a.policy }}
- --policy=/etc/migscope/policy/policy.yaml
{{- end }}
{{- range $a.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
How the analyzer reaches the server, checked together: a mistake here fails the install, not
the first weekly run. The CLI checks the same again, with the files in hand.
*/}}
{{- define "migscope.analyzer.validateAccess" -}}
{{- $a := .Values.analyzer -}}
{{- if and $a.basicAuth.username (not $a.basicAuth.passwordSecret) }}
{{- fail "analyzer.basicAuth.username needs analyzer.basicAuth.passwordSecret ({name: ..., key: password})" }}
{{- end }}
{{- if and $a.basicAuth.passwordSecret (not $a.basicAuth.username) }}
{{- fail "analyzer.basicAuth.passwordSecret needs analyzer.basicAuth.username" }}
{{- end }}
{{- if and $a.basicAuth.username $a.bearerTokenSecret }}
{{- fail "analyzer.basicAuth and analyzer.bearerTokenSecret exclude each other: give one" }}
{{- end }}
{{- if and $a.tls.caSecret $a.tls.caConfigMap }}
{{- fail "analyzer.tls.caSecret and analyzer.tls.caConfigMap exclude each other: give one" }}
{{- end }}
{{- if and $a.tls.insecureSkipVerify (or $a.tls.caSecret $a.tls.caConfigMap) }}
{{- fail "analyzer.tls.insecureSkipVerify makes the CA pointless: drop one of them" }}
{{- end }}
{{- if and $a.tenant (has "x-scope-orgid" (keys $a.headers | join "," | lower | splitList ",")) }}
{{- fail "analyzer.tenant and an X-Scope-OrgID in analyzer.headers: give the tenant once" }}
{{- end }}
{{- end }}

{{/* The CA reference as JSON ({name, key, kind}), or nothing without a CA. */}}
{{- define "migscope.analyzer.ca" -}}
{{- $tls := .Values.analyzer.tls -}}
{{- if $tls.caSecret }}
{{- toJson (dict "name" (required "analyzer.tls.caSecret.name is required" $tls.caSecret.name) "key" ($tls.caSecret.key | default "ca.crt") "kind" "secret") }}
{{- else if $tls.caConfigMap }}
{{- toJson (dict "name" (required "analyzer.tls.caConfigMap.name is required" $tls.caConfigMap.name) "key" ($tls.caConfigMap.key | default "ca.crt") "kind" "configMap") }}
{{- end }}
{{- end }}

{{/* Volumes the analyze container reads: credentials, headers, CA, client certificate, policy. */}}
{{- define "migscope.analyzer.volumes" -}}
{{- $a := .Values.analyzer -}}
{{- if $a.bearerTokenSecret }}
- name: prometheus-token
  secret:
    secretName: {{ required "analyzer.bearerTokenSecret.name is required" $a.bearerTokenSecret.name }}
{{- end }}
{{- if $a.headersSecret }}
- name: prometheus-headers
  secret:
    secretName: {{ required "analyzer.headersSecret.name is required" $a.headersSecret.name }}
    defaultMode: 0440
{{- end }}
{{- if $a.basicAuth.passwordSecret }}
- name: prometheus-basic-auth
  secret:
    secretName: {{ required "analyzer.basicAuth.passwordSecret.name is required" $a.basicAuth.passwordSecret.name }}
    defaultMode: 0440
{{- end }}
{{- with (include "migscope.analyzer.ca" .) }}
{{- $ca := fromJson . }}
- name: prometheus-ca
{{- if eq $ca.kind "secret" }}
  secret:
    secretName: {{ $ca.name }}
{{- else }}
  configMap:
    name: {{ $ca.name }}
{{- end }}
{{- end }}
{{- if $a.tls.clientCertSecret }}
- name: prometheus-client
  secret:
    secretName: {{ $a.tls.clientCertSecret }}
    defaultMode: 0440
{{- end }}
{{- if $a.policy }}
- name: policy
  configMap:
    name: {{ include "migscope.componentName" (list . "policy") }}
{{- end }}
- name: tmp
  emptyDir: {}
{{- end }}

{{- define "migscope.analyzer.volumeMounts" -}}
{{- $a := .Values.analyzer -}}
{{- if $a.bearerTokenSecret }}
- name: prometheus-token
  mountPath: /etc/migscope/prometheus
  readOnly: true
{{- end }}
{{- if $a.headersSecret }}
- name: prometheus-headers
  mountPath: /etc/migscope/prometheus-headers
  readOnly: true
{{- end }}
{{- if $a.basicAuth.passwordSecret }}
- name: prometheus-basic-auth
  mountPath: /etc/migscope/prometheus-basic-auth
  readOnly: true
{{- end }}
{{- if include "migscope.analyzer.ca" . }}
- name: prometheus-ca
  mountPath: /etc/migscope/prometheus-ca
  readOnly: true
{{- end }}
{{- if $a.tls.clientCertSecret }}
- name: prometheus-client
  mountPath: /etc/migscope/prometheus-client
  readOnly: true
{{- end }}
{{- if $a.policy }}
- name: policy
  mountPath: /etc/migscope/policy
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* Container securityContext of the CronJob containers. */}}
{{- define "migscope.job.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end }}

{{- define "migscope.validate" -}}
{{- if and .Values.serviceMonitor.enabled .Values.podMonitor.enabled }}
{{- fail "serviceMonitor.enabled and podMonitor.enabled exclude each other: Prometheus would scrape every exporter twice" }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (not .Values.exporter.service.enabled) }}
{{- fail "serviceMonitor.enabled needs exporter.service.enabled (or use podMonitor.enabled)" }}
{{- end }}
{{- if not (has .Values.exporter.backend (list "nvml" "dcgm")) }}
{{- fail (printf "exporter.backend must be nvml or dcgm, not %q" .Values.exporter.backend) }}
{{- end }}
{{- if not (has .Values.exporter.probes.type (list "auto" "httpGet" "tcpSocket")) }}
{{- fail (printf "exporter.probes.type must be auto, httpGet or tcpSocket, not %q" .Values.exporter.probes.type) }}
{{- end }}
{{- end }}
