#!/usr/bin/env sh
# Copy the files the chart ships but that live elsewhere in the repository into the chart:
#
#   deploy/prometheus/migscope-rules.yaml -> deploy/helm/migscope/files/prometheus/migscope-rules.yaml
#   dashboards/*.json                     -> deploy/helm/migscope/files/dashboards/*.json
#
# Helm reads files (.Files.Get/.Files.Glob) only from inside the chart directory, and a symlink
# out of the chart is not packaged by `helm package`, so the chart keeps copies. Run this after
# changing the rules or a dashboard and commit the copies; tests/deploy/test_helm.py fails while
# a copy differs from its source, and `sync-files.sh --check` does the same check from a shell.
#
# Usage: deploy/helm/sync-files.sh [--check]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
chart="$here/migscope"
check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

stale=0
# copy_one SRC DST: copy one file, or in --check mode report whether they differ.
copy_one() {
  if [ -f "$1" ] && [ -f "$2" ] && cmp -s "$1" "$2"; then
    return 0
  fi
  if $check; then
    echo "stale: ${2#"$root"/} (source ${1#"$root"/})" >&2
    stale=1
  else
    mkdir -p "$(dirname "$2")"
    cp "$1" "$2"
    echo "copied ${1#"$root"/} -> ${2#"$root"/}"
  fi
}

# prune DIR PATTERN SRCDIR: remove (or report) copies whose source is gone.
prune() {
  for copy in "$1"/$2; do
    [ -e "$copy" ] || continue
    [ -e "$3/$(basename "$copy")" ] && continue
    if $check; then
      echo "stale: ${copy#"$root"/} (no source)" >&2
      stale=1
    else
      rm -f "$copy"
      echo "removed ${copy#"$root"/}"
    fi
  done
}

rules="$root/deploy/prometheus/migscope-rules.yaml"
if [ -f "$rules" ]; then
  copy_one "$rules" "$chart/files/prometheus/migscope-rules.yaml"
fi
prune "$chart/files/prometheus" "*.yaml" "$root/deploy/prometheus"

for dash in "$root"/dashboards/*.json; do
  [ -e "$dash" ] || continue
  copy_one "$dash" "$chart/files/dashboards/$(basename "$dash")"
done
prune "$chart/files/dashboards" "*.json" "$root/dashboards"

exit "$stale"
