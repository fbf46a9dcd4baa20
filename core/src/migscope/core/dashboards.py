"""The Grafana dashboards, built from code so that every query names a metric that exists.

Why code and not hand-edited JSON: a dashboard is a contract with the exporter's series,
and the metric contract (:mod:`migscope.core.metrics`) is the single place those are
declared. Building panels here lets the tests check every query against that contract and a
real Prometheus, and keeps the three dashboards consistent (same variables, same matchers).
``scripts/gen-dashboards`` writes ``dashboards/*.json``; a test keeps them in sync.

What they fix relative to dcgm-exporter's dashboard on MIG nodes: utilisation comes from the
per-GPU-instance activity (never an empty panel), and power is the board's reading counted
once per GPU plus migscope's per-slice *estimate*, never the board power summed once per
slice.

Series carry ``node`` (set by migscope's ServiceMonitor relabelling) and optionally
``cluster`` (an external label); ``cluster=~"$cluster"`` also matches series without it.
Kube-state-metrics' ``kube_node_labels`` feeds the MIG Manager panels (it must export the
``nvidia.com/mig.config*`` labels, see docs/rules.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["DASHBOARDS", "IDLE_ACTIVITY_BELOW", "dashboard", "panel_queries"]

Json = dict[str, Any]

DS = {"type": "prometheus", "uid": "${datasource}"}
SLICE = "node, gpu, gpu_uuid, gpu_instance_id"
"""The labels that identify a slice once scraped."""
SEL = 'cluster=~"$cluster", node=~"$node"'
CLUSTER = 'cluster=~"$cluster"'
GPU_SEL = SEL + ', gpu=~"$gpu"'
COMPUTE_SLICES = (1, 2, 3, 4, 7)
"""Every GPU-instance size in compute slices (1g..7g)."""


def _held(sel: str = SEL) -> str:
    return f"max by ({SLICE}) (migscope_mig_pod_info{{{sel}}})"


IDLE_ACTIVITY_BELOW = 0.05
"""Idle threshold on the hour's mean activity: the analyzer's ``idle.activity_p95_below``."""


def _idle(sel: str = SEL) -> str:
    """Slices whose last hour was idle: mean activity under 5 %, whatever memory they hold.

    Idle is about compute: memory held is not use (a notebook that loaded a model and never
    runs it is the canonical idle slice), so memory is no part of the test; the panels show
    it next to the verdict as evidence (:func:`_memory_held`). A slice without an activity
    series is never idle here: unknown is not idle. The same definition as the
    ``MigSliceIdle`` rule and the analyzer's default policy, so that a dashboard, an alert
    and a report never disagree about what "idle" is.
    """
    return (
        f"max by ({SLICE}) (avg_over_time(migscope_mig_graphics_active_ratio{{{sel}}}[1h])) "
        f"< {IDLE_ACTIVITY_BELOW}"
    )


def _memory_held(sel: str = SEL) -> str:
    """Each slice's peak memory over the last hour, in bytes: the evidence shown with idle."""
    return f"max by ({SLICE}) (max_over_time(migscope_mig_memory_used_bytes{{{sel}}}[1h]))"


def _idle_held(sel: str = SEL) -> str:
    """Idle slices (see :func:`_idle`) that a pod holds."""
    return f"({_idle(sel)}) and on ({SLICE}) {_held(sel)}"


def _gpu_share(slices: str, sel: str = SEL) -> str:
    """Whole GPUs' worth of ``slices`` (each weighted by its compute slices / 7).

    PromQL cannot multiply by a label's value, so each size is counted on its own.
    """
    parts = [
        f"{g} * count(({slices}) and on ({SLICE}) "
        f'migscope_mig_info{{{sel}, compute_slices="{g}"}} or vector(0))'
        for g in COMPUTE_SLICES
    ]
    return "(" + " + ".join(parts) + ") / 7"


