"""deploy/helm/migscope: render the chart offline and hold what it renders to Kubernetes, to
the prometheus-operator CRDs, to migscope's own CLI and to the docs.

Rendering: helm-python-sdk (Helm v4's Go SDK through a C ABI, in a wheel; no helm binary, no
cluster). Validation: every rendered object that is a built-in kind against the Kubernetes
OpenAPI schemas of kubernetes-validate, strict (unknown fields are errors), for the chart's
lowest supported Kubernetes version, 1.31 and the newest schema the package ships. The CRD
kinds (ServiceMonitor, PodMonitor, PrometheusRule) have no schema there: they are checked
against hand-written JSON schemas of the prometheus-operator v1 fields the chart may emit,
with unknown fields refused. What neither schema says (references between objects, names,
label syntax) is checked by hand below.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

helm = pytest.importorskip("helm_python", reason="helm-python-sdk not installed (test extra)")
kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate not installed (test extra)"
)
jsonschema = pytest.importorskip("jsonschema")  # a dependency of kubernetes-validate

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "migscope"
SYNC = ROOT / "deploy" / "helm" / "sync-files.sh"
GEN_TABLE = ROOT / "deploy" / "helm" / "gen-values-table.py"
RULES = ROOT / "deploy" / "prometheus" / "migscope-rules.yaml"
DASHBOARDS = ROOT / "dashboards"
RELEASE, NAMESPACE = "migscope", "monitoring"
CRD_GROUP = "monitoring.coreos.com/v1"

# Value sets rendered and validated in full. Each names what it switches on.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "apply": {
        "apply": {
            "enabled": True,
            "drain": True,
            "windows": ["sat-sun 01:00-05:00 UTC"],
            "configMap": "migscope-mig-parted-config",
            "timeZone": "Europe/Berlin",
        }
    },
    "podmonitor": {"serviceMonitor": {"enabled": False}, "podMonitor": {"enabled": True}},
    "tls": {
        "exporter": {
            "webConfig": {
                "enabled": True,
                "tlsSecret": "migscope-exporter-tls",
                "config": {
                    "tls_server_config": {
                        "cert_file": "/etc/migscope/tls/tls.crt",
                        "key_file": "/etc/migscope/tls/tls.key",
                    },
                    "basic_auth_users": {
                        # bcrypt of "secret", cost 4 (the exporter accepts 4 to 31)
                        "prometheus": "$2b$04$y5TuduUTU4peYKfTDGZ6Vum2GGVl6/91/CjPIYgz0zuvJDxqFAm8y"
                    },
                },
            }
        },
        "serviceMonitor": {
            "tlsConfig": {
                "ca": {"secret": {"name": "migscope-exporter-tls", "key": "ca.crt"}},
                "serverName": "migscope-exporter",
            },
            "basicAuth": {
                "username": {"name": "migscope-scrape", "key": "username"},
                "password": {"name": "migscope-scrape", "key": "password"},
            },
        },
    },
    "mtls": {
        "exporter": {
            "webConfig": {
                "enabled": True,
                "tlsSecret": "migscope-exporter-tls",
                "config": {
                    "tls_server_config": {
                        "cert_file": "/etc/migscope/tls/tls.crt",
                        "key_file": "/etc/migscope/tls/tls.key",
                        "client_auth_type": "RequireAndVerifyClientCert",
                        "client_ca_file": "/etc/migscope/tls/ca.crt",
                    }
                },
            }
        },
        "podMonitor": {"enabled": True, "tlsConfig": {"insecureSkipVerify": True}},
        "serviceMonitor": {"enabled": False},
    },
    # no pod attribution and no MIG monitor (a node without MIG): nothing needs root
    "no-attribution": {
        "exporter": {"podAttribution": {"enabled": False}, "migMonitor": {"enabled": False}}
    },
    "server-access": {  # Mimir behind a gateway: tenant, headers, basic auth, private CA, mTLS
        "analyzer": {
            "prometheusUrl": "https://mimir.example/prometheus",
            "tenant": "gpu-team|ml-team",
            "headers": {"THANOS-TENANT": "gpu-team", "X-Trace": "on"},
            "headersSecret": {"name": "gateway-key", "key": "headers"},
            "basicAuth": {"username": "123456", "passwordSecret": {"name": "mimir-auth"}},
            "tls": {
                "caConfigMap": {"name": "openshift-service-ca.crt", "key": "service-ca.crt"},
                "clientCertSecret": "migscope-client-tls",
            },
        },
        "apply": {"enabled": True},
    },
    "everything": {
        "commonLabels": {"team": "gpu-platform"},
        "imagePullSecrets": [{"name": "regcred"}],
        "image": {"analyzer": {"digest": "sha256:" + "a" * 64}},
        "exporter": {
            "backend": "dcgm",
            "dcgmHost": "nvidia-dcgm.gpu-operator.svc:5555",
            "dcgmBindings": "/opt/dcgm/bindings/python3",
            "extraVolumes": [
                {"name": "dcgm", "hostPath": {"path": "/usr/share/datacenter-gpu-manager-4"}}
            ],
            "extraVolumeMounts": [{"name": "dcgm", "mountPath": "/opt/dcgm", "readOnly": True}],
            "dcgmCompat": True,
            "priorityClassName": "system-node-critical",
            "runtimeClassName": "",
            "extraArgs": ["--log-level=debug"],
            "extraEnv": [{"name": "MIGSCOPE_EXPORTER_IDLE_POWER_WATTS", "value": "90"}],
            "securityContext": {"seLinuxOptions": {"type": "spc_t"}},
            "podAttribution": {"kubeletRootDir": "/var/snap/microk8s/common/var/lib/kubelet/"},
            "webConfig": {"enabled": True, "existingSecret": "my-web-config", "tls": True},
            "probes": {"type": "tcpSocket"},
            "service": {"headless": False, "annotations": {"a": "b"}},
        },
        "serviceMonitor": {
            "labels": {"release": "kube-prometheus-stack"},
            "dropTargetLabels": "",
            "instanceFromNode": False,
            "relabelings": [{"targetLabel": "cluster", "replacement": "prod", "action": "replace"}],
            "metricRelabelings": [
                {"sourceLabels": ["__name__"], "regex": "migscope_build_info", "action": "drop"}
            ],
        },
        "prometheusRule": {"labels": {"release": "kube-prometheus-stack"}},
        "dashboards": {"labelValue": "migscope", "annotations": {"grafana_folder": "MIG"}},
        "analyzer": {
            "bearerTokenSecret": {"name": "thanos-token", "key": "token"},
            "pricePerGpuHour": 3.5,
            "policy": {"idle": {"activity_p95_below": 0.02}},
            "extraArgs": ["--what-if=*=all-balanced"],
            "pendingPods": "on",
            "stats": "fast",
            "objective": "minimal-change",
        },
        "report": {"storage": {"type": "emptyDir"}, "timeZone": "UTC", "keep": 3},
        "apply": {"enabled": True, "extraArgs": ["--format=json"], "leaseWait": "5m"},
        "serviceAccount": {"annotations": {"iam.gke.io/gcp-service-account": "x@y.iam"}},
    },
}


# --- rendering --------------------------------------------------------------------------------


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def render_raw(values: dict[str, Any], release: str = RELEASE) -> dict[str, str]:
    """Template path -> rendered text, as `helm template` would print it."""
    with helm.Chart.load(str(CHART)) as chart:
        return chart.render(values, name=release, namespace=NAMESPACE, is_install=True)


class _StrictLoader(yaml.SafeLoader):
    """Refuses duplicate keys, which YAML parsers resolve differently (the API server refuses)."""


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
    duplicates = {k for k in keys if keys.count(k) > 1}
    if duplicates:
        raise yaml.constructor.ConstructorError(
            None, None, f"duplicate keys {sorted(duplicates)}", node.start_mark
        )
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


@functools.cache
def _render_cached(key: str) -> tuple[tuple[str, ...], str]:
    raw = render_raw(json.loads(key))
    docs: list[str] = []
    notes = ""
    for path, text in sorted(raw.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        for doc in yaml.load_all(text, Loader=_StrictLoader):
            if doc:
                docs.append(json.dumps(doc))
    return tuple(docs), notes


def render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every rendered object (fresh copies: tests may mutate them)."""
    docs, _ = _render_cached(json.dumps(values or {}, sort_keys=True))
    return [json.loads(d) for d in docs]


