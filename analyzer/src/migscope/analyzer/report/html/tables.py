"""The HTML report's table of idle and unallocated slices, with every owner that held them.

Why a table of its own: these are the slices someone can give back today, and the owners
column names the people to talk to; the charts show the same slices only as colours.
"""

from __future__ import annotations

from collections.abc import Sequence

from migscope.analyzer.report.html.format import badge, escape, gib, owner_text, pct
from migscope.core.spec.v1 import SliceV1

__all__ = ["idle_table"]


def idle_table(slices: Sequence[SliceV1]) -> str:
    """The idle and unallocated ones of ``slices`` as a table (``#idle-slices``).

    Args:
        slices: The current slices, in the order of the rows.

    Returns:
        HTML: the table, or a sentence when there are none.
    """
    rows = [s for s in slices if s.status in ("idle", "unallocated")]
    if not rows:
        return "<p>None found.</p>"
    out = [
        '<table id="idle-slices"><tr><th>node</th><th>GPU</th><th>GI</th><th>profile</th>'
        "<th>status</th><th>held by</th><th>p95 activity</th><th>p95 memory</th>"
        "<th>confidence</th><th>why</th></tr>"
    ]
    for s in rows:
        ev = s.evidence
        out.append(
            f"<tr><td>{escape(s.node)}</td><td>{escape(s.gpu)}</td>"
            f"<td>{escape(s.gpu_instance_id)}</td><td>{escape(s.profile)}</td>"
            f"<td>{badge(s.status)}</td><td>{escape(owner_text(s))}</td>"
            f"<td>{pct(ev.get('activity_p95'))}</td><td>{gib(ev.get('memory_p95_bytes'))}</td>"
            f"<td>{s.confidence:.2f}</td>"
            f"<td>{escape(s.reason)}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)
