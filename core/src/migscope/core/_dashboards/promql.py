"""The PromQL the dashboards share: series names, matchers, activity and the test of "idle".

Every series name comes from the metric contract (:func:`migscope.core._metrics.metric`, which
fails on a name the exporter does not publish), and the idle threshold from
:mod:`migscope.core._thresholds`, so that a panel, an alert and a report agree on what idle is.
Every panel that shows a slice's activity reads it through :func:`activity`, which prefers the
active-seconds counter to the ratio gauge (issue 24; why there).
"""

from __future__ import annotations

from migscope.core._metrics import metric
from migscope.core._thresholds import IDLE_ACTIVITY_BELOW

GPU_INFO = metric("gpu_info").name
GPU_POWER = metric("gpu_power_watts").name
GPU_LAYOUT_INFO = metric("gpu_mig_layout_info").name
GPU_SLICES_FREE = metric("gpu_compute_slices_free").name
MIG_INFO = metric("mig_info").name
MIG_POD_INFO = metric("mig_pod_info").name
MIG_ACTIVITY = metric("mig_graphics_active_ratio").name
MIG_ACTIVE_SECONDS = metric("mig_graphics_active_seconds_total").name
MIG_MEMORY_USED = metric("mig_memory_used_bytes").name
MIG_MEMORY_TOTAL = metric("mig_memory_total_bytes").name
MIG_POWER_ESTIMATED = metric("mig_power_estimated_watts").name
COLLECTOR_SUCCESS = metric("collector_success").name
KSM_NODE_LABELS = "kube_node_labels"
"""kube-state-metrics' series of node labels (MIG Manager's ``nvidia.com/mig.config*``)."""

SLICE = "node, gpu, gpu_uuid, gpu_instance_id"
"""The labels that identify a slice once scraped."""
SEL = 'cluster=~"$cluster", node=~"$node"'
CLUSTER = 'cluster=~"$cluster"'
GPU_SEL = SEL + ', gpu=~"$gpu"'
COMPUTE_SLICES = (1, 2, 3, 4, 7)
"""Every GPU-instance size in compute slices (1g..7g)."""

RATE_WINDOW = "$__rate_interval"
"""The window of the activity that time series and "current" tables show (Grafana's)."""

IDLE_PERCENT = f"{round(IDLE_ACTIVITY_BELOW * 100, 6):g} %"
"""The idle threshold as the panels' descriptions write it ("5 %")."""


def held(sel: str = SEL) -> str:
    """Slices a pod holds, one series per slice."""
    return f"max by ({SLICE}) ({MIG_POD_INFO}{{{sel}}})"


def activity(window: str = RATE_WINDOW, sel: str = SEL) -> str:
    """Each slice's mean graphics activity over the last ``window``, 0..1: one series per slice.

    The counter where the slice has one, else the gauge (issue 24). The ratio gauge is the mean
    of the exporter's last GPM window only, so when Prometheus scrapes every 30 s it samples a
    second or two of every 30 and aliases: a job that computes between scrapes reads as idle.
    ``migscope_mig_graphics_active_seconds_total`` integrates every window, so ``rate()`` of
    it is the exact mean over ``window`` at any scrape interval. Exporters from before the
    counters publish only the gauge; their slices fall back to ``avg_over_time`` of it, slice
    by slice, as the recording rules do (``slice:migscope_mig_graphics_active_ratio:avg1h``).

    Both sides are reduced to one series per slice (``max by`` :data:`SLICE`) before the
    ``or``, so the ``or`` keeps the gauge exactly for the slices the counter side lacks: a
    slice never appears twice and none is dropped.

    The counter is used only where its series already existed ``window`` ago (``and ...
    offset``): ``rate()`` divides by the whole window, so a series younger than it (a fresh
    install, a GPU instance created minutes ago) would be understated, and a busy new slice
    called idle by the one-hour test; such a slice reads the gauge's mean over what exists,
    until its counter covers the window. (The recording rules have no such guard.)
    """
    counter = (
        f"max by ({SLICE}) (rate({MIG_ACTIVE_SECONDS}{{{sel}}}[{window}]) "
        f"and {MIG_ACTIVE_SECONDS}{{{sel}}} offset {window})"
    )
    gauge = f"max by ({SLICE}) (avg_over_time({MIG_ACTIVITY}{{{sel}}}[{window}]))"
    return f"({counter} or on ({SLICE}) {gauge})"


def idle(sel: str = SEL) -> str:
    """Slices whose last hour was idle: mean activity under 5 %, whatever memory they hold.

    Idle is about compute: memory held is not use (a notebook that loaded a model and never
    runs it is the canonical idle slice), so memory is no part of the test; the panels show
    it next to the verdict as evidence (:func:`memory_held`). A slice without an activity
    series is never idle here: unknown is not idle. The same definition as the
    ``MigSliceIdle`` rule and the analyzer's default policy, so that a dashboard, an alert
    and a report never disagree about what "idle" is. The hour's mean is :func:`activity`'s:
    the counter where the slice has one, else the gauge.
    """
    return f"{activity('1h', sel)} < {IDLE_ACTIVITY_BELOW}"


def memory_held(sel: str = SEL) -> str:
    """Each slice's peak memory over the last hour, in bytes: the evidence shown with idle."""
    return f"max by ({SLICE}) (max_over_time({MIG_MEMORY_USED}{{{sel}}}[1h]))"


def idle_held(sel: str = SEL) -> str:
    """Idle slices (see :func:`idle`) that a pod holds."""
    return f"({idle(sel)}) and on ({SLICE}) {held(sel)}"


def gpu_share(slices: str, sel: str = SEL) -> str:
    """Whole GPUs' worth of ``slices`` (each weighted by its compute slices / 7).

    PromQL cannot multiply by a label's value, so each size is counted on its own.
    """
    parts = [
        f"{g} * count(({slices}) and on ({SLICE}) "
        f'{MIG_INFO}{{{sel}, compute_slices="{g}"}} or vector(0))'
        for g in COMPUTE_SLICES
    ]
    return "(" + " + ".join(parts) + ") / 7"
