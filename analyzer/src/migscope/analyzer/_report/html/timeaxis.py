"""The time axis above a heatmap: the window's days as dates, in UTC.

Why dates and not "hours 0..167": a reader matches an idle stretch or a spike to a day of
the week they remember (a holiday, a release), and the report's window is in UTC, so the
ticks are UTC midnights. Windows longer than two weeks get a label per Monday only.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

AXIS_HEIGHT_PX = 26
"""Height of the axis above a heatmap, pixels (the label column's spacer matches it)."""
_DAY = 86400.0


def day_label(unix: float) -> str:
    """``"Mon 05 Jan"`` for a Unix time (UTC)."""
    return datetime.fromtimestamp(unix, tz=timezone.utc).strftime("%a %d %b")


def time_axis(*, start_unix: float, period_s: float, columns: int, cell_px: int) -> str:
    """An SVG axis for ``columns`` cells of ``period_s`` from ``start_unix``, ``cell_px`` wide.

    Returns:
        ``<svg class="axis">`` with a tick and a date at every UTC midnight inside the window
        (every Monday when the window is longer than 14 days).
    """
    width = max(1, columns * cell_px)
    end = start_unix + columns * period_s
    first = math.ceil(start_unix / _DAY) * _DAY
    days = int((end - first) // _DAY) + 1
    weekly = (end - start_unix) > 14 * _DAY
    out = [
        f'<svg class="axis" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{AXIS_HEIGHT_PX}" viewBox="0 0 {width} {AXIS_HEIGHT_PX}">'
    ]
    last_label = -1e9
    for k in range(max(0, days)):
        t = first + k * _DAY
        if t > end:
            break
        x = (t - start_unix) / period_s * cell_px
        out.append(f'<path d="M{x:.1f} {AXIS_HEIGHT_PX - 8}V{AXIS_HEIGHT_PX}" stroke="#888"/>')
        is_monday = datetime.fromtimestamp(t, tz=timezone.utc).weekday() == 0
        if (weekly and not is_monday) or x > width - 30 or x - last_label < 56:
            continue
        out.append(f'<text x="{x + 2:.1f}" y="{AXIS_HEIGHT_PX - 11}">{day_label(t)}</text>')
        last_label = x
    out.append("</svg>")
    return "".join(out)
