"""The HTML report's request changes: what each workload should ask for, and the idle holders.

The same rows as report.md's "Request changes" (from ``report.json``'s ``request_changes``):
per workload its owner (and how it was found), its pods, the profile now and the one to ask
for, and the command; below, the workloads holding idle slices, marked where the plan evicts
them (scale them down or drop their request before applying).
"""

from __future__ import annotations

from migscope.analyzer._report.html.format import escape
from migscope.core import ReportV1, WorkloadV1


def _who(w: WorkloadV1) -> str:
    guessed = ' <span class="muted">(guessed)</span>' if w.source == "guessed" else ""
    return f"{escape(w.namespace)}/{escape(w.kind)}/{escape(w.name)}{guessed}"


def requests_section(report: ReportV1) -> str:
    """``<div id="request-changes">``, or a one-line paragraph when there is nothing."""
    changes = report.request_changes
    if changes is None:
        return '<p class="muted" id="request-changes">No request change (no plan).</p>'
    out = ['<div id="request-changes">']
    if changes.workloads:
        out.append(
            f"<p>What each workload should ask for: the largest need of its pods. Patches: "
            f"<code>{escape(changes.file)}</code> beside this report.</p>"
            "<table><thead><tr><th>workload</th><th>owner from</th><th>pods</th><th>now</th>"
            "<th>should ask for</th><th>command</th></tr></thead><tbody>"
        )
        for c in changes.workloads:
            out.append(
                f"<tr><td>{_who(c.workload)}</td><td>{escape(c.workload.source)}</td>"
                f"<td>{escape(', '.join(c.pods))}</td><td>{escape(c.current_profile)}</td>"
                f"<td><b>{escape(c.profile)}</b></td>"
                f"<td><code>{escape(c.command)}</code></td></tr>"
            )
        out.append("</tbody></table>")
    else:
        out.append("<p>No workload needs another profile.</p>")
    if changes.idle_holders:
        out.append(
            "<p>Workloads holding idle slices: scale them down or drop their request before "
            "applying where the plan evicts them, or they take a slice made for someone "
            "else.</p><table><thead><tr><th>workload</th><th>pods</th><th>profiles</th>"
            "<th>evicted by the plan</th></tr></thead><tbody>"
        )
        for h in changes.idle_holders:
            out.append(
                f"<tr><td>{_who(h.workload)}</td><td>{escape(', '.join(h.pods))}</td>"
                f"<td>{escape(', '.join(h.profiles))}</td>"
                f"<td>{'yes' if h.evicted_by_plan else 'no'}</td></tr>"
            )
        out.append("</tbody></table>")
    if changes.skipped:
        items = "".join(f"<li>{escape(x)}</li>" for x in changes.skipped)
        out.append(f"<p>Not changed:</p><ul>{items}</ul>")
    out.append("</div>")
    return "".join(out)
