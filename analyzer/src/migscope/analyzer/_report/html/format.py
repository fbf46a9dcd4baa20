"""Escaping, number formats and status colours shared by every part of the HTML report.

Why one module: every chart and table escapes report strings (pod and namespace names are
user input) and prints percentages, GiB and hours the same way; one place keeps the page
consistent and the escaping impossible to forget.
"""

from __future__ import annotations

import hashlib
import html
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timezone

from migscope.analyzer._judge.claims import holder_text
from migscope.core import SliceV1

STATUS_COLOURS: dict[str, str] = {
    "idle": "#d62728",
    "unallocated": "#9e9e9e",
    "oversized": "#ff9f1c",
    "saturated": "#8e44ad",
    "healthy": "#2ca02c",
    "unknown": "#607d8b",
}
"""Fill of a current instance in the layout diagrams and of the status badges."""
STATUS_ORDER = tuple(STATUS_COLOURS)
"""Statuses in the order the report lists them: what to act on first."""


def escape(value: object) -> str:
    """Escape any value for HTML text and attribute context.

    Args:
        value: Anything; it is printed with ``str`` first.

    Returns:
        The text with ``& < > " '`` escaped.
    """
    return html.escape(str(value), quote=True)


def number(value: object) -> float | None:
    """``value`` as a float when it is a number (not a bool), else None.

    Args:
        value: A JSON value of a free-form part of the report (``evidence``).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def pct(value: object) -> str:
    """A 0..1 share as ``"12.3%"``, or ``"n/a"`` when it is not a number."""
    v = number(value)
    return f"{v * 100:.1f}%" if v is not None else "n/a"


def gib(value: object) -> str:
    """Bytes as ``"1.5 GiB"``, or ``"n/a"`` when it is not a number."""
    v = number(value)
    return f"{v / (1 << 30):.1f} GiB" if v is not None else "n/a"


def hours(value: object) -> str:
    """Hours (or money) with one decimal and thousands separators, or ``"n/a"``."""
    v = number(value)
    return f"{v:,.1f}" if v is not None else "n/a"


def money(value: object) -> str:
    """Money with two decimals and thousands separators, or ``"n/a"``."""
    v = number(value)
    return f"{v:,.2f}" if v is not None else "n/a"


def utc_time(value: object) -> str:
    """Unix seconds as ``"Mon 05 Jan 2026 14:00 UTC"``, or ``"n/a"``."""
    v = number(value)
    if v is None:
        return "n/a"
    return datetime.fromtimestamp(v, tz=timezone.utc).strftime("%a %d %b %Y %H:%M UTC")


def anchor(kind: str, name: str) -> str:
    """A fragment id for ``name`` made of safe characters only (names are user input).

    Args:
        kind: A fixed prefix (``node``, ``pool``, ``layout``).
        name: Any text.

    Returns:
        ``"<kind>-<12 hex digits>"``, the same for the same name on every page.
    """
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{kind}-{digest}"


def status_counts_text(slices: Iterable[SliceV1]) -> str:
    """``"12 idle, 4 unallocated, 16 healthy"``: the slices per status, in report order."""
    counts = Counter[str](s.status for s in slices)
    return ", ".join(f"{counts[k]} {k}" for k in STATUS_ORDER if counts[k])


def status_colour(status: str) -> str:
    """The colour of a slice status (that of ``unknown`` for any other string)."""
    return STATUS_COLOURS.get(status, STATUS_COLOURS["unknown"])


def badge(status: str) -> str:
    """A slice status as a coloured badge."""
    return f'<span class="badge" style="background:{status_colour(status)}">{escape(status)}</span>'


def owner_text(slice_: SliceV1) -> str:
    """Every pod that held the slice with its share of the window, or ``"—"`` for none.

    Args:
        slice_: The slice; ``owners`` when the report has them, else its main owner.

    Returns:
        Plain text (not escaped): ``"ns/pod (60%), ns/other (40%)"``.
    """
    if slice_.owners:
        parts = []
        for o in slice_.owners:
            share = f" ({o.fraction * 100:.0f}%)" if o.fraction is not None else ""
            parts.append(f"{holder_text(o.namespace, o.pod, o.claim)}{share}")
        return ", ".join(parts)
    return holder_text(slice_.namespace, slice_.pod, slice_.claim)


def slice_label(s: SliceV1) -> str:
    """A slice's identity as one line of plain text: node, GPU, GI and profile."""
    return f"{s.node} · GPU {s.gpu} · GI {s.gpu_instance_id} · {s.profile}"
