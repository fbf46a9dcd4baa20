"""The fleet dashboard: how many slices there are, who holds them, and which held ones idle.

The overview an operator opens first: counts of slices (held, idle but held, unallocated),
idle capacity in whole GPUs' worth, activity by profile, the layouts in use, MIG Manager's
state per node and the exporter's health, and a table of every idle-but-held slice with its
owner and the memory it holds as evidence.
"""

from __future__ import annotations

from migscope.core._dashboards.grafana import Json, column, dashboard, panel, target, variables
from migscope.core._dashboards.promql import (
    COLLECTOR_SUCCESS,
    GPU_LAYOUT_INFO,
    GPU_SLICES_FREE,
    IDLE_PERCENT,
    KSM_NODE_LABELS,
    MIG_INFO,
    MIG_MEMORY_TOTAL,
    MIG_POD_INFO,
    SEL,
    SLICE,
    activity,
    gpu_share,
    held,
    idle,
    idle_held,
    memory_held,
)


def fleet_dashboard() -> Json:
    """The ``migscope-fleet`` dashboard (``dashboards/migscope-fleet.json``)."""
    held_count = f"count({held()})"
    panels = [
        panel(
            "stat",
            "MIG slices",
            [target(f"count({MIG_INFO}{{{SEL}}})", instant=True)],
            x=0,
            y=0,
            w=4,
            h=4,
        ),
        panel("stat", "Held by a pod", [target(held_count, instant=True)], x=4, y=0, w=4, h=4),
        panel(
            "stat",
            "Idle but held (last hour)",
            [target(f"count({idle_held()}) or vector(0)", instant=True)],
            x=8,
            y=0,
            w=4,
            h=4,
            description="Held by a pod, and over the last hour mean activity under "
            f"{IDLE_PERCENT}, whatever memory it holds: memory held is not use (the MigSliceIdle "
            "rule's and the analyzer's definition). The table below shows what each one holds.",
        ),
        panel(
            "stat",
            "Unallocated slices",
            [
                target(
                    f"count(max by ({SLICE}) ({MIG_INFO}{{{SEL}}}) unless on ({SLICE}) "
                    f"{held()}) or vector(0)",
                    instant=True,
                )
            ],
            x=12,
            y=0,
            w=4,
            h=4,
        ),
        panel(
            "stat",
            "Idle GPU-hours in range",
            [
                target(
                    f"sum_over_time(({gpu_share(idle_held())})[$__range:5m]) * 300 / 3600",
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
        panel(
            "stat",
            "Free compute slices",
            [target(f"sum({GPU_SLICES_FREE}{{{SEL}}})", instant=True)],
            x=20,
            y=0,
            w=4,
            h=4,
        ),
        panel(
            "timeseries",
            "Idle-but-held capacity (GPUs' worth)",
            [target(gpu_share(idle_held()), "idle GPUs")],
            x=0,
            y=4,
            w=12,
            h=8,
        ),
        panel(
            "timeseries",
            "Mean activity of held slices, by profile",
            [
                target(
                    f"avg by (profile) ({activity()} * on ({SLICE}) "
                    f"group_left(profile) max by ({SLICE}, profile) ({MIG_INFO}{{{SEL}}}) "
                    f"and on ({SLICE}) {held()})",
                    "{{profile}}",
                )
            ],
            x=12,
            y=4,
            w=12,
            h=8,
            unit="percentunit",
            description="Mean over Grafana's rate interval: rate() of the active-seconds "
            "counter (exact at any scrape interval), the ratio gauge for exporters without it.",
        ),
        panel(
            "barchart",
            "Slices by profile",
            [
                target(
                    f"count by (profile) ({MIG_INFO}{{{SEL}}})",
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
        panel(
            "table",
            "Layouts in use",
            [
                target(
                    f"count by (layout) ({GPU_LAYOUT_INFO}{{{SEL}}})",
                    instant=True,
                    table=True,
                )
            ],
            x=8,
            y=12,
            w=8,
            h=8,
        ),
        panel(
            "table",
            "MIG Manager state per node",
            [
                target(
                    "max by (node, label_nvidia_com_mig_config, label_nvidia_com_mig_config_state) "
                    f'(label_replace({KSM_NODE_LABELS}{{label_nvidia_com_mig_config!=""}}, '
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
        panel(
            "timeseries",
            "Reconfigurations and failures",
            [
                target(
                    "count by (label_nvidia_com_mig_config_state) "
                    f'({KSM_NODE_LABELS}{{label_nvidia_com_mig_config_state!=""}})',
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
        panel(
            "timeseries",
            "Exporter health",
            [
                target(
                    f"min by (node, collector) ({COLLECTOR_SUCCESS}{{{SEL}}})",
                    "{{node}} {{collector}}",
                ),
            ],
            x=12,
            y=20,
            w=12,
            h=8,
            description="1 = the collector's last cycle succeeded.",
        ),
        panel(
            "table",
            "Idle-but-held slices (last hour): owner and memory held",
            [
                target(
                    f"max by ({SLICE}, namespace, pod) ({MIG_POD_INFO}{{{SEL}}}) "
                    f"and on ({SLICE}) ({idle()})",
                    instant=True,
                    table=True,
                ),
                target(idle_held(), instant=True, table=True),
                target(
                    f"{memory_held()} and on ({SLICE}) ({idle_held()})",
                    instant=True,
                    table=True,
                ),
                target(
                    f"{memory_held()} / on ({SLICE}) max by ({SLICE}) "
                    f"({MIG_MEMORY_TOTAL}{{{SEL}}}) and on ({SLICE}) ({idle_held()})",
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
                column("Value #A", "held"),
                column("Value #B", "activity (1h mean)", "percentunit"),
                column("Value #C", "memory held (1h peak)", "bytes"),
                column("Value #D", "share of the slice's memory", "percentunit"),
            ],
        ),
    ]
    return dashboard("migscope-fleet", "migscope / MIG fleet", panels, variables("cluster", "node"))