def _target(expr: str, legend: str = "", *, instant: bool = False, table: bool = False) -> Json:
    target: Json = {
        "datasource": DS,
        "expr": expr,
        "refId": "A",
        "legendFormat": legend or "__auto",
        "range": not instant,
        "instant": instant,
    }
    if table:
        target["format"] = "table"
    return target


def _panel(
    kind: str,
    title: str,
    targets: Sequence[Json],
    *,
    x: int,
    y: int,
    w: int = 6,
    h: int = 6,
    unit: str = "short",
    description: str = "",
    options: Json | None = None,
    transformations: Sequence[Json] = (),
    overrides: Sequence[Json] = (),
) -> Json:
    refs = "ABCDEFGH"
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": [{**t, "refId": refs[i]} for i, t in enumerate(targets)],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": list(overrides)},
        "options": options or {},
        "transformations": list(transformations),
    }


def _column(field: str, name: str, unit: str = "") -> Json:
    """A table override: show ``field`` (``Value #B``) as ``name``, in ``unit`` if given."""
    properties: list[Json] = [{"id": "displayName", "value": name}]
    if unit:
        properties.append({"id": "unit", "value": unit})
    return {"matcher": {"id": "byName", "options": field}, "properties": properties}


def _variable(name: str, query: str, *, label: str, include_all: bool = True) -> Json:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": {"query": query, "refId": f"{name}-var"},
        "definition": query,
        "refresh": 2,
        "includeAll": include_all,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def _variables(*names: str) -> list[Json]:
    out: list[Json] = [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
        }
    ]
    queries = {
        "cluster": ("label_values(migscope_gpu_info, cluster)", "Cluster"),
        "node": ('label_values(migscope_gpu_info{cluster=~"$cluster"}, node)', "Node"),
        "gpu": ('label_values(migscope_gpu_info{cluster=~"$cluster", node=~"$node"}, gpu)', "GPU"),
        "namespace": (
            'label_values(migscope_mig_pod_info{cluster=~"$cluster"}, namespace)',
            "Namespace",
        ),
    }
    for name in names:
        query, label = queries[name]
        out.append(_variable(name, query, label=label))
    return out