def notes(values: dict[str, Any] | None = None) -> str:
    return _render_cached(json.dumps(values or {}, sort_keys=True))[1]


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict[str, Any]], kind: str, component: str | None = None) -> dict[str, Any]:
    found = [
        o
        for o in of_kind(objs, kind)
        if component is None
        or o["metadata"]["labels"].get("app.kubernetes.io/component") == component
    ]
    assert len(found) == 1, f"{len(found)} {kind} objects for component {component}"
    return found[0]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]
    return obj["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(obj)
    return [*spec.get("initContainers", []), *spec["containers"]]


def exporter_container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = pod_spec(one(objs, "DaemonSet", "exporter"))["containers"]
    return c  # type: ignore[no-any-return]


# --- validation -------------------------------------------------------------------------------


def _kube_versions() -> list[str]:
    floor = re.search(
        r"(\d+\.\d+)", yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"]
    )
    assert floor is not None
    return sorted({floor[1], "1.31", kubernetes_validate.latest_version()}, key=_version_key)


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_SECRET_KEY = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "key": {"type": "string"},
        "optional": {"type": "boolean"},
    },
    "required": ["key"],
    "additionalProperties": False,
}
_SECRET_OR_CM = {
    "type": "object",
    "properties": {"secret": _SECRET_KEY, "configMap": _SECRET_KEY},
    "additionalProperties": False,
}
_SAFE_TLS = {
    "type": "object",
    "properties": {
        "ca": _SECRET_OR_CM,
        "cert": _SECRET_OR_CM,
        "keySecret": _SECRET_KEY,
        "serverName": {"type": "string"},
        "insecureSkipVerify": {"type": "boolean"},
        "minVersion": {"enum": ["TLS10", "TLS11", "TLS12", "TLS13"]},
        "maxVersion": {"enum": ["TLS10", "TLS11", "TLS12", "TLS13"]},
    },
    "additionalProperties": False,
}
_TLS = {  # ServiceMonitor endpoints also take file paths inside the Prometheus pod
    **_SAFE_TLS,
    "properties": {
        **_SAFE_TLS["properties"],  # type: ignore[dict-item]
        "caFile": {"type": "string"},
        "certFile": {"type": "string"},
        "keyFile": {"type": "string"},
    },
}
_RELABEL_ACTIONS = [  # prometheus-operator accepts the lower-case and the CamelCase spelling
    *("replace", "keep", "drop", "hashmod", "labelmap", "labeldrop", "labelkeep"),
    *("lowercase", "uppercase", "keepequal", "dropequal"),
    *("Replace", "Keep", "Drop", "HashMod", "LabelMap", "LabelDrop", "LabelKeep"),
    *("Lowercase", "Uppercase", "KeepEqual", "DropEqual"),
]
_RELABEL = {
    "type": "object",
    "properties": {
        "sourceLabels": {
            "type": "array",
            "items": {"type": "string", "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"},
        },
        "separator": {"type": "string"},
        "targetLabel": {"type": "string"},
        "regex": {"type": "string"},
        "modulus": {"type": "integer"},
        "replacement": {"type": "string"},
        "action": {"enum": sorted(set(_RELABEL_ACTIONS))},
    },
    "additionalProperties": False,
}
_BASIC_AUTH = {
    "type": "object",
    "properties": {"username": _SECRET_KEY, "password": _SECRET_KEY},
    "additionalProperties": False,
}
_DURATION = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
    r"(([0-9]+)s)?(([0-9]+)ms)?)$",
}
_ENDPOINT_COMMON = {
    "port": {"type": "string"},
    "path": {"type": "string"},
    "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
    "params": {"type": "object"},
    "interval": _DURATION,
    "scrapeTimeout": _DURATION,
    "honorLabels": {"type": "boolean"},
    "honorTimestamps": {"type": "boolean"},
    "basicAuth": _BASIC_AUTH,
    "bearerTokenSecret": _SECRET_KEY,
    "relabelings": {"type": "array", "items": _RELABEL},
    "metricRelabelings": {"type": "array", "items": _RELABEL},
    "followRedirects": {"type": "boolean"},
    "enableHttp2": {"type": "boolean"},
    "proxyUrl": {"type": "string"},
}
_SELECTOR = {
    "type": "object",
    "properties": {"matchLabels": _STR_MAP, "matchExpressions": {"type": "array"}},
    "additionalProperties": False,
}
_NS_SELECTOR = {
    "type": "object",
    "properties": {
        "any": {"type": "boolean"},
        "matchNames": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}
_METADATA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": _STR_MAP,
        "annotations": _STR_MAP,
    },
    "required": ["name", "namespace"],
    "additionalProperties": False,
}


def _crd(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"const": CRD_GROUP},
            "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": spec,
        },
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
    }


# prometheus-operator v1 CRDs (monitoring.coreos.com), the fields the chart may emit.
CRD_SCHEMAS: dict[str, dict[str, Any]] = {
    "ServiceMonitor": _crd(
        "ServiceMonitor",
        {
            "type": "object",
            "properties": {
                "jobLabel": {"type": "string"},
                "targetLabels": {"type": "array", "items": {"type": "string"}},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "namespaceSelector": _NS_SELECTOR,
                "selector": _SELECTOR,
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {**_ENDPOINT_COMMON, "tlsConfig": _TLS, "targetPort": {}},
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
        },
    ),
    "PodMonitor": _crd(
        "PodMonitor",
        {
            "type": "object",
            "properties": {
                "jobLabel": {"type": "string"},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "namespaceSelector": _NS_SELECTOR,
                "selector": _SELECTOR,
                "podMetricsEndpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            **_ENDPOINT_COMMON,
                            "tlsConfig": _SAFE_TLS,
                            "portNumber": {"type": "integer"},
                        },
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["selector", "podMetricsEndpoints"],
            "additionalProperties": False,
        },
    ),
    "PrometheusRule": _crd(
        "PrometheusRule",
        {
            "type": "object",
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": _DURATION,
                            "query_offset": _DURATION,
                            "limit": {"type": "integer"},
                            "labels": _STR_MAP,
                            "partial_response_strategy": {"type": "string"},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "record": {"type": "string"},
                                        "alert": {"type": "string"},
                                        "expr": {"type": ["string", "integer"]},
                                        "for": _DURATION,
                                        "keep_firing_for": _DURATION,
                                        "labels": _STR_MAP,
                                        "annotations": _STR_MAP,
                                    },
                                    "required": ["expr"],
                                    "oneOf": [{"required": ["record"]}, {"required": ["alert"]}],
                                    "additionalProperties": False,
                                },
                            },
                        },
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["groups"],
            "additionalProperties": False,
        },
    ),
}


def validate(obj: dict[str, Any]) -> None:
    """Raise if obj is not a valid object of its kind (see the module docstring)."""
    if obj["apiVersion"] == CRD_GROUP:
        schema = CRD_SCHEMAS.get(obj["kind"])
        assert schema is not None, f"no structural schema for {obj['kind']}"
        jsonschema.Draft202012Validator(schema).validate(obj)
    else:
        for version in _kube_versions():
            kubernetes_validate.validate(obj, version, strict=True)
    check_names_and_labels(obj)


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def check_names_and_labels(obj: dict[str, Any]) -> None:
    """What the API server checks but the OpenAPI schemas do not."""
    meta = obj["metadata"]
    name = meta["name"]
    assert _DNS_SUBDOMAIN.match(name), name
    assert len(name) <= 253, name
    if obj["kind"] in ("Service", "Namespace"):
        assert _DNS_LABEL.match(name), name
        assert len(name) <= 63, name
    if obj["kind"] == "CronJob":
        assert len(name) <= 52, f"CronJob name {name} longer than 52 (Job names add 11)"
    for labels in (meta.get("labels", {}), *_template_labels(obj)):
        for key, value in labels.items():
            assert _LABEL_NAME.match(key), key
            assert len(key.rsplit("/", 1)[-1]) <= 63, key
            assert isinstance(value, str), (key, value)
            assert _LABEL_VALUE.match(value), (key, value)
            assert len(value) <= 63, (
                key,
                value,
            )
    if obj["kind"] in ("DaemonSet", "CronJob"):
        spec = pod_spec(obj)
        volumes = {v["name"] for v in spec.get("volumes", [])}
        for c in containers(obj):
            assert _DNS_LABEL.match(c["name"]), c["name"]
            mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
            assert len(mounts) == len(set(mounts)), f"{c['name']}: duplicate mount paths"
            for m in c.get("volumeMounts", []):
                assert m["name"] in volumes, f"{c['name']} mounts undefined volume {m['name']}"
            for p in c.get("ports", []):
                assert len(p.get("name", "")) <= 15, p


