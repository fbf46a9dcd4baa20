"""The namespaces dashboard: which teams hold slices, how busy those are, and what idles.

Per namespace: slices held, slices held but idle over the last hour, mean activity and
estimated power of what it holds, and a table of every held slice with its owner, activity
and the memory it holds.
"""

from __future__ import annotations

from migscope.core._dashboards.grafana import Json, column, dashboard, panel, target, variables
from migscope.core._dashboards.promql import (
    CLUSTER,
    IDLE_PERCENT,
    MIG_POD_INFO,
    MIG_POWER_ESTIMATED,
    SLICE,
    activity,
    idle,
    memory_held,
)


def namespaces_dashboard() -> Json:
    """The ``migscope-namespaces`` dashboard (``dashboards/migscope-namespaces.json``)."""
    ns = 'cluster=~"$cluster", namespace=~"$namespace"'
    held_ns = f"max by ({SLICE}, namespace) ({MIG_POD_INFO}{{{ns}}})"
    idle_ns = f"({idle(CLUSTER)}) * on ({SLICE}) group_left(namespace) {held_ns}"
    panels = [
        panel(
            "bargauge",
            "Slices held per namespace",
            [target(f"count by (namespace) ({held_ns})", "{{namespace}}", instant=True)],
            x=0,
            y=0,
            w=12,
            h=8,
        ),
        panel(
            "bargauge",
            "Idle-but-held slices per namespace (last hour)",
            [target(f"count by (namespace) ({idle_ns})", "{{namespace}}", instant=True)],
            x=12,
            y=0,
            w=12,
            h=8,
        ),
        panel(
            "timeseries",
            "Mean activity of held slices per namespace",
            [
                target(
                    f"avg by (namespace) ({activity(sel=CLUSTER)} "
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
        panel(
            "timeseries",
            "Estimated power of held slices per namespace",
            [
                target(
                    f"sum by (namespace) ({MIG_POWER_ESTIMATED}{{{CLUSTER}}} "
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
        panel(
            "table",
            "Held slices and their owners",
            [
                target(
                    f"max by ({SLICE}, namespace, pod, resource) ({MIG_POD_INFO}{{{ns}}})",
                    instant=True,
                    table=True,
                ),
                target(activity("1h", CLUSTER), instant=True, table=True),
                target(memory_held(CLUSTER), instant=True, table=True),
            ],
            x=0,
            y=16,
            w=24,
            h=10,
            description=f"Activity decides idle (under {IDLE_PERCENT} over the hour); the memory "
            "a slice holds is shown as evidence, never as use.",
            transformations=[{"id": "merge", "options": {}}],
            overrides=[
                column("Value #B", "activity (1h mean)", "percentunit"),
                column("Value #C", "memory held (1h peak)", "bytes"),
            ],
        ),
    ]
    return dashboard(
        "migscope-namespaces",
        "migscope / Namespaces and teams",
        panels,
        variables("cluster", "namespace"),
    )
