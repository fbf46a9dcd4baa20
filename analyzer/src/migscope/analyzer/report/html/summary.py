"""The HTML report's summary: the headline cards, the snapshot warning and the plan sentence.

Why its own module: it is what a reader sees first and the only part that says whether the
report may be read as a plan at all (too little history makes it a snapshot).
"""

from __future__ import annotations

from collections.abc import Mapping

from migscope.analyzer.report.html.format import badge, escape, hours
from migscope.core.spec.v1 import ReportV1

__all__ = ["summary_section"]


def summary_section(report: ReportV1) -> str:
    """The summary cards, the snapshot warning when there is one, and the plan in a sentence.

    Args:
        report: The validated report.

    Returns:
        HTML (several elements, no heading).
    """
    sav = report.savings
    summary = report.summary
    cards: list[tuple[str, object]] = [
        ("Slices analysed", summary.get("slices", "n/a")),
        ("Idle (held, unused)", sav.idle_slices),
        ("Unallocated", sav.unallocated_slices),
        ("Oversized", sav.oversized_slices),
        ("Wasted GPU-hours", hours(sav.wasted_gpu_hours)),
        ("Whole GPUs freed", sav.gpus_freed),
        ("GPUs changed", sav.gpus_changed),
        ("Unmet demand", sav.unmet_demand),
    ]
    if sav.price_per_gpu_hour is not None:
        cards.append(("Wasted cost", hours(sav.wasted_cost)))
        cards.append(("Freed by the plan", hours(sav.freed_cost)))
    out = ['<div class="cards" id="summary">']
    out += [f'<div class="card"><b>{escape(v)}</b>{escape(k)}</div>' for k, v in cards]
    out.append("</div>")
    evidence = report.evidence
    if evidence is not None and not evidence.enough_for_a_plan:
        out.append(
            '<p class="snapshot" id="snapshot"><b>Snapshot: no change recommended.</b> '
            f"{escape(hours(evidence.history_hours))} h of history, "
            f"{escape(hours(evidence.min_history_hours))} h needed "
            "(policy <code>evidence.min_history_hours</code>): the slices are classified, "
            "the layouts stay as they are.</p>"
        )
    by_status = summary.get("by_status")
    if isinstance(by_status, Mapping) and by_status:
        out.append(
            "<p>By status: "
            + " ".join(f"{badge(str(k))} {escape(v)}" for k, v in by_status.items())
            + "</p>"
        )
    out.append(
        f"<p>The plan uses {escape(sav.gpus_used_after)} of {escape(sav.gpus_planned)}"
        f" MIG GPUs and frees {escape(sav.gpus_freed)} whole GPU(s) "
        f"({hours(sav.gpu_hours_freed)} GPU-hours per window).</p>"
    )
    return "\n".join(out)
