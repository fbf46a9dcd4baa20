"""The lines `analyze --out` and `demo` print after a run: what was found, what a plan frees.

They read the run's typed report (:class:`~migscope.core._spec.v1.ReportV1`), as every other
renderer does, so the summary says what ``report.json`` says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from migscope.core import ReportV1


def summary_lines(report: ReportV1) -> list[str]:
    """What was found, what it wasted, and what the plan frees (or why there is none)."""
    s = report.savings
    current = sum(1 for x in report.slices if x.current)
    history_only = len(report.slices) - current
    also = f" (+{history_only} history-only, in slices.csv)" if history_only else ""
    lines = [
        f"{current} slices{also} on {s.gpus_planned} MIG GPUs over {_span(report)}: "
        f"{s.idle_slices} idle, {s.unallocated_slices} unallocated, "
        f"{s.oversized_slices} oversized",
        f"wasted: {s.wasted_gpu_hours:.1f} GPU-hours "
        f"(idle {_one(s.idle_gpu_hours)}, unallocated {_one(s.unallocated_gpu_hours)}, "
        f"oversized {_one(s.oversized_gpu_hours)})",
        _plan_line(report),
    ]
    changes = report.request_changes
    if changes is not None and changes.workloads:
        lines.append(
            f"requests: {len(changes.workloads)} workload(s) should ask for another MIG profile "
            "before the plan is applied (request-changes.yaml)"
        )
    if s.price_per_gpu_hour is not None and s.wasted_cost is not None and s.freed_cost is not None:
        lines.append(f"cost: {s.wasted_cost:,.2f} wasted, {s.freed_cost:,.2f} freed per window")
    what_if = report.what_if
    if what_if is not None:
        configs = ",".join(f"{k}={v}" for k, v in what_if.configs.items())
        proposed = what_if.proposed.served_share if what_if.proposed is not None else None
        lines.append(
            f"what-if {configs}: serves {_share(what_if.served_share)} of the window's demand, "
            f"{_number(what_if.unmet_instance_hours)} instance-hours unmet (proposed plan: "
            f"{_share(proposed)})"
        )
    return lines


def _one(value: float | None) -> str:
    """GPU-hours with one decimal (``n/a`` where a report lacks the number)."""
    return f"{value:.1f}" if value is not None else "n/a"


def _share(value: float | None) -> str:
    return f"{value:.1%}" if value is not None else "n/a"


def _number(value: float | None) -> str:
    return f"{value:g}" if value is not None else "n/a"


def _span(report: ReportV1) -> str:
    """The window, and the data seen in it when that is less (a snapshot is minutes of it)."""
    window_hours = (report.window.end_unix - report.window.start_unix) / 3600.0
    window = f"{window_hours:g} h"
    evidence = report.evidence
    seen = evidence.history_hours if evidence is not None else window_hours
    if seen >= window_hours * 0.99:
        return window
    amount = f"{seen:.3g} h" if seen >= 1.0 else f"{seen * 60:.3g} min"
    return f"a {window} window ({amount} of data seen)"


def _plan_line(report: ReportV1) -> str:
    """What the plan frees, or why there is no plan (too little history)."""
    from migscope.analyzer import snapshot_sentence

    evidence = report.evidence
    if evidence is not None and not evidence.enough_for_a_plan:
        return f"plan: {snapshot_sentence(evidence.history_hours, evidence.min_history_hours)}"
    s = report.savings
    return (
        f"plan: {s.gpus_freed} GPU(s) freeable ({s.gpu_hours_freed:.1f} GPU-hours per "
        f"window), {s.gpus_changed} GPU(s) changed on {s.nodes_changed} node(s), "
        f"unmet demand {s.unmet_demand}"
    )
