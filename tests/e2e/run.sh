#!/usr/bin/env bash
# OPT-IN END-TO-END RUN ON A REAL CLUSTER. NEVER RUN IN CI (it refuses when $CI is set).
#
# migscope analyze -> migscope apply (dry run) -> with --apply only, a real change of ONE
# node's MIG layout through the GPU Operator's MIG Manager. See tests/e2e/README.md first:
# the real apply re-creates the MIG instances of the GPUs whose layout changes on that node.
#
# Usage:
#   tests/e2e/run.sh --node NODE --prometheus URL [--out DIR] [--apply] [--drain] [--yes]
#                    [--namespace NS] [--window 7d] [--timeout 20m] [--kubeconfig FILE]
#                    [--bearer-token-file FILE]
#
# Environment: PROM_URL (instead of --prometheus), MIGSCOPE (the migscope command, default
# "migscope"), KUBECONFIG (as kubectl reads it).
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  exit "${1:-2}"
}

die() {
  echo "e2e: $*" >&2
  exit 1
}

step() {
  printf '\n==> %s\n' "$*"
}

NODE=""
PROM="${PROM_URL:-}"
OUT=""
APPLY=0
DRAIN=0
YES=0
NS="gpu-operator"
WINDOW="7d"
TIMEOUT="20m"
TOKEN_FILE=""
MIGSCOPE="${MIGSCOPE:-migscope}"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --node) NODE="${2:?--node needs a value}"; shift 2 ;;
    --prometheus) PROM="${2:?--prometheus needs a value}"; shift 2 ;;
    --out) OUT="${2:?--out needs a value}"; shift 2 ;;
    --apply) APPLY=1; shift ;;
    --drain) DRAIN=1; shift ;;
    --yes) YES=1; shift ;;
    --namespace) NS="${2:?--namespace needs a value}"; shift 2 ;;
    --window) WINDOW="${2:?--window needs a value}"; shift 2 ;;
    --timeout) TIMEOUT="${2:?--timeout needs a value}"; shift 2 ;;
    --kubeconfig) export KUBECONFIG="${2:?--kubeconfig needs a value}"; shift 2 ;;
    --bearer-token-file) TOKEN_FILE="${2:?--bearer-token-file needs a value}"; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "e2e: unknown argument: $1" >&2; usage 2 ;;
  esac
done

if [[ -n "${CI:-}" ]]; then
  die "refusing to run: CI is set. This script changes a real cluster and is never run in CI."
fi
[[ -n "$NODE" ]] || die "--node NODE is required (a MIG-capable test node)"
[[ -n "$PROM" ]] || die "--prometheus URL (or PROM_URL) is required"
(( DRAIN == 0 || APPLY == 1 )) || die "--drain only makes sense with --apply"

# -- preflight ---------------------------------------------------------------------------------

step "preflight"
command -v kubectl >/dev/null || die "kubectl not found on PATH"
command -v "$MIGSCOPE" >/dev/null || die "$MIGSCOPE not found (install migscope or set MIGSCOPE)"
command -v python3 >/dev/null || die "python3 not found (used to cut the plan down to one node)"

CTX="$(kubectl config current-context 2>/dev/null)" || die "no current kubectl context"
SERVER="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
echo "kubectl context: $CTX"
echo "API server:      $SERVER"
echo "test node:       $NODE"
echo "mode:            $([[ $APPLY == 1 ]] && echo "APPLY (changes node $NODE)" || echo "dry run only")"
if (( YES == 0 )); then
  read -r -p "Type the context name to go on against this cluster: " answer
  [[ "$answer" == "$CTX" ]] || die "not confirmed; nothing done"
fi

policies="$(kubectl get clusterpolicies.nvidia.com -o name 2>/dev/null || true)"
[[ -n "$policies" ]] || die "no GPU Operator ClusterPolicy (clusterpolicies.nvidia.com) found"
policy="$(head -n1 <<<"$policies")"
cm_name="$(kubectl get "$policy" -o jsonpath='{.spec.migManager.config.name}')"
echo "ClusterPolicy:   ${policy#*/} (MIG Manager reads configmap: ${cm_name:-"(none: generated/default)"})"
if [[ -z "$cm_name" ]]; then
  echo "note: MIG Manager reads no custom ConfigMap; migscope apply will refuse to relabel and" \
    "print the kubectl patch that points it at one."
fi

kubectl get node "$NODE" >/dev/null || die "node $NODE not found"
capable="$(kubectl get node "$NODE" -o jsonpath='{.metadata.labels.nvidia\.com/mig\.capable}')"
[[ "$capable" == "true" ]] || die "node $NODE does not have nvidia.com/mig.capable=true (has '${capable}')"
PREVIOUS="$(kubectl get node "$NODE" -o jsonpath='{.metadata.labels.nvidia\.com/mig\.config}')"
STATE="$(kubectl get node "$NODE" -o jsonpath='{.metadata.labels.nvidia\.com/mig\.config\.state}')"
CORDONED="$(kubectl get node "$NODE" -o jsonpath='{.spec.unschedulable}')"
echo "node $NODE:      nvidia.com/mig.config=${PREVIOUS:-"(none)"} state=${STATE:-"(none)"}" \
  "unschedulable=${CORDONED:-false}"