def dashboard(uid: str, title: str, panels: Sequence[Json], variables: Sequence[Json]) -> Json:
    """A Grafana dashboard model (schemaVersion 39) with ids assigned to its panels."""
    return {
        "uid": uid,
        "title": title,
        "tags": ["migscope", "mig", "gpu"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "time": {"from": "now-24h", "to": "now"},
        "refresh": "1m",
        "templating": {"list": list(variables)},
        "annotations": {"list": []},
        "links": [
            {
                "title": "migscope dashboards",
                "type": "dashboards",
                "tags": ["migscope"],
                "asDropdown": True,
            }
        ],
        "panels": [{**p, "id": i + 1} for i, p in enumerate(panels)],
    }


def _fleet() -> Json:
    held = f"count({_held()})"
    panels = [
        _panel(
            "stat",
            "MIG slices",
            [_target(f"count(migscope_mig_info{{{SEL}}})", instant=True)],
            x=0,
            y=0,
            w=4,
            h=4,
        ),
        _panel("stat", "Held by a pod", [_target(held, instant=True)], x=4, y=0, w=4, h=4),
        _panel(
            "stat",
            "Idle but held (last hour)",
            [_target(f"count({_idle_held()}) or vector(0)", instant=True)],
            x=8,
            y=0,
            w=4,
            h=4,
            description="Held by a pod, and over the last hour mean activity under 5 %, whatever "
            "memory it holds: memory held is not use (the MigSliceIdle rule's and the "
            "analyzer's definition). The table below shows what each one holds.",
        ),
        _panel(
            "stat",
            "Unallocated slices",
            [
                _target(
                    f"count(max by ({SLICE}) (migscope_mig_info{{{SEL}}}) unless on ({SLICE}) "
                    f"{_held()}) or vector(0)",
                    instant=True,
                )
            ],
            x=12,
            y=0,
            w=4,
            h=4,
        ),
        _panel(
            "stat",
            "Idle GPU-hours in range",
            [
                _target(
                    f"sum_over_time(({_gpu_share(_idle_held())})[$__range:5m]) * 300 / 3600",
                    instant=True,
                )
            ],
            x=16,
            y=0,
            w=4,
            h=4,
            unit="h",
            description="Whole GPUs' worth of idle-but-held slices, integrated over the range.",
        ),
        _panel(
            "stat",
            "Free compute slices",
            [_target(f"sum(migscope_gpu_compute_slices_free{{{SEL}}})", instant=True)],
            x=20,
            y=0,
            w=4,
            h=4,
        ),
        _panel(
            "timeseries",
            "Idle-but-held capacity (GPUs' worth)",
            [_target(_gpu_share(_idle_held()), "idle GPUs")],
            x=0,
            y=4,
            w=12,
            h=8,
        ),
        _panel(
            "timeseries",
            "Mean activity of held slices, by profile",
            [
                _target(
                    f"avg by (profile) (migscope_mig_graphics_active_ratio{{{SEL}}} * on ({SLICE}) "
                    f"group_left(profile) max by ({SLICE}, profile) (migscope_mig_info{{{SEL}}}) "
                    f"and on ({SLICE}) {_held()})",
                    "{{profile}}",
                )
            ],
            x=12,
            y=4,
            w=12,
            h=8,
            unit="percentunit",
        ),
        _panel(
            "barchart",
            "Slices by profile",
            [
                _target(
                    f"count by (profile) (migscope_mig_info{{{SEL}}})",
                    "{{profile}}",
                    instant=True,
                    table=True,
                )
            ],
            x=0,
            y=12,
            w=8,
            h=8,
        ),
        _panel(
            "table",
            "Layouts in use",
            [
                _target(
                    f"count by (layout) (migscope_gpu_mig_layout_info{{{SEL}}})",
                    instant=True,
                    table=True,
                )
            ],
            x=8,
            y=12,
            w=8,
            h=8,
        ),
        _panel(
            "table",
            "MIG Manager state per node",
            [
                _target(
                    "max by (node, label_nvidia_com_mig_config, label_nvidia_com_mig_config_state) "
                    '(label_replace(kube_node_labels{label_nvidia_com_mig_config!=""}, '
                    '"node", "$1", "node", "(.*)"))',
                    instant=True,
                    table=True,
                )
            ],
            x=16,
            y=12,
            w=8,
            h=8,
            description="From kube-state-metrics (needs the nvidia.com/mig.config labels "
            "in --metric-labels-allowlist). Not 'success' for long: see MigConfigPendingTooLong.",
        ),
        _panel(
            "timeseries",
            "Reconfigurations and failures",
            [
                _target(
                    "count by (label_nvidia_com_mig_config_state) "
                    '(kube_node_labels{label_nvidia_com_mig_config_state!=""})',
                    "{{label_nvidia_com_mig_config_state}}",
                )
            ],
            x=0,
            y=20,
            w=12,
            h=8,
            description="Nodes per nvidia.com/mig.config.state: pending/rebooting are "
            "reconfigurations in flight, failed needs a look.",
        ),
        _panel(
            "timeseries",
            "Exporter health",
            [
                _target(
                    f"min by (node, collector) (migscope_collector_success{{{SEL}}})",
                    "{{node}} {{collector}}",
                ),
            ],
            x=12,
            y=20,
            w=12,
            h=8,
            description="1 = the collector's last cycle succeeded.",
        ),
        _panel(
            "table",
            "Idle-but-held slices (last hour): owner and memory held",
            [
                _target(
                    f"max by ({SLICE}, namespace, pod) (migscope_mig_pod_info{{{SEL}}}) "
                    f"and on ({SLICE}) ({_idle()})",
                    instant=True,
                    table=True,
                ),
                _target(_idle_held(), instant=True, table=True),
                _target(
                    f"{_memory_held()} and on ({SLICE}) ({_idle_held()})",
                    instant=True,
                    table=True,
                ),
                _target(
                    f"{_memory_held()} / on ({SLICE}) max by ({SLICE}) "
                    f"(migscope_mig_memory_total_bytes{{{SEL}}}) and on ({SLICE}) ({_idle_held()})",
                    instant=True,
                    table=True,
                ),
            ],
            x=0,
            y=28,
            w=24,
            h=8,
            description="Every slice the stat above counts, with the pod holding it. Memory "
            "held is evidence, not use: a loaded model that never runs is idle all the same.",
            transformations=[{"id": "merge", "options": {}}],
            overrides=[
                _column("Value #A", "held"),
                _column("Value #B", "activity (1h mean)", "percentunit"),
                _column("Value #C", "memory held (1h peak)", "bytes"),
                _column("Value #D", "share of the slice's memory", "percentunit"),
            ],
        ),
    ]
    return dashboard(
        "migscope-fleet", "migscope / MIG fleet", panels, _variables("cluster", "node")
    )


def _slice_table_targets() -> list[Json]:
    info = (
        f"max by ({SLICE}, profile, placement_start, placement_size) "
        f"(migscope_mig_info{{{GPU_SEL}}})"
    )
    return [
        _target(info, instant=True, table=True),
        _target(
            f"max by ({SLICE}, namespace, pod) (migscope_mig_pod_info{{{GPU_SEL}}})",
            instant=True,
            table=True,
        ),
        _target(
            f"max by ({SLICE}) (migscope_mig_graphics_active_ratio{{{GPU_SEL}}})",
            instant=True,
            table=True,
        ),
        _target(
            f"max by ({SLICE}) (migscope_mig_memory_used_bytes{{{GPU_SEL}}})",
            instant=True,
            table=True,
        ),
        _target(
            f"max by ({SLICE}) (migscope_mig_power_estimated_watts{{{GPU_SEL}}})",
            instant=True,
            table=True,
        ),
    ]


def _node() -> Json:
    per_slice = "{{node}} gpu{{gpu}} gi{{gpu_instance_id}}"
    panels = [
        _panel(
            "table",
            "Slice map (placement, profile, pod, activity, memory, estimated power)",
            _slice_table_targets(),
            x=0,
            y=0,
            w=24,
            h=10,
            description="One row per GPU instance, in placement order: start and size in memory "
            "slices, the pod holding it, current activity, memory and estimated power.",
            transformations=[
                {"id": "merge", "options": {}},
                {"id": "sortBy", "options": {"sort": [{"field": "placement_start"}]}},
            ],
        ),
        _panel(
            "timeseries",
            "Activity per slice",
            [_target(f"migscope_mig_graphics_active_ratio{{{GPU_SEL}}}", per_slice)],
            x=0,
            y=10,
            w=12,
            h=8,
            unit="percentunit",
        ),
        _panel(
            "timeseries",
            "Memory used per slice",
            [_target(f"migscope_mig_memory_used_bytes{{{GPU_SEL}}}", per_slice)],
            x=12,
            y=10,
            w=12,
            h=8,
            unit="bytes",
        ),
        _panel(
            "timeseries",
            "Estimated power per slice",
            [_target(f"migscope_mig_power_estimated_watts{{{GPU_SEL}}}", per_slice)],
            x=0,
            y=18,
            w=12,
            h=8,
            unit="watt",
            description="Per-slice power does not exist in hardware: migscope splits the "
            "board's measured power by compute slices and activity (shares sum to the board).",
        ),
        _panel(
            "timeseries",
            "Board power per GPU (measured, counted once)",
            [_target(f"migscope_gpu_power_watts{{{GPU_SEL}}}", "{{node}} gpu{{gpu}}")],
            x=12,
            y=18,
            w=12,
            h=8,
            unit="watt",
        ),
        _panel(
            "table",
            "GPU layouts",
            [
                _target(
                    f"max by (node, gpu, layout) (migscope_gpu_mig_layout_info{{{GPU_SEL}}})",
                    instant=True,
                    table=True,
                ),
                _target(
                    f"max by (node, gpu) (migscope_gpu_compute_slices_free{{{GPU_SEL}}})",
                    instant=True,
                    table=True,
                ),
            ],
            x=0,
            y=26,
            w=24,
            h=6,
            transformations=[{"id": "merge", "options": {}}],
        ),
    ]
    return dashboard(
        "migscope-node",
        "migscope / Node and GPU slices",
        panels,
        _variables("cluster", "node", "gpu"),
    )


def _namespaces() -> Json:
    ns = 'cluster=~"$cluster", namespace=~"$namespace"'
    held_ns = f"max by ({SLICE}, namespace) (migscope_mig_pod_info{{{ns}}})"
    idle_ns = f"({_idle(CLUSTER)}) * on ({SLICE}) group_left(namespace) {held_ns}"
    panels = [
        _panel(
            "bargauge",
            "Slices held per namespace",
            [_target(f"count by (namespace) ({held_ns})", "{{namespace}}", instant=True)],
            x=0,
            y=0,
            w=12,
            h=8,
        ),
        _panel(
            "bargauge",
            "Idle-but-held slices per namespace (last hour)",
            [_target(f"count by (namespace) ({idle_ns})", "{{namespace}}", instant=True)],
            x=12,
            y=0,
            w=12,
            h=8,
        ),
        _panel(
            "timeseries",
            "Mean activity of held slices per namespace",
            [
                _target(
                    f"avg by (namespace) (migscope_mig_graphics_active_ratio{{{CLUSTER}}} "
                    f"* on ({SLICE}) group_left(namespace) {held_ns})",
                    "{{namespace}}",
                )
            ],
            x=0,
            y=8,
            w=12,
            h=8,
            unit="percentunit",
        ),
        _panel(
            "timeseries",
            "Estimated power of held slices per namespace",
            [
                _target(
                    f"sum by (namespace) (migscope_mig_power_estimated_watts{{{CLUSTER}}} "
                    f"* on ({SLICE}) group_left(namespace) {held_ns})",
                    "{{namespace}}",
                )
            ],
            x=12,
            y=8,
            w=12,
            h=8,
            unit="watt",
        ),
        _panel(
            "table",
            "Held slices and their owners",
            [
                _target(
                    f"max by ({SLICE}, namespace, pod, resource) (migscope_mig_pod_info{{{ns}}})",
                    instant=True,
                    table=True,
                ),
                _target(
                    f"max by ({SLICE}) "
                    f"(avg_over_time(migscope_mig_graphics_active_ratio{{{CLUSTER}}}[1h]))",
                    instant=True,
                    table=True,
                ),
                _target(_memory_held(CLUSTER), instant=True, table=True),
            ],
            x=0,
            y=16,
            w=24,
            h=10,
            description="Activity decides idle (under 5 % over the hour); the memory a slice "
            "holds is shown as evidence, never as use.",
            transformations=[{"id": "merge", "options": {}}],
            overrides=[
                _column("Value #B", "activity (1h mean)", "percentunit"),
                _column("Value #C", "memory held (1h peak)", "bytes"),
            ],
        ),
    ]
    return dashboard(
        "migscope-namespaces",
        "migscope / Namespaces and teams",
        panels,
        _variables("cluster", "namespace"),
    )


DASHBOARDS = {
    "migscope-fleet.json": _fleet,
    "migscope-node.json": _node,
    "migscope-namespaces.json": _namespaces,
}
"""File name → builder of each dashboard in ``dashboards/``."""


def panel_queries(model: Json) -> list[tuple[str, str]]:
    """``(panel title, expr)`` of every query in a dashboard model."""
    return [(p["title"], t["expr"]) for p in model["panels"] for t in p.get("targets", [])]