def _template_labels(obj: dict[str, Any]) -> Iterator[dict[str, str]]:
    if obj["kind"] == "DaemonSet":
        yield obj["spec"]["template"]["metadata"].get("labels", {})
    if obj["kind"] == "CronJob":
        yield obj["spec"]["jobTemplate"]["metadata"].get("labels", {})
        yield obj["spec"]["jobTemplate"]["spec"]["template"]["metadata"].get("labels", {})


# --- the rendered objects are valid -----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_rendered_object_is_valid(name: str) -> None:
    objs = render(VALUE_SETS[name])
    assert objs
    for obj in objs:
        try:
            validate(obj)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
            pytest.fail(f"{name}: {obj['kind']}/{obj['metadata']['name']}: {exc}")
    namespaced = [o for o in objs if o["kind"] not in ("ClusterRole", "ClusterRoleBinding")]
    for obj in namespaced:
        assert obj["metadata"].get("namespace"), f"{obj['kind']}/{obj['metadata']['name']}"
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs]
    assert len(keys) == len(set(keys)), "two objects with one name"


def test_helm_lint_strict_finds_nothing_and_catches_a_broken_chart(tmp_path: Path) -> None:
    floor = f"v{_kube_versions()[0]}.0"
    for name, values in VALUE_SETS.items():
        report = helm.lint(str(CHART), values, strict=True, namespace=NAMESPACE, kube_version=floor)
        problems = [m for m in report["messages"] if m["severity"] >= 2]  # warnings, errors
        assert not problems, (name, problems)
        assert not report["errors"], (name, report["errors"])
    broken = tmp_path / "migscope"
    shutil.copytree(CHART, broken)
    service = broken / "templates" / "exporter-service.yaml"
    service.write_text(service.read_text().replace("{{- end }}", "", 1))
    report = helm.lint(str(broken), {}, strict=True, namespace=NAMESPACE)
    assert [m for m in report["messages"] if m["severity"] == 3]


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_references_between_objects_resolve(name: str) -> None:
    """Service accounts, bindings, selectors, claims and config volumes point at something."""
    values = _merge(yaml.safe_load((CHART / "values.yaml").read_text()), VALUE_SETS[name])
    objs = render(VALUE_SETS[name])
    rendered = {(o["kind"], o["metadata"]["name"]) for o in objs}
    analyzer = values["analyzer"]
    user_supplied = {
        ("Secret", values["exporter"]["webConfig"]["tlsSecret"]),
        ("Secret", values["exporter"]["webConfig"]["existingSecret"]),
        ("Secret", analyzer["bearerTokenSecret"].get("name", "")),
        ("Secret", analyzer["headersSecret"].get("name", "")),
        ("Secret", analyzer["basicAuth"]["passwordSecret"].get("name", "")),
        ("Secret", analyzer["tls"]["caSecret"].get("name", "")),
        ("Secret", analyzer["tls"]["clientCertSecret"]),
        ("ConfigMap", analyzer["tls"]["caConfigMap"].get("name", "")),
        ("PersistentVolumeClaim", values["report"]["storage"]["existingClaim"]),
    }
    for obj in of_kind(objs, "DaemonSet") + of_kind(objs, "CronJob"):
        spec = pod_spec(obj)
        assert ("ServiceAccount", spec["serviceAccountName"]) in rendered
        for vol in spec.get("volumes", []):
            for kind, ref in (
                ("Secret", vol.get("secret", {}).get("secretName")),
                ("ConfigMap", vol.get("configMap", {}).get("name")),
                ("PersistentVolumeClaim", vol.get("persistentVolumeClaim", {}).get("claimName")),
            ):
                if ref:
                    assert (kind, ref) in rendered | user_supplied, (
                        obj["metadata"]["name"],
                        kind,
                        ref,
                    )
    for binding in of_kind(objs, "ClusterRoleBinding") + of_kind(objs, "RoleBinding"):
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in rendered
        for subject in binding["subjects"]:
            assert ("ServiceAccount", subject["name"]) in rendered
            assert subject["namespace"] == NAMESPACE
    for ds in of_kind(objs, "DaemonSet"):
        pod_labels = ds["spec"]["template"]["metadata"]["labels"]
        assert ds["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        for svc in of_kind(objs, "Service"):
            assert svc["spec"]["selector"].items() <= pod_labels.items()
            (port,) = svc["spec"]["ports"]
            assert port["targetPort"] in {p["name"] for p in exporter_container(objs)["ports"]}


def test_the_validators_can_fail() -> None:
    """A typo'd field, a wrong type and a bad relabel action are caught, not waved through."""
    objs = render()
    ds = one(objs, "DaemonSet", "exporter")
    bad = copy.deepcopy(ds)
    pod_spec(bad)["containers"][0]["volumeMounts"][0]["readonly"] = True  # readOnly
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(bad)
    bad = copy.deepcopy(ds)
    pod_spec(bad)["containers"][0]["ports"][0]["containerPort"] = "9400"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(bad)
    sm = one(objs, "ServiceMonitor")
    bad = copy.deepcopy(sm)
    bad["spec"]["endpoints"][0]["relabelings"][0]["source_labels"] = ["x"]
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)
    bad = copy.deepcopy(sm)
    bad["spec"]["endpoints"][0]["relabelings"][0]["action"] = "rename"
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)
    rule = one(objs, "PrometheusRule")
    bad = copy.deepcopy(rule)
    bad["spec"]["groups"][0]["rules"][0]["alert"] = "Both"  # a rule is a record or an alert
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)
    bad = copy.deepcopy(ds)
    bad["metadata"]["labels"]["app.kubernetes.io/version"] = "v" * 64
    with pytest.raises(AssertionError):
        validate(bad)


# --- the exporter DaemonSet -------------------------------------------------------------------


def test_exporter_daemonset_defaults() -> None:
    objs = render()
    ds = one(objs, "DaemonSet", "exporter")
    spec = pod_spec(ds)
    c = exporter_container(objs)
    assert c["command"] == ["migscope-exporter"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["automountServiceAccountToken"] is False
    assert "priorityClassName" not in spec
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert c["ports"] == [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}]
    assert "--listen=:9400" in c["args"]
    for probe in (c["livenessProbe"], c["readinessProbe"]):
        assert probe["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}
    assert set(c["resources"]) == {"requests", "limits"}
    assert set(c["resources"]["limits"]) == {"cpu", "memory"}
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    # SYS_ADMIN for NVML's GPU-instance queries (docs/install.md#privileges, which
    # tests/deploy/test_helm_privileges.py holds the DaemonSet to)
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    assert not sc.get("privileged")
    priority = render({"exporter": {"priorityClassName": "system-node-critical"}})
    assert pod_spec(one(priority, "DaemonSet"))["priorityClassName"] == "system-node-critical"
    no_runtime = render({"exporter": {"runtimeClassName": ""}})
    assert "runtimeClassName" not in pod_spec(one(no_runtime, "DaemonSet"))


def test_pod_resources_socket_is_mounted_read_only_and_only_then_root() -> None:
    objs = render()
    ds = one(objs, "DaemonSet", "exporter")
    c = exporter_container(objs)
    (vol,) = [v for v in pod_spec(ds)["volumes"] if "hostPath" in v]
    # the directory, not the socket file: the kubelet recreates the socket when it restarts
    assert vol["hostPath"] == {"path": "/var/lib/kubelet/pod-resources", "type": "Directory"}
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == vol["name"]]
    assert mount["readOnly"] is True
    assert mount["mountPath"] == "/var/lib/kubelet/pod-resources"
    assert "--pod-attribution" in c["args"]
    assert "--kubelet-socket=/var/lib/kubelet/pod-resources/kubelet.sock" in c["args"]
    # root because of the socket (docs/pod-attribution.md); without migMonitor nothing more
    sc = c["securityContext"]
    assert (sc["runAsUser"], sc["runAsNonRoot"]) == (0, False)
    no_monitor = exporter_container(render({"exporter": {"migMonitor": {"enabled": False}}}))
    no_sc = no_monitor["securityContext"]
    assert (no_sc["runAsUser"], no_sc["runAsNonRoot"]) == (0, False)
    assert no_sc["capabilities"] == {"drop": ["ALL"]}