case "$STATE" in
  pending | rebooting) die "MIG Manager is busy with $NODE (state $STATE); try later" ;;
esac

# -- analyze -----------------------------------------------------------------------------------

if [[ -z "$OUT" ]]; then
  OUT="$(mktemp -d "${TMPDIR:-/tmp}/migscope-e2e.XXXXXX")"
fi
mkdir -p "$OUT"
step "migscope analyze --prometheus $PROM --out $OUT"
analyze=("$MIGSCOPE" analyze --prometheus "$PROM" --out "$OUT" --window "$WINDOW")
[[ -z "$TOKEN_FILE" ]] || analyze+=(--bearer-token-file "$TOKEN_FILE")
"${analyze[@]}"
[[ -f "$OUT/report.json" ]] || die "analyze wrote no $OUT/report.json"

# The plan cut down to the test node: the real apply may only ever touch that one.
PLAN="$OUT/plan-$NODE.json"
python3 - "$OUT/report.json" "$NODE" "$PLAN" <<'PY'
import json, sys
report, node, out = sys.argv[1:]
with open(report, encoding="utf-8") as f:
    data = json.load(f)
data["recommendations"] = [r for r in data.get("recommendations") or [] if r.get("node") == node]
with open(out, "w", encoding="utf-8") as f:
    json.dump(data, f, indent=2)
print(f"{len(data['recommendations'])} recommendation(s) for {node} -> {out}")
PY

# -- dry runs ----------------------------------------------------------------------------------

step "migscope apply --plan $OUT/report.json (dry run, the whole plan)"
"$MIGSCOPE" apply --plan "$OUT/report.json" --namespace "$NS" --context "$CTX" || true

step "migscope apply --plan $PLAN (dry run, $NODE only)"
set +e
"$MIGSCOPE" apply --plan "$PLAN" --namespace "$NS" --context "$CTX"
dry=$?
set -e
(( dry == 0 )) || die "the dry run for $NODE failed (exit $dry); not applying"

if (( APPLY == 0 )); then
  step "dry run only: nothing was changed. Add --apply to change $NODE."
  exit 0
fi
if ! python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["recommendations"] else 1)' "$PLAN"; then
  step "the analyzer recommends no change for $NODE: nothing to apply"
  exit 0
fi

# -- the real apply: one node ------------------------------------------------------------------

step "migscope apply --plan $PLAN --apply --max-nodes 1 (changes $NODE)"
apply=("$MIGSCOPE" apply --plan "$PLAN" --apply --max-nodes 1 --namespace "$NS" --context "$CTX"
  --timeout "$TIMEOUT")
(( DRAIN == 0 )) || apply+=(--drain)
set +e
"${apply[@]}"
status=$?
set -e

step "Events on node $NODE"
kubectl get events -n default \
  --field-selector "involvedObject.kind=Node,involvedObject.name=$NODE" \
  --sort-by=.lastTimestamp \
  -o custom-columns='TIME:.lastTimestamp,TYPE:.type,REASON:.reason,FROM:.source.component,MESSAGE:.message' \
  | { grep -E '^TIME|Migscope' || true; }

step "node $NODE now"
kubectl get node "$NODE" -L nvidia.com/mig.config,nvidia.com/mig.config.state
kubectl get node "$NODE" -o json | python3 -c '
import json, sys
node = json.load(sys.stdin)
meta = node["metadata"]
print("unschedulable:", bool(node["spec"].get("unschedulable")))
print("migscope.io/apply:", meta.get("annotations", {}).get("migscope.io/apply", "(none)"))
alloc = {k: v for k, v in node["status"].get("allocatable", {}).items()
         if k.startswith("nvidia.com/mig-") and v != "0"}
print("allocatable:", ", ".join(f"{k}={v}" for k, v in sorted(alloc.items())) or "(no MIG devices)")
for k, v in sorted(meta.get("labels", {}).items()):
    if k.startswith("nvidia.com/mig") or k.startswith("nvidia.com/gpu.deploy"):
        print(f"  {k}={v}")
'

step "to roll back by hand"
if [[ -n "$PREVIOUS" ]]; then
  relabel="kubectl label node $NODE nvidia.com/mig.config=$PREVIOUS --overwrite"
else
  relabel="kubectl label node $NODE nvidia.com/mig.config-        # it had no label before"
fi
cat <<EOF
  $relabel
  kubectl get node $NODE -L nvidia.com/mig.config.state -w    # until success (or failed)
  kubectl uncordon $NODE                                        # only if it is still cordoned
(MIG Manager re-creates the instances of the GPUs that change back: pods on them must be gone.)
EOF
exit "$status"
