"""The node dashboard: one node's GPUs slice by slice, in placement order.

The slice map (profile, placement, pod, activity, memory, estimated power per GPU instance),
per-slice time series, the board power measured once per GPU next to the per-slice estimate
that splits it, and each GPU's layout and free compute slices.
"""

from __future__ import annotations

from migscope.core._dashboards.grafana import Json, dashboard, panel, target, variables
from migscope.core._dashboards.promql import (
    GPU_LAYOUT_INFO,
    GPU_POWER,
    GPU_SEL,
    GPU_SLICES_FREE,
    MIG_INFO,
    MIG_MEMORY_USED,
    MIG_POD_INFO,
    MIG_POWER_ESTIMATED,
    RATE_WINDOW,
    SLICE,
    activity,
)


def _slice_table_targets() -> list[Json]:
    info = f"max by ({SLICE}, profile, placement_start, placement_size) ({MIG_INFO}{{{GPU_SEL}}})"
    return [
        target(info, instant=True, table=True),
        target(
            f"max by ({SLICE}, namespace, pod) ({MIG_POD_INFO}{{{GPU_SEL}}})",
            instant=True,
            table=True,
        ),
        target(activity(RATE_WINDOW, GPU_SEL), instant=True, table=True),
        target(
            f"max by ({SLICE}) ({MIG_MEMORY_USED}{{{GPU_SEL}}})",
            instant=True,
            table=True,
        ),
        target(
            f"max by ({SLICE}) ({MIG_POWER_ESTIMATED}{{{GPU_SEL}}})",
            instant=True,
            table=True,
        ),
    ]


def node_dashboard() -> Json:
    """The ``migscope-node`` dashboard (``dashboards/migscope-node.json``)."""
    per_slice = "{{node}} gpu{{gpu}} gi{{gpu_instance_id}}"
    panels = [
        panel(
            "table",
            "Slice map (placement, profile, pod, activity, memory, estimated power)",
            _slice_table_targets(),
            x=0,
            y=0,
            w=24,
            h=10,
            description="One row per GPU instance, in placement order: start and size in memory "
            "slices, the pod holding it, activity (mean over the rate interval), memory and "
            "estimated power.",
            transformations=[
                {"id": "merge", "options": {}},
                {"id": "sortBy", "options": {"sort": [{"field": "placement_start"}]}},
            ],
        ),
        panel(
            "timeseries",
            "Activity per slice",
            [target(activity(RATE_WINDOW, GPU_SEL), per_slice)],
            x=0,
            y=10,
            w=12,
            h=8,
            unit="percentunit",
            description="rate() of the active-seconds counter: the exact mean over the rate "
            "interval at any scrape interval; the ratio gauge for exporters without it.",
        ),
        panel(
            "timeseries",
            "Memory used per slice",
            [target(f"{MIG_MEMORY_USED}{{{GPU_SEL}}}", per_slice)],
            x=12,
            y=10,
            w=12,
            h=8,
            unit="bytes",
        ),
        panel(
            "timeseries",
            "Estimated power per slice",
            [target(f"{MIG_POWER_ESTIMATED}{{{GPU_SEL}}}", per_slice)],
            x=0,
            y=18,
            w=12,
            h=8,
            unit="watt",
            description="Per-slice power does not exist in hardware: migscope splits the "
            "board's measured power by compute slices and activity (shares sum to the board).",
        ),
        panel(
            "timeseries",
            "Board power per GPU (measured, counted once)",
            [target(f"{GPU_POWER}{{{GPU_SEL}}}", "{{node}} gpu{{gpu}}")],
            x=12,
            y=18,
            w=12,
            h=8,
            unit="watt",
        ),
        panel(
            "table",
            "GPU layouts",
            [
                target(
                    f"max by (node, gpu, layout) ({GPU_LAYOUT_INFO}{{{GPU_SEL}}})",
                    instant=True,
                    table=True,
                ),
                target(
                    f"max by (node, gpu) ({GPU_SLICES_FREE}{{{GPU_SEL}}})",
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
        variables("cluster", "node", "gpu"),
    )