def test_without_pod_attribution_the_exporter_runs_as_non_root_with_no_host_path() -> None:
    objs = render(VALUE_SETS["no-attribution"])
    ds = one(objs, "DaemonSet", "exporter")
    c = exporter_container(objs)
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == 65532  # the image's user (deploy/Dockerfile)
    assert sc["runAsGroup"] == 65532
    assert not [v for v in pod_spec(ds)["volumes"] if "hostPath" in v]
    assert "--no-pod-attribution" in c["args"]
    assert not [a for a in c["args"] if a.startswith("--kubelet-socket")]


def test_a_custom_kubelet_root_moves_mount_and_socket_together() -> None:
    objs = render(VALUE_SETS["everything"])
    c = exporter_container(objs)
    path = "/var/snap/microk8s/common/var/lib/kubelet/pod-resources"
    (vol,) = [
        v for v in pod_spec(one(objs, "DaemonSet"))["volumes"] if v["name"] == "pod-resources"
    ]
    assert vol["hostPath"]["path"] == path
    assert "--dcgm-bindings=/opt/dcgm/bindings/python3" in c["args"]
    assert {"name": "dcgm", "mountPath": "/opt/dcgm", "readOnly": True} in c["volumeMounts"]
    assert f"--kubelet-socket={path}/kubelet.sock" in c["args"]
    assert c["securityContext"]["seLinuxOptions"] == {"type": "spc_t"}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True  # merged, not replaced


def test_exporter_port_matches_the_image() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert re.findall(r"^EXPOSE (\d+)$", dockerfile, re.M) == ["9400"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["exporter"]["port"] == 9400
    # the image's user is the one the chart runs as without pod attribution
    assert set(re.findall(r"^USER (\d+):", dockerfile, re.M)) == {"65532"}
    assert values["jobPodSecurityContext"]["runAsUser"] == 65532


# --- scraping ---------------------------------------------------------------------------------


def relabel(labels: dict[str, str], configs: list[dict[str, Any]]) -> dict[str, str]:
    """Prometheus' relabeling for the actions the chart uses (anchored RE2-like regexes)."""
    out = dict(labels)
    for cfg in configs:
        action = cfg.get("action", "replace").lower()
        regex = re.compile(f"^(?:{cfg.get('regex', '(.*)')})$")
        if action == "replace":
            value = cfg.get("separator", ";").join(
                out.get(s, "") for s in cfg.get("sourceLabels", [])
            )
            m = regex.match(value)
            if m:
                new = m.expand(cfg.get("replacement", "$1").replace("$", "\\"))
                if new:
                    out[cfg["targetLabel"]] = new
                else:
                    out.pop(cfg["targetLabel"], None)
        elif action == "labeldrop":
            out = {k: v for k, v in out.items() if not regex.match(k)}
        else:  # pragma: no cover - the chart uses no other action
            raise AssertionError(action)
    return out


# What the prometheus-operator sets on each target before the chart's relabelings run.
TARGET = {
    "__meta_kubernetes_pod_node_name": "gpu-node-a",
    "__address__": "10.0.0.7:9400",
    "namespace": NAMESPACE,
    "pod": "migscope-exporter-x7k2p",
    "container": "exporter",
    "service": "migscope-exporter",
    "endpoint": "metrics",
    "job": "migscope",
}


def test_service_monitor_labels_every_target_with_its_node() -> None:
    objs = render()
    sm = one(objs, "ServiceMonitor")
    svc = one(objs, "Service", "exporter")
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] == svc["spec"]["ports"][0]["name"] == "metrics"
    assert endpoint["path"] == "/metrics"
    assert endpoint["scheme"] == "http"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert svc["spec"]["clusterIP"] == "None"
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node",
            "action": "replace"} in endpoint["relabelings"]  # fmt: skip
    labels = relabel(TARGET, endpoint["relabelings"])
    assert labels["node"] == "gpu-node-a"
    # a restarted exporter (a new pod address) continues the same series
    assert labels["instance"] == "gpu-node-a"
    # the exporter pod's own namespace/pod/container are dropped: on *_pod_info series these
    # names are the workload's, and must not become exported_namespace/exported_pod
    assert not {"namespace", "pod", "container"} & labels.keys()
    assert endpoint["honorLabels"] is True
    # the analyzer and the dashboards read the node from exactly this label
    from migscope.analyzer._intake.dialect import NODE_LABELS

    assert NODE_LABELS[0] == "node"
    # job="migscope" whatever the release is called: the rules select up{job=~".*migscope.*"}
    raw = render_raw({}, release="obs")
    other = [d for p, t in raw.items() if p.endswith(".yaml") for d in yaml.safe_load_all(t)]
    (other_svc,) = [d for d in other if d and d["kind"] == "Service"]
    (other_sm,) = [d for d in other if d and d["kind"] == "ServiceMonitor"]
    assert other_svc["metadata"]["name"] == "obs-migscope-exporter"
    assert other_svc["metadata"]["labels"][other_sm["spec"]["jobLabel"]] == "migscope"
    assert 'job=~".*migscope.*"' in RULES.read_text()


