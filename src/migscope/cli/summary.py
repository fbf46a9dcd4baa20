"""The lines `analyze --out` and `demo` print after a run: what was found, what a plan frees."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from migscope.analyzer import AnalysisResult

__all__ = ["summary_lines"]


def summary_lines(result: AnalysisResult) -> list[str]:
    """What was found, what it wasted, and what the plan frees (or why there is none)."""
    s = result.savings
    current = sum(1 for x in result.slices if x.current)
    history_only = len(result.slices) - current
    also = f" (+{history_only} history-only, in slices.csv)" if history_only else ""
    lines = [
        f"{current} slices{also} on {s['gpus_planned']} MIG GPUs over {_span(result)}: "
        f"{s['idle_slices']} idle, {s['unallocated_slices']} unallocated, "
        f"{s['oversized_slices']} oversized",
        f"wasted: {s['wasted_gpu_hours']:.1f} GPU-hours "
        f"(idle {s['idle_gpu_hours']:.1f}, unallocated {s['unallocated_gpu_hours']:.1f}, "
        f"oversized {s['oversized_gpu_hours']:.1f})",
        _plan_line(result),
    ]
    advice = result.workloads
    if advice is not None and advice.changes:
        lines.append(
            f"requests: {len(advice.changes)} workload(s) should ask for another MIG profile "
            "before the plan is applied (request-changes.yaml)"
        )
    if s.get("price_per_gpu_hour") is not None:
        lines.append(
            f"cost: {s['wasted_cost']:,.2f} wasted, {s['freed_cost']:,.2f} freed per window"
        )
    what_if = result.what_if_summary()
    if what_if is not None:
        configs = ",".join(f"{k}={v}" for k, v in what_if["configs"].items())
        lines.append(
            f"what-if {configs}: serves {what_if['served_share']:.1%} of the window's demand, "
            f"{what_if['unmet_instance_hours']:g} instance-hours unmet (proposed plan: "
            f"{what_if['proposed']['served_share']:.1%})"
        )
    return lines


def _span(result: AnalysisResult) -> str:
    """The window, and the data seen in it when that is less (a snapshot is minutes of it)."""
    window = f"{result.window_hours:g} h"
    seen = result.history.hours if result.history is not None else result.window_hours
    if seen >= result.window_hours * 0.99:
        return window
    amount = f"{seen:.3g} h" if seen >= 1.0 else f"{seen * 60:.3g} min"
    return f"a {window} window ({amount} of data seen)"


def _plan_line(result: AnalysisResult) -> str:
    """What the plan frees, or why there is no plan (too little history)."""
    if result.history is not None and not result.history.enough:
        return f"plan: {result.history.sentence()}"
    s = result.savings
    return (
        f"plan: {s['gpus_freed']} GPU(s) freeable ({s['gpu_hours_freed']:.1f} GPU-hours per "
        f"window), {s['gpus_changed']} GPU(s) changed on {s['nodes_changed']} node(s), "
        f"unmet demand {s['unmet_demand']}"
    )
