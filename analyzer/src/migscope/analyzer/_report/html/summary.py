"""The HTML report's summary: the headline, the teams that waste most, and the next step.

Why first and why these: a platform team reads the top of the page and decides. The cards
say how much the window wasted (GPU-hours and money), how many whole GPUs the plan frees
and how much it changes, with the change since the previous run when there is a trend;
the namespaces that waste most are the people to talk to; the next step is the command
to run (or why there is none: a snapshot, simulated data, nothing to change). It is also
the only part that says whether the report may be read as a plan at all (too little
history makes it a snapshot).
"""

from __future__ import annotations

from migscope.analyzer._report.html.format import badge, escape, hours, money, utc_time
from migscope.analyzer._report.next_step import next_step as step_of
from migscope.analyzer._report.trend import waste_change
from migscope.core import ReportV1

_TOP_NAMESPACES = 5


def _card(card_id: str, value: str, title: str, detail: str = "") -> str:
    small = f"<small>{detail}</small>" if detail else ""
    return f'<div class="card" id="card-{card_id}"><b>{value}</b>{escape(title)}{small}</div>'


def _trend_delta(report: ReportV1) -> str:
    """The change of wasted GPU-hours since the previous run, or "" without a trend."""
    change = waste_change(report)
    if change is None:
        return ""
    delta = change.delta
    unit = " per week" if change.weekly else ""
    share = f" ({change.share * 100:+.0f}%)" if change.share is not None else ""
    arrow = "▲" if delta > 0 else "▼" if delta < 0 else "="
    cls = "up" if delta > 0 else "down" if delta < 0 else "same"
    return (
        f'<span class="delta {cls}" id="trend-delta">{arrow} {delta:+,.1f}{unit}{share} '
        f"since the run ending {escape(change.before_end[:10])}</span>"
    )


def _cards(report: ReportV1) -> str:
    sav = report.savings
    split = (
        f"idle {hours(sav.idle_gpu_hours)} · unallocated {hours(sav.unallocated_gpu_hours)} · "
        f"oversized {hours(sav.oversized_gpu_hours)}"
    )
    cards = [
        _card(
            "wasted-gpu-hours",
            hours(sav.wasted_gpu_hours),
            "GPU-hours wasted",
            escape(split) + " " + _trend_delta(report),
        )
    ]
    if sav.price_per_gpu_hour is not None:
        cards.append(
            _card(
                "wasted-cost",
                money(sav.wasted_cost),
                "wasted cost",
                f"at {escape(money(sav.price_per_gpu_hour))} per GPU-hour",
            )
        )
    freed = f"{hours(sav.gpu_hours_freed)} GPU-hours per window"
    if sav.freed_cost is not None:
        freed += f", worth {money(sav.freed_cost)}"
    cards += [
        _card("gpus-freed", escape(sav.gpus_freed), "whole GPUs freeable", escape(freed)),
        _card("idle", escape(sav.idle_slices), "idle slices", "held by a pod, not used"),
        _card("unallocated", escape(sav.unallocated_slices), "unallocated slices", "no pod"),
        _card("oversized", escape(sav.oversized_slices), "oversized slices"),
        _card(
            "gpus-changed",
            escape(sav.gpus_changed),
            "GPUs changed by the plan",
            f"on {escape(sav.nodes_changed if sav.nodes_changed is not None else 'n/a')} "
            f"node(s), of {escape(sav.gpus_planned)} planned",
        ),
        _card("unmet", escape(sav.unmet_demand), "instances of demand unmet"),
        _card("slices", escape(report.summary.slices), "slices analysed"),
    ]
    return '<div class="cards" id="summary">' + "".join(cards) + "</div>"


def _top_namespaces(report: ReportV1) -> str:
    rows = [r for r in report.savings.by_namespace if r.wasted_gpu_hours > 0]
    if not rows:
        return ""
    price = report.savings.price_per_gpu_hour
    items = []
    for r in rows[:_TOP_NAMESPACES]:
        cost = f", {money(r.wasted_gpu_hours * price)}" if price is not None else ""
        items.append(
            f"<li><b>{escape(r.namespace)}</b>: {hours(r.wasted_gpu_hours)} GPU-hours{cost} "
            f"({escape(r.slices)} slices)</li>"
        )
    more = len(rows) - _TOP_NAMESPACES
    tail = f' <a href="#waste">and {more} more</a>' if more > 0 else ""
    return (
        f'<div id="top-namespaces"><b>Most waste, by namespace</b>{tail}'
        f"<ol>{''.join(items)}</ol></div>"
    )


def next_step(report: ReportV1) -> str:
    """What to do with this report, in the parts and order the Markdown report has too.

    Returns:
        HTML: ``<div id="next-step">``.
    """
    out = ['<div id="next-step"><h3>Next step</h3>']
    for part in step_of(report).parts():
        if part.key == "simulated":
            out.append(
                '<p class="warn" id="simulated"><b>Simulated data.</b> This report was made '
                "from the simulator: <code>migscope apply</code> refuses its plan.</p>"
            )
            continue
        more = _MORE.get(part.key, "")
        out.append(f'<p id="step-{part.key}">{escape(part.text)}{more}</p>')
        if part.commands:
            out.append(f"<pre><code>{escape(chr(10).join(part.commands))}</code></pre>")
        if part.key == "apply":
            out.append(
                '<p class="muted">The dry run says what would change and why a node would be '
                "skipped. <code>migscope apply</code> refuses a plan older than 24 h "
                "(<code>--max-plan-age</code>): run the analysis again if this report is "
                "older. In the cluster, the Helm chart's apply CronJob "
                "(<code>apply.enabled</code>) does this on its schedule.</p>"
            )
    out.append("</div>")
    return "".join(out)


_MORE = {
    "idle": ' (<a href="#idle">idle and unallocated slices</a>, with the pods that hold them)',
    "apply": ' (<a href="#layouts">layouts</a>)',
    "requests": ' (<a href="#requests">request changes</a>)',
}


def summary_section(report: ReportV1) -> str:
    """The cards, the snapshot warning, the statuses, the top namespaces and the next step.

    Args:
        report: The validated report.

    Returns:
        HTML (several elements, no heading).
    """
    out = [_cards(report)]
    evidence = report.evidence
    if evidence is not None and not evidence.enough_for_a_plan:
        out.append(
            '<p class="snapshot warn" id="snapshot"><b>Snapshot: no change recommended.</b> '
            f"{escape(hours(evidence.history_hours))} h of history, "
            f"{escape(hours(evidence.min_history_hours))} h needed "
            "(policy <code>evidence.min_history_hours</code>): the slices are classified, "
            "the layouts stay as they are.</p>"
        )
    by_status = report.summary.by_status
    if by_status:
        out.append(
            "<p>By status: "
            + " ".join(f"{badge(str(k))} {escape(v)}" for k, v in by_status.items())
            + "</p>"
        )
    sav = report.savings
    out.append(
        f"<p>The plan uses {escape(sav.gpus_used_after)} of {escape(sav.gpus_planned)}"
        f" MIG GPUs and frees {escape(sav.gpus_freed)} whole GPU(s) "
        f"({hours(sav.gpu_hours_freed)} GPU-hours per window).</p>"
    )
    out.append('<div class="row">' + next_step(report) + _top_namespaces(report) + "</div>")
    return "\n".join(out)


def made_at(report: ReportV1) -> str:
    """When the report was made, for the header line ("" when unknown)."""
    provenance = report.provenance
    if provenance is None:
        return ""
    return f" Made {escape(utc_time(provenance.created_unix))}."