def test_pod_monitor_is_the_alternative() -> None:
    objs = render(VALUE_SETS["podmonitor"])
    assert not of_kind(objs, "ServiceMonitor")
    pm = one(objs, "PodMonitor")
    (endpoint,) = pm["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics"
    pod_labels = one(objs, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pod_labels[pm["spec"]["jobLabel"]] == "migscope"
    labels = relabel(TARGET, endpoint["relabelings"])
    assert labels["node"] == "gpu-node-a"
    assert labels["instance"] == "gpu-node-a"
    assert "pod" not in labels
    with pytest.raises(helm.HelmError, match="exclude each other"):
        render_raw({"podMonitor": {"enabled": True}})


def test_extra_relabelings_come_after_the_node_and_the_drop_can_be_turned_off() -> None:
    objs = render(VALUE_SETS["everything"])
    (endpoint,) = one(objs, "ServiceMonitor")["spec"]["endpoints"]
    labels = relabel(TARGET, endpoint["relabelings"])
    assert labels["node"] == "gpu-node-a"
    assert labels["cluster"] == "prod"
    assert labels["pod"] == TARGET["pod"]  # dropTargetLabels: ""
    assert "instance" not in labels  # instanceFromNode: false: Prometheus sets __address__
    assert one(objs, "ServiceMonitor")["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def _openssl_cert(directory: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl not installed (Debian package openssl)")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", "tls.key", "-out", "tls.crt", "-days", "2", "-subj", "/CN=x"],
        cwd=directory, check=True, capture_output=True,
    )  # fmt: skip
    shutil.copy(directory / "tls.crt", directory / "ca.crt")


@pytest.mark.parametrize("name", ["tls", "mtls"])
def test_tls_web_config_is_one_the_exporter_accepts(name: str, tmp_path: Path) -> None:
    from migscope.exporter._http import load_web_config

    objs = render(VALUE_SETS[name])
    c = exporter_container(objs)
    ds = one(objs, "DaemonSet")
    (secret,) = of_kind(objs, "Secret")
    assert "--web-config=/etc/migscope/web/web-config.yml" in c["args"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/etc/migscope/web"]["readOnly"] is True
    assert mounts["/etc/migscope/tls"]["readOnly"] is True
    volumes = {v["name"]: v for v in pod_spec(ds)["volumes"]}
    web_volume = volumes[mounts["/etc/migscope/web"]["name"]]
    assert web_volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert (
        volumes[mounts["/etc/migscope/tls"]["name"]]["secret"]["secretName"]
        == "migscope-exporter-tls"
    )
    assert "checksum/web-config" in ds["spec"]["template"]["metadata"]["annotations"]
    # the rendered file, with the Secret's mount moved into tmp_path, loads in the exporter
    _openssl_cert(tmp_path)
    text = secret["stringData"]["web-config.yml"].replace("/etc/migscope/tls", str(tmp_path))
    (tmp_path / "web-config.yml").write_text(text)
    config = load_web_config(tmp_path / "web-config.yml")
    assert config.ssl_context() is not None
    probe = c["livenessProbe"]
    if name == "tls":
        # HTTPS probes; /healthz needs no credentials, so none are in the pod spec
        assert probe["httpGet"]["scheme"] == "HTTPS"
        assert "httpHeaders" not in probe["httpGet"]
        (endpoint,) = one(objs, "ServiceMonitor")["spec"]["endpoints"]
        assert endpoint["scheme"] == "https"
        assert endpoint["tlsConfig"]["ca"]["secret"]["key"] == "ca.crt"
        assert endpoint["basicAuth"]["password"]["name"] == "migscope-scrape"
        assert "prometheus" in config.users
    else:
        # the kubelet has no client certificate: connect-only probes (docs/http.md)
        assert probe == {**probe, "tcpSocket": {"port": "metrics"}}
        assert "httpGet" not in probe
        (endpoint,) = one(objs, "PodMonitor")["spec"]["podMetricsEndpoints"]
        assert endpoint["scheme"] == "https"


def test_tls_secret_alone_makes_a_server_tls_web_config() -> None:
    objs = render({"exporter": {"webConfig": {"enabled": True, "tlsSecret": "t"}}})
    (secret,) = of_kind(objs, "Secret")
    assert yaml.safe_load(secret["stringData"]["web-config.yml"]) == {
        "tls_server_config": {
            "cert_file": "/etc/migscope/tls/tls.crt",
            "key_file": "/etc/migscope/tls/tls.key",
        }
    }
    assert one(objs, "ServiceMonitor")["spec"]["endpoints"][0]["scheme"] == "https"
    existing = render(VALUE_SETS["everything"])
    assert not of_kind(existing, "Secret")  # existingSecret: the chart makes none
    # ... and cannot read it: `tls` says whether it serves HTTPS
    assert one(existing, "ServiceMonitor")["spec"]["endpoints"][0]["scheme"] == "https"
    plain = render({"exporter": {"webConfig": {"enabled": True, "existingSecret": "s"}}})
    assert one(plain, "ServiceMonitor")["spec"]["endpoints"][0]["scheme"] == "http"
    assert exporter_container(plain)["livenessProbe"]["httpGet"]["scheme"] == "HTTP"
    forced = {"enabled": True, "existingSecret": "s", "tls": True}
    https = exporter_container(render({"exporter": {"webConfig": forced}}))
    assert https["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    with pytest.raises(helm.HelmError, match="webConfig"):
        render_raw({"exporter": {"webConfig": {"enabled": True}}})


# --- CronJobs and RBAC ------------------------------------------------------------------------


def test_report_cronjob() -> None:
    objs = render()
    cj = one(objs, "CronJob", "report")
    assert cj["spec"]["concurrencyPolicy"] == "Forbid"
    spec = pod_spec(cj)
    assert spec["restartPolicy"] == "Never"
    assert spec["securityContext"]["runAsNonRoot"] is True
    (c,) = spec["containers"]
    assert c["args"][0] == "analyze"
    assert "--prometheus=http://prometheus-operated.monitoring.svc:9090" in c["args"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    (reports,) = [m for m in c["volumeMounts"] if m["name"] == "reports"]
    assert reports["mountPath"] == "/reports"
    assert {e["name"]: e.get("value") for e in c["env"]}["REPORT_DIR"] == "/reports"
    (vol,) = [v for v in spec["volumes"] if v["name"] == "reports"]
    pvc = one(objs, "PersistentVolumeClaim")
    assert vol["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    # emptyDir: no claim; existingClaim: that claim
    assert not of_kind(render(VALUE_SETS["everything"]), "PersistentVolumeClaim")
    other = render({"report": {"storage": {"type": "existingClaim", "existingClaim": "old"}}})
    assert not of_kind(other, "PersistentVolumeClaim")
    (vol,) = [v for v in pod_spec(one(other, "CronJob"))["volumes"] if v["name"] == "reports"]
    assert vol["persistentVolumeClaim"]["claimName"] == "old"
    # values.schema.json refuses it first (at '/report/storage/type'); the template's own fail
    # ("report.storage.type must be ...") stays for helm --skip-schema-validation
    with pytest.raises(helm.HelmError, match=r"storage[./]type"):
        render_raw({"report": {"storage": {"type": "s3"}}})


def test_analyzer_settings_reach_both_jobs_and_the_policy_parses() -> None:
    from migscope.analyzer._judge.policy import parse_policy

    objs = render(VALUE_SETS["everything"])
    (policy_cm,) = [c for c in of_kind(objs, "ConfigMap") if "policy.yaml" in c["data"]]
    assert parse_policy(policy_cm["data"]["policy.yaml"]).idle.activity_p95_below == 0.02
    for component in ("report", "apply"):
        cj = one(objs, "CronJob", component)
        (analyze,) = [c for c in containers(cj) if c["args"][0] == "analyze"]
        args = analyze["args"]
        assert "--policy=/etc/migscope/policy/policy.yaml" in args
        assert "--bearer-token-file=/etc/migscope/prometheus/token" in args
        assert "--price-per-gpu-hour=3.5" in args
        assert "--pending-pods=on" in args
        assert "--stats=fast" in args
        assert "--what-if=*=all-balanced" in args
        mounts = {m["mountPath"] for m in analyze["volumeMounts"]}
        assert {"/etc/migscope/policy", "/etc/migscope/prometheus"} <= mounts
        assert all(c["image"].endswith("@sha256:" + "a" * 64) for c in containers(cj))


def _analyze_container(objs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    (analyze,) = [
        c for c in containers(one(objs, "CronJob", component)) if c["args"][0] == "analyze"
    ]
    return analyze


def _mounted_source(obj: dict[str, Any], container: dict[str, Any], path: str) -> tuple[str, str]:
    """``(kind/name of the volume's Secret or ConfigMap, key)`` that a file path comes from."""
    (mount,) = [m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
    assert mount.get("readOnly") is True, mount
    (volume,) = [v for v in pod_spec(obj)["volumes"] if v["name"] == mount["name"]]
    key = path[len(mount["mountPath"]) + 1 :]
    if "secret" in volume:
        return f"Secret/{volume['secret']['secretName']}", key
    return f"ConfigMap/{volume['configMap']['name']}", key


def test_server_access_values_reach_both_jobs_as_flags_on_mounted_files() -> None:
    objs = render(VALUE_SETS["server-access"])
    for component in ("report", "apply"):
        cj = one(objs, "CronJob", component)
        analyze = _analyze_container(objs, component)
        args = analyze["args"]
        assert "--prometheus=https://mimir.example/prometheus" in args
        assert "--tenant=gpu-team|ml-team" in args
        assert {"--header=THANOS-TENANT: gpu-team", "--header=X-Trace: on"} <= set(args)
        assert "--basic-auth-user=123456" in args
        files = {flag: value for flag, _, value in (a.partition("=") for a in args) if value}
        assert {
            flag: _mounted_source(cj, analyze, files[flag])
            for flag in (
                "--header-file",
                "--basic-auth-password-file",
                "--ca-file",
                "--client-cert",
                "--client-key",
            )
        } == {
            "--header-file": ("Secret/gateway-key", "headers"),
            "--basic-auth-password-file": ("Secret/mimir-auth", "password"),
            "--ca-file": ("ConfigMap/openshift-service-ca.crt", "service-ca.crt"),
            "--client-cert": ("Secret/migscope-client-tls", "tls.crt"),
            "--client-key": ("Secret/migscope-client-tls", "tls.key"),
        }
        # Credentials are readable by the job's group (fsGroup) only, not by every user.
        for volume in pod_spec(cj)["volumes"]:
            if volume["name"] in (
                "prometheus-headers",
                "prometheus-basic-auth",
                "prometheus-client",
            ):
                assert volume["secret"]["defaultMode"] == 0o440
    # Nothing of this without the values: the defaults send no tenant, header or certificate.
    default_args = _analyze_container(render(), "report")["args"]
    access_flags = ("--tenant", "--header", "--basic-auth", "--ca-file", "--client-", "--insecure")
    assert not [a for a in default_args if a.startswith(access_flags)]
    secret_ca = render({"analyzer": {"tls": {"caSecret": {"name": "prom-ca"}}}})
    cj = one(secret_ca, "CronJob", "report")
    analyze = _analyze_container(secret_ca, "report")
    (ca_arg,) = [a for a in analyze["args"] if a.startswith("--ca-file=")]
    assert _mounted_source(cj, analyze, ca_arg.partition("=")[2]) == ("Secret/prom-ca", "ca.crt")
    insecure = render({"analyzer": {"tls": {"insecureSkipVerify": True}}})
    assert "--insecure-skip-verify" in _analyze_container(insecure, "report")["args"]


@pytest.mark.parametrize(
    ("analyzer", "message"),
    [
        ({"basicAuth": {"username": "u"}}, "basicAuth.username needs"),
        ({"basicAuth": {"passwordSecret": {"name": "s"}}}, "passwordSecret needs"),
        (
            {
                "basicAuth": {"username": "u", "passwordSecret": {"name": "s"}},
                "bearerTokenSecret": {"name": "t", "key": "token"},
            },
            "exclude each other",
        ),
        (
            {"tls": {"caSecret": {"name": "a"}, "caConfigMap": {"name": "b"}}},
            "caSecret and analyzer.tls.caConfigMap exclude each other",
        ),
        (
            {"tls": {"caSecret": {"name": "a"}, "insecureSkipVerify": True}},
            "insecureSkipVerify makes the CA pointless",
        ),
        ({"tenant": "a", "headers": {"x-scope-orgid": "b"}}, "give the tenant once"),
        ({"headersSecret": {"key": "headers"}}, "headersSecret.name is required"),
        ({"tls": {"caConfigMap": {"key": "ca.crt"}}}, "caConfigMap.name is required"),
    ],
)
def test_server_access_mistakes_fail_the_install(analyzer: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmError, match=re.escape(message)):
        render_raw({"analyzer": analyzer})


def test_rendered_access_flags_send_the_tenant_and_headers(tmp_path: Path) -> None:
    """The chart's own arguments, with its mount paths pointed at files here, run `analyze`
    against a real HTTP server that records what arrives (the TLS flags are proved against a
    real Prometheus in tests/cli/test_analyze_access.py)."""
    from click.testing import CliRunner
    from support.prometheus import FaultProxy, Reply

    from migscope.cli.main import cli

    values = copy.deepcopy(VALUE_SETS["server-access"])
    del values["analyzer"]["tls"]
    mounted = {
        "/etc/migscope/prometheus-headers/headers": "X-Api-Key: k3y-from-a-secret\n",
        "/etc/migscope/prometheus-basic-auth/password": "pa55word\n",
    }
    argv = _analyze_container(render(values), "report")["args"]
    for path, text in mounted.items():
        local = tmp_path / path.rsplit("/", 1)[1]
        local.write_text(text)
        argv = [a.replace(path, str(local)) for a in argv]
    # The report volume, mounted at /reports in the pod, always exists there.
    reports = tmp_path / "reports"
    reports.mkdir()
    argv = [
        f"--previous-reports={reports}" if a == "--previous-reports=/reports" else a for a in argv
    ]
    assert f"--previous-reports={reports}" in argv
    empty = Reply(200, '{"status": "success", "data": []}')  # a server without MIG series
    with FaultProxy(default=empty) as proxy:
        argv = [f"--prometheus={proxy.url}" if a.startswith("--prometheus=") else a for a in argv]
        result = CliRunner().invoke(cli, [*argv, "--pending-pods=off"])
        requests = list(proxy.requests)
    assert result.exit_code == 1
    assert "no MIG series found" in result.stderr  # it got as far as asking the server
    assert requests
    for request in requests:
        assert request.headers["x-scope-orgid"] == "gpu-team|ml-team"
        assert request.headers["thanos-tenant"] == "gpu-team"
        assert request.headers["x-trace"] == "on"
        assert request.headers["x-api-key"] == "k3y-from-a-secret"
        assert request.headers["authorization"] == "Basic MTIzNDU2OnBhNTV3b3Jk"  # 123456:pa55word
    assert "k3y-from-a-secret" not in result.stderr
    assert "pa55word" not in result.stderr


def _run_report_script(
    tmp_path: Path, script: str, args: list[str], runs: int, fail: bool = False
) -> Path:
    """Run the report container's shell script with a fake `migscope` and `date` on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake_migscope = bin_dir / "migscope"
    fake_migscope.write_text(
        "#!/bin/sh\n"
        'printf "%s\\n" "$@" > "$CALLS/$(ls "$CALLS" | wc -l)"\n'
        f"{'exit 1' if fail else ''}\n"
        'for a in "$@"; do case "$a" in --out=*) mkdir -p "${a#--out=}" && '
        'echo "{}" > "${a#--out=}/report.json";; esac; done\n'
    )
    fake_date = bin_dir / "date"  # a new second on every call, so run directories differ
    fake_date.write_text(
        '#!/bin/sh\nn=$(cat "$CALLS/../clock" 2>/dev/null || echo 0); n=$((n + 1))\n'
        'echo "$n" > "$CALLS/../clock"; printf "20260101T0000%02dZ\\n" "$n"\n'
    )
    for f in (fake_migscope, fake_date):
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    calls = tmp_path / "calls"
    calls.mkdir(exist_ok=True)
    reports = tmp_path / "reports"
    reports.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "CALLS": str(calls),
        "REPORT_DIR": str(reports),
        "REPORT_KEEP": "2",
    }
    for _ in range(runs):
        proc = subprocess.run(
            ["/bin/sh", "-c", script, "migscope-report", *args],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert (proc.returncode != 0) == fail, proc.stderr
    return reports


def test_report_script_keeps_the_newest_runs_and_points_latest_at_the_last(tmp_path: Path) -> None:
    c = pod_spec(one(render(), "CronJob", "report"))["containers"][0]
    assert c["command"][:2] == ["/bin/sh", "-c"]
    keep = {e["name"]: e.get("value") for e in c["env"]}["REPORT_KEEP"]
    assert keep == str(yaml.safe_load((CHART / "values.yaml").read_text())["report"]["keep"])
    reports = _run_report_script(tmp_path, c["command"][2], c["args"], runs=3)
    runs = sorted(p.name for p in reports.iterdir() if not p.is_symlink())
    assert runs == ["20260101T000002Z", "20260101T000003Z"]  # REPORT_KEEP=2
    assert os.readlink(reports / "latest") == "20260101T000003Z"  # relative: survives remounts
    assert (reports / "latest" / "report.json").exists()
    assert sorted(p.name for p in reports.iterdir()) == [*runs, "latest"]  # no staging leftovers
    first_call = (tmp_path / "calls" / "0").read_text().split()
    assert first_call == [*c["args"], f"--out={reports}/20260101T000001Z"]


def test_a_failed_analysis_fails_the_job_and_keeps_latest(tmp_path: Path) -> None:
    c = pod_spec(one(render(), "CronJob", "report"))["containers"][0]
    reports = _run_report_script(tmp_path, c["command"][2], c["args"], runs=1, fail=True)
    assert not (reports / "latest").exists()


def test_apply_cronjob_and_its_rbac_exist_only_when_enabled() -> None:
    off = render()
    assert not [o for o in of_kind(off, "CronJob") if "apply" in o["metadata"]["name"]]
    assert not of_kind(off, "Role")
    assert not of_kind(off, "RoleBinding")
    assert [o["metadata"]["name"] for o in of_kind(off, "ClusterRole")] == ["migscope-report"]
    assert {o["metadata"]["name"] for o in of_kind(off, "ServiceAccount")} == {
        "migscope-exporter",
        "migscope-report",
    }
    assert "Apply is off" in notes()

    on = render(VALUE_SETS["apply"])
    cj = one(on, "CronJob", "apply")
    assert cj["spec"]["concurrencyPolicy"] == "Forbid"
    assert cj["spec"]["timeZone"] == "Europe/Berlin"
    spec = pod_spec(cj)
    (init,) = spec["initContainers"]
    (apply,) = spec["containers"]
    assert init["args"][0] == "analyze"
    assert "--out=/plan" in init["args"]
    assert apply["args"][:3] == ["apply", "--plan=/plan/report.json", "--apply"]
    assert "--drain" in apply["args"]
    assert "--maintenance-window=sat-sun 01:00-05:00 UTC" in apply["args"]
    assert "--namespace=gpu-operator" in apply["args"]
    assert "--configmap=migscope-mig-parted-config" in apply["args"]
    assert spec["serviceAccountName"] == "migscope-apply"
    role = one(on, "Role")
    assert role["metadata"]["namespace"] == "gpu-operator"
    assert one(on, "RoleBinding")["metadata"]["namespace"] == "gpu-operator"
    for binding in (one(on, "RoleBinding"), *of_kind(on, "ClusterRoleBinding")):
        if binding["roleRef"]["name"] == "migscope-applier":
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": "migscope-apply", "namespace": NAMESPACE}
            ]
    without_drain = render({"apply": {"enabled": True}})
    assert (
        "--drain" not in pod_spec(one(without_drain, "CronJob", "apply"))["containers"][0]["args"]
    )
    no_rbac = render({"apply": {"enabled": True}, "rbac": {"create": False}})
    assert not of_kind(no_rbac, "Role")
    assert not of_kind(no_rbac, "ClusterRole")


def _rules(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert not rule.get("resourceNames")
        assert not rule.get("nonResourceURLs")
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                key = (group, resource)
                assert key not in out, f"{key} granted twice"
                out[key] = set(rule["verbs"])
    return out


def documented_rbac() -> tuple[dict[tuple[str, str], set[str]], set[str], set[str]]:
    """docs/applier.md's RBAC table, and which resources it says are cluster-wide/namespaced."""
    text = (ROOT / "docs" / "applier.md").read_text()
    section = text.split("## RBAC: exactly what it needs", 1)[1]
    table: dict[tuple[str, str], set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            group = cells[0].strip("`").strip('"')
            verbs = {v.strip().strip("`") for v in cells[2].split(",")}
            table[(group, cells[1].strip("`"))] = verbs
    cluster = re.search(r"Cluster-wide \(ClusterRole\): ([^.]+)\.", section)
    namespaced = re.search(r"Namespaced\s+\(Role[^)]*\): ([^.]+)\.", section)
    assert cluster is not None
    assert namespaced is not None
    assert len(table) == 10
    split = lambda s: {x.strip() for x in s.replace("\n", " ").split(",")}  # noqa: E731
    return table, split(cluster[1]), split(namespaced[1])


def test_rbac_is_exactly_the_documented_table() -> None:
    table, cluster_wide, namespaced = documented_rbac()
    objs = render(VALUE_SETS["apply"])
    (applier,) = [
        o for o in of_kind(objs, "ClusterRole") if o["metadata"]["name"].endswith("-applier")
    ]
    cluster_role = _rules(applier)
    role = _rules(one(objs, "Role"))
    assert cluster_role == {k: v for k, v in table.items() if k[1] in cluster_wide}
    assert role == {k: v for k, v in table.items() if k[1] in namespaced}
    assert cluster_role.keys() | role.keys() == table.keys()
    # report-only: "needs `pods: list` and nothing else"
    report = _rules(one(render(), "ClusterRole", "report"))
    assert report == {("", "pods"): {"list"}}
    assert table[("", "pods")] == {"list"}


def test_every_migscope_command_and_flag_in_the_templates_exists() -> None:
    from click.testing import CliRunner

    from migscope.cli.main import cli

    runner = CliRunner()
    seen: set[str] = set()
    for name, values in VALUE_SETS.items():
        for obj in of_kind(render(values), "DaemonSet") + of_kind(render(values), "CronJob"):
            for c in containers(obj):
                argv = migscope_argv(c)
                sub = argv[0]
                result = runner.invoke(cli, [sub, "--help"])
                assert result.exit_code == 0, (sub, result.output)
                assert "(unavailable" not in result.output, result.output
                for arg in argv[1:]:
                    if arg.startswith("--"):
                        flag = arg.split("=", 1)[0]
                        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", result.output), (
                            f"{name}: `migscope {sub}` has no {flag}"
                        )
                        seen.add(f"{sub} {flag}")
                # and the arguments parse: choices, numbers, durations' types
                command = cli.get_command(cli.make_context("migscope", [sub]), sub)
                assert command is not None
                command.make_context(sub, list(argv[1:]))
                for arg in argv[1:]:  # values that the commands parse only when they run
                    flag, _, value = arg.partition("=")
                    parse = VALUE_PARSERS.get((sub, flag))
                    if parse is not None and value not in ("0", "0s"):
                        parse(value)
    assert {"exporter --kubelet-socket", "analyze --out", "apply --plan", "apply --apply"} <= seen


def _value_parsers() -> dict[tuple[str, str], Any]:
    from migscope.applier._settings import parse_window_spec
    from migscope.cli._analyze_inputs import parse_window
    from migscope.cli._server_access import parse_header

    durations = ("--node-timeout", "--drain-timeout", "--lease-wait")
    return {
        ("analyze", "--window"): parse_window,
        ("analyze", "--header"): lambda value: parse_header(value, "--header"),
        ("apply", "--maintenance-window"): parse_window_spec,
        **{("apply", flag): parse_window for flag in durations},
    }


VALUE_PARSERS = _value_parsers()


def migscope_argv(container: dict[str, Any]) -> list[str]:
    """`migscope`'s arguments in a container: exec form, or the report's sh -c wrapper."""
    command, args = container.get("command", []), container.get("args", [])
    if command[:1] == ["migscope"]:
        return [*command[1:], *args]
    if command[:1] == ["migscope-exporter"]:  # the exporter image's command is `migscope exporter`
        return ["exporter", *command[1:], *args]
    assert command[:2] == ["/bin/sh", "-c"], f"{container['name']}: not a migscope command"
    script = command[2]
    (rest,) = re.findall(r'^\s*migscope "\$@"(.*)$', script, re.M)
    extra = [re.sub(r'"[^"]*"', "X", tok) for tok in rest.split()]
    return [*args, *extra]


def test_flag_check_catches_an_unknown_flag() -> None:
    from click.testing import CliRunner

    from migscope.cli.main import cli

    output = CliRunner().invoke(cli, ["analyze", "--help"]).output
    assert re.search(r"(?<![\w-])--out(?![\w-])", output)
    assert not re.search(r"(?<![\w-])--output-dir(?![\w-])", output)
    command = cli.get_command(cli.make_context("migscope", ["apply"]), "apply")
    assert command is not None
    with pytest.raises(Exception, match="no-such-flag"):
        command.make_context("apply", ["--plan=x", "--no-such-flag"])


def test_cron_schedules_parse() -> None:
    from apscheduler.triggers.cron import CronTrigger

    for obj in of_kind(render(VALUE_SETS["apply"]), "CronJob"):
        CronTrigger.from_crontab(obj["spec"]["schedule"])  # raises on a malformed line
    with pytest.raises(ValueError, match="Wrong number of fields"):
        CronTrigger.from_crontab("0 6 * *")


# --- rules, dashboards and the files copied into the chart ------------------------------------


def test_prometheus_rule_is_the_rules_file() -> None:
    rule = one(render(), "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    assert not of_kind(render({"prometheusRule": {"enabled": False}}), "PrometheusRule")
    labelled = one(render(VALUE_SETS["everything"]), "PrometheusRule")
    assert labelled["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_dashboards_configmaps_carry_the_sidecar_label() -> None:
    # the chart's copies (test_chart_copies_are_identical_to_their_sources ties them to dashboards/)
    sources = sorted((CHART / "files" / "dashboards").glob("*.json"))
    assert sources
    cms = of_kind(render(), "ConfigMap")
    assert len(cms) == len(sources)
    by_key = {}
    for cm in cms:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        (key,) = cm["data"]
        by_key[key] = json.loads(cm["data"][key])
    assert by_key == {p.name: json.loads(p.read_text()) for p in sources}
    custom = of_kind(render(VALUE_SETS["everything"]), "ConfigMap")
    dashboards = [c for c in custom if c["metadata"]["labels"].get("grafana_dashboard")]
    assert {c["metadata"]["labels"]["grafana_dashboard"] for c in dashboards} == {"migscope"}
    assert all(c["metadata"]["annotations"] == {"grafana_folder": "MIG"} for c in dashboards)
    moved = of_kind(render({"dashboards": {"namespace": "grafana"}}), "ConfigMap")
    assert {c["metadata"]["namespace"] for c in moved} == {"grafana"}
    assert not of_kind(render({"dashboards": {"enabled": False}}), "ConfigMap")


def _copies() -> dict[Path, Path]:
    """Source file -> its copy inside the chart, for every file sync-files.sh copies."""
    pairs = {RULES: CHART / "files" / "prometheus" / RULES.name} if RULES.exists() else {}
    pairs.update({p: CHART / "files" / "dashboards" / p.name for p in DASHBOARDS.glob("*.json")})
    return pairs


def test_chart_copies_are_identical_to_their_sources() -> None:
    pairs = _copies()
    for source, copy_ in pairs.items():
        assert copy_.exists(), f"{copy_} missing: run deploy/helm/sync-files.sh"
        assert copy_.read_bytes() == source.read_bytes(), (
            f"{copy_.relative_to(ROOT)} differs from {source.relative_to(ROOT)}: "
            "run deploy/helm/sync-files.sh"
        )
    in_chart = {p for p in (CHART / "files").rglob("*") if p.is_file()}
    assert in_chart == set(pairs.values()), "a copy without a source: run deploy/helm/sync-files.sh"
    # the script's own check agrees
    proc = subprocess.run(["sh", str(SYNC), "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_sync_script_finds_and_fixes_drift(tmp_path: Path) -> None:
    """In a scratch copy of the repository layout: --check fails on drift, a run fixes it."""
    shutil.copytree(ROOT / "deploy" / "helm", tmp_path / "deploy" / "helm")
    shutil.copytree(DASHBOARDS, tmp_path / "dashboards")
    shutil.copytree(RULES.parent, tmp_path / "deploy" / "prometheus")
    script = tmp_path / "deploy" / "helm" / "sync-files.sh"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", str(script), *args], capture_output=True, text=True, check=False
        )

    assert run().returncode == 0  # in sync whatever state the working tree is in
    assert run("--check").returncode == 0
    (tmp_path / "dashboards" / "migscope-node.json").write_text('{"changed": true}\n')
    (tmp_path / "dashboards" / "migscope-new.json").write_text("{}\n")
    (tmp_path / "deploy" / "helm" / "migscope" / "files" / "dashboards" / "old.json").write_text(
        "{}"
    )
    proc = run("--check")
    assert proc.returncode == 1
    assert "migscope-node.json" in proc.stderr
    assert "migscope-new.json" in proc.stderr
    assert "old.json (no source)" in proc.stderr
    assert run().returncode == 0
    assert run("--check").returncode == 0
    files = tmp_path / "deploy" / "helm" / "migscope" / "files" / "dashboards"
    assert (files / "migscope-node.json").read_text() == '{"changed": true}\n'
    assert sorted(p.name for p in files.iterdir()) == sorted(
        p.name for p in (tmp_path / "dashboards").glob("*.json")
    )
    assert "old.json" not in {p.name for p in files.iterdir()}


def test_a_missing_rules_file_is_an_error_not_an_empty_rule(tmp_path: Path) -> None:
    chart = tmp_path / "migscope"
    shutil.copytree(CHART, chart)
    (chart / "files" / "prometheus" / RULES.name).unlink()
    with helm.Chart.load(str(chart)) as c:
        with pytest.raises(helm.HelmError, match=r"sync-files\.sh"):
            c.render({}, name=RELEASE, namespace=NAMESPACE)
        assert "PrometheusRule" not in "".join(
            c.render(
                {"prometheusRule": {"enabled": False}}, name=RELEASE, namespace=NAMESPACE
            ).values()
        )


# --- NOTES, values table, docs ----------------------------------------------------------------


def test_notes_point_mig_manager_at_migscope_configmap() -> None:
    text = notes(VALUE_SETS["apply"])
    (patch,) = re.findall(r"-p '(\{.*\})'", text)
    assert json.loads(patch)["spec"]["migManager"]["config"]["name"] == "migscope-mig-parted-config"
    assert "kubectl patch clusterpolicies.nvidia.com cluster-policy --type merge" in text
    assert "CHANGES MIG layouts" in text
    assert "migscope-exporter" in notes()


def _values() -> dict[str, Any]:
    return yaml.safe_load((CHART / "values.yaml").read_text())  # type: ignore[no-any-return]


def _leaves(tree: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            yield from _leaves(value, (*prefix, key))
    else:
        yield prefix


def readme_rows() -> dict[str, str]:
    """`key` -> default cell of the values table in the chart's README."""
    text = (CHART / "README.md").read_text()
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^\| `([^`]+)` \| `(.*)` \| .+ \|$", line)
        if m:
            rows[m[1]] = m[2].replace("\\|", "|")
    return rows


def test_every_value_is_in_the_readme_table_with_its_default() -> None:
    values = _values()
    rows = readme_rows()
    assert rows
    for leaf in _leaves(values):
        covered = [
            ".".join(leaf[:i]) for i in range(len(leaf), 0, -1) if ".".join(leaf[:i]) in rows
        ]
        assert covered, f"{'.'.join(leaf)} is not in deploy/helm/migscope/README.md"
    for key, default in rows.items():
        node: Any = values
        for part in key.split("."):
            assert isinstance(node, dict), f"README row {key} is not a value"
            assert part in node, f"README row {key} is not a value"
            node = node[part]
        assert json.loads(default) == node, f"README default of {key}"


def test_readme_table_is_what_gen_values_table_writes() -> None:
    spec = __import__("importlib.util").util.spec_from_file_location("gen_values_table", GEN_TABLE)
    module = __import__("importlib.util").util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    readme = (CHART / "README.md").read_text()
    values_text = (CHART / "values.yaml").read_text()
    assert module.updated_readme(readme, values_text) == readme, (
        "stale table: run .venv/bin/python deploy/helm/gen-values-table.py"
    )
    with pytest.raises(module.UndocumentedValueError, match="newKey"):
        module.rows(values_text + "newKey: 1\n")
    assert module.rows(values_text + "# -- documented.\nnewKey: 1\n")[-1] == (
        "newKey",
        1,
        "documented.",
    )


def test_install_doc_uses_only_real_values() -> None:
    """Every `--set key=` and every chart-values YAML block in docs/install.md is a real value."""
    text = (ROOT / "docs" / "install.md").read_text()
    values = _values()
    rows = readme_rows()
    # every line but the GPU Operator chart's commands (its --set keys are its own) and the
    # ```console transcripts (the schema section shows Helm refusing a misspelt key)
    instructions = re.sub(r"```console\n.*?```", "", text, flags=re.S)
    commands = [c for c in re.split(r"(?<!\\)\n", instructions) if "nvidia/gpu-operator" not in c]
    keys = re.findall(r"--set(?:-string|-json)? ([A-Za-z0-9_.]+)=", "\n".join(commands))
    blocks = re.findall(r"```yaml\n# migscope chart values\n(.*?)```", text, re.S)
    assert keys
    assert blocks
    for block in blocks:
        keys += [".".join(leaf) for leaf in _leaves(yaml.safe_load(block))]
        render(yaml.safe_load(block))  # and they render
    for key in keys:
        parts = key.split(".")
        assert any(".".join(parts[:i]) in rows for i in range(len(parts), 0, -1)), key
        node: Any = values
        for part in parts:
            if not isinstance(node, dict) or not node:
                break  # inside a free-form map (labels, tlsConfig, ...)
            assert part in node, f"docs/install.md: {key} is not a chart value"
            node = node[part]


if __name__ == "__main__":  # pragma: no cover - handy: print a render
    out = render_raw(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})
    for path, body in sorted(out.items()):
        print(f"# {path}\n{body}")
