"""Escaping, number formats and status colours shared by every part of the HTML report.

Why one module: every chart and table escapes report strings (pod and namespace names are
user input) and prints percentages, GiB and hours the same way; one place keeps the page
consistent and the escaping impossible to forget.
"""

from __future__ import annotations

import html

from migscope.core.spec.v1 import SliceV1

__all__ = [
    "STATUS_COLOURS",
    "badge",
    "escape",
    "gib",
    "hours",
    "number",
    "owner_text",
    "pct",
    "slice_label",
    "status_colour",
]

STATUS_COLOURS: dict[str, str] = {
    "idle": "#d62728",
    "unallocated": "#9e9e9e",
    "oversized": "#ff9f1c",
    "saturated": "#8e44ad",
    "healthy": "#2ca02c",
    "unknown": "#607d8b",
}
"""Fill of a current instance in the layout diagrams and of the status badges."""


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
            parts.append(f"{o.namespace}/{o.pod}{share}")
        return ", ".join(parts)
    if slice_.pod is not None:
        return f"{slice_.namespace}/{slice_.pod}"
    return "—"


def slice_label(s: SliceV1) -> str:
    """A slice's identity as one line of plain text: node, GPU, GI and profile."""
    return f"{s.node} · GPU {s.gpu} · GI {s.gpu_instance_id} · {s.profile}"
