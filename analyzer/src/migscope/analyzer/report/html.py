"""The HTML report: one self-contained file with charts, for a browser or an e-mail attachment.

Everything is drawn from the JSON report (``schema_version`` 1, docs/report-schema.md) as
inline SVG generated here: no JavaScript charting library, no external CSS, fonts or images,
and a Content-Security-Policy that forbids the page from loading anything. The charts:

* **Slice activity heatmap**: one row per current slice. When every slice carries per-hour
  activity (``hourly.activity``, a list of 0..1 or null; the analyzer adds it whenever the
  window is whole hours on the hour grid) the columns are the hours of the window; otherwise
  they are activity p50, p95 and max over the window (the chart's caption says which).
* **Idle and unallocated slices** with every owner that held them.
* **Waste per namespace**: stacked bars of idle and oversized GPU-hours.
* **Layouts per GPU**: the GPU's memory slices as a row of boxes and each GPU instance as a
  span at its placement, now (coloured by status) and as proposed (kept or new).

Every string taken from the report is escaped (pod and namespace names are user input).
A one-line script records any script error into a hidden element (``#js-errors``) so that
automated checks can prove the page renders cleanly.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from migscope.core.catalogue import CatalogueError, find_model

__all__ = [
    "LAYOUT_LEFT_PX",
    "LAYOUT_ROW_PX",
    "LAYOUT_SLICE_PX",
    "STATUS_COLOURS",
    "render_html",
]

LAYOUT_SLICE_PX = 48
"""Width of one memory slice in a layout diagram, pixels."""
LAYOUT_LEFT_PX = 90
"""x of memory slice 0 in a layout diagram (the row labels sit left of it), pixels."""
LAYOUT_ROW_PX = 34
"""Height of one row (now / proposed) in a layout diagram, pixels."""

STATUS_COLOURS: dict[str, str] = {
    "idle": "#d62728",
    "unallocated": "#9e9e9e",
    "oversized": "#ff9f1c",
    "saturated": "#8e44ad",
    "healthy": "#2ca02c",
    "unknown": "#607d8b",
}
"""Fill of a current instance in the layout diagrams and of the status badges."""

_KEPT_COLOUR = "#5b8def"
_NEW_COLOUR = "#17becf"
_HEAT_CELL_W = 56
_HEAT_HOUR_W = 4
_HEAT_CELL_H = 18
_HEAT_LABEL_W = 330
_BAR_LABEL_W = 160
_BAR_W = 520
_BAR_H = 20

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
_ERROR_HOOK = (
    "window.addEventListener('error',function(e){var n=document.getElementById('js-errors');"
    "if(n){n.textContent+=String(e.message)+'\\n';}});"
)
_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;color:#222;
max-width:1200px}
h1{margin-bottom:4px}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
.muted{color:#666}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:140px}
.card b{display:block;font-size:1.5em}
table{border-collapse:collapse;font-size:0.9em;margin:8px 0}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f5f5}.badge{display:inline-block;padding:1px 6px;border-radius:4px;color:#fff}
.gpu{display:inline-block;margin:6px 18px 6px 0}svg text{font-family:inherit}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
"""


def _e(value: object) -> str:
    """Escape any value for HTML text and attribute context."""
    return html.escape(str(value), quote=True)


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _pct(value: object) -> str:
    v = _num(value)
    return f"{v * 100:.1f}%" if v is not None else "n/a"


def _gib(value: object) -> str:
    v = _num(value)
    return f"{v / (1 << 30):.1f} GiB" if v is not None else "n/a"


def _hours(value: object) -> str:
    v = _num(value)
    return f"{v:,.1f}" if v is not None else "n/a"


def _status_colour(status: object) -> str:
    return STATUS_COLOURS.get(str(status), STATUS_COLOURS["unknown"])


def _badge(status: object) -> str:
    return f'<span class="badge" style="background:{_status_colour(status)}">{_e(status)}</span>'


def _heat_colour(value: float | None) -> str:
    """White (0) to dark blue (1); grey for unknown."""
    if value is None:
        return "#e0e0e0"
    v = min(max(value, 0.0), 1.0)
    r = round(247 + (8 - 247) * v)
    g = round(251 + (48 - 251) * v)
    b = round(255 + (107 - 255) * v)
    return f"rgb({r},{g},{b})"


def _owner_text(slice_: Mapping[str, Any]) -> str:
    owners = slice_.get("owners")
    if isinstance(owners, list) and owners:
        parts = []
        for o in owners:
            if not isinstance(o, Mapping):
                continue
            frac = _num(o.get("fraction"))
            share = f" ({frac * 100:.0f}%)" if frac is not None else ""
            parts.append(f"{o.get('namespace')}/{o.get('pod')}{share}")
        if parts:
            return ", ".join(parts)
    if slice_.get("pod") is not None:
        return f"{slice_.get('namespace')}/{slice_.get('pod')}"
    return "—"


def _slice_label(s: Mapping[str, Any]) -> str:
    return (
        f"{s.get('node')} · GPU {s.get('gpu')} · GI {s.get('gpu_instance_id')} · {s.get('profile')}"
    )


def _sort_key(s: Mapping[str, Any]) -> tuple[str, int, int, int]:
    start = s.get("placement_start")
    return (
        str(s.get("node")),
        int(s.get("gpu") or 0),
        int(start) if isinstance(start, int) else 99,
        int(s.get("gpu_instance_id") or 0),
    )


def _current_slices(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    slices = [s for s in report.get("slices") or [] if isinstance(s, Mapping)]
    return sorted((s for s in slices if s.get("current", True)), key=_sort_key)


# --- summary -------------------------------------------------------------------------------


def _summary(report: Mapping[str, Any]) -> str:
    sav: Mapping[str, Any] = report.get("savings") or {}
    summary: Mapping[str, Any] = report.get("summary") or {}
    cards = [
        ("Slices analysed", summary.get("slices", "n/a")),
        ("Idle (held, unused)", sav.get("idle_slices", "n/a")),
        ("Unallocated", sav.get("unallocated_slices", "n/a")),
        ("Oversized", sav.get("oversized_slices", "n/a")),
        ("Wasted GPU-hours", _hours(sav.get("wasted_gpu_hours"))),
        ("Whole GPUs freed", sav.get("gpus_freed", "n/a")),
        ("GPUs changed", sav.get("gpus_changed", "n/a")),
        ("Unmet demand", sav.get("unmet_demand", "n/a")),
    ]
    if _num(sav.get("price_per_gpu_hour")) is not None:
        cards.append(("Wasted cost", _hours(sav.get("wasted_cost"))))
        cards.append(("Freed by the plan", _hours(sav.get("freed_cost"))))
    out = ['<div class="cards" id="summary">']
    out += [f'<div class="card"><b>{_e(v)}</b>{_e(k)}</div>' for k, v in cards]
    out.append("</div>")
    evidence = report.get("evidence")
    if isinstance(evidence, Mapping) and evidence.get("enough_for_a_plan") is False:
        out.append(
            '<p class="snapshot" id="snapshot"><b>Snapshot: no change recommended.</b> '
            f"{_e(_hours(evidence.get('history_hours')))} h of history, "
            f"{_e(_hours(evidence.get('min_history_hours')))} h needed "
            "(policy <code>evidence.min_history_hours</code>): the slices are classified, "
            "the layouts stay as they are.</p>"
        )
    by_status = summary.get("by_status")
    if isinstance(by_status, Mapping) and by_status:
        out.append(
            "<p>By status: "
            + " ".join(f"{_badge(k)} {_e(v)}" for k, v in by_status.items())
            + "</p>"
        )
    if sav.get("gpus_planned") is not None:
        out.append(
            f"<p>The plan uses {_e(sav.get('gpus_used_after'))} of {_e(sav.get('gpus_planned'))}"
            f" MIG GPUs and frees {_e(sav.get('gpus_freed'))} whole GPU(s) "
            f"({_hours(sav.get('gpu_hours_freed'))} GPU-hours per window).</p>"
        )
    return "\n".join(out)


# --- heatmap -------------------------------------------------------------------------------


def _hourly(s: Mapping[str, Any]) -> list[float | None] | None:
    hourly = s.get("hourly")
    evidence = s.get("evidence")
    if isinstance(hourly, Mapping):
        series = hourly.get("activity")
    elif isinstance(evidence, Mapping):
        series = evidence.get("activity_hourly")
    else:
        return None
    if not isinstance(series, list) or not series:
        return None
    return [_num(v) for v in series]


def _heatmap(slices: Sequence[Mapping[str, Any]]) -> str:
    if not slices:
        return "<p>No current slices.</p>"
    hourly = [_hourly(s) for s in slices]
    if all(h is not None for h in hourly):
        kind = "hourly"
        n_cols = max(len(h or []) for h in hourly)
        columns = [f"hour {i}" for i in range(n_cols)]
        cell_w = _HEAT_HOUR_W
        rows: list[list[float | None]] = [list(h or []) for h in hourly]
        caption = "Activity per hour of the window, one row per slice (0% white, 100% dark)."
    else:
        kind = "window-stats"
        columns = ["p50", "p95", "max"]
        cell_w = _HEAT_CELL_W
        rows = []
        for s in slices:
            ev = s.get("evidence")
            ev = ev if isinstance(ev, Mapping) else {}
            rows.append([_num(ev.get(f"activity_{c}")) for c in columns])
        caption = (
            "Activity p50, p95 and max over the window, one row per slice (0% white, 100% "
            "dark, grey unknown). The report holds window statistics, not per-hour activity."
        )
    top = 22
    width = _HEAT_LABEL_W + cell_w * len(columns) + 10
    height = top + _HEAT_CELL_H * len(rows) + 4
    out = [
        f'<p class="muted">{_e(caption)}</p>',
        f'<svg class="chart heatmap" data-kind="{kind}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="slice activity heatmap">',
    ]
    if kind == "window-stats":
        for j, col in enumerate(columns):
            x = _HEAT_LABEL_W + j * cell_w + cell_w / 2
            out.append(f'<text x="{x:g}" y="15" text-anchor="middle" font-size="12">{col}</text>')
    else:
        out.append(
            f'<text x="{_HEAT_LABEL_W}" y="15" font-size="12">hours 0..{len(columns) - 1}</text>'
        )
    for i, (s, values) in enumerate(zip(slices, rows, strict=True)):
        y = top + i * _HEAT_CELL_H
        out.append(
            f'<text x="{_HEAT_LABEL_W - 6}" y="{y + 13}" text-anchor="end" font-size="11">'
            f"{_e(_slice_label(s))}</text>"
        )
        out.append(
            f'<rect x="0" y="{y + 4}" width="6" height="{_HEAT_CELL_H - 6}" '
            f'fill="{_status_colour(s.get("status"))}"><title>{_e(s.get("status"))}</title></rect>'
        )
        for j, value in enumerate(values):
            x = _HEAT_LABEL_W + j * cell_w
            out.append(
                f'<rect class="cell" x="{x}" y="{y}" width="{cell_w}" height="{_HEAT_CELL_H}" '
                f'fill="{_heat_colour(value)}" stroke="#fff" stroke-width="0.5">'
                f"<title>{_e(_slice_label(s))} {_e(columns[j])}: {_pct(value)}</title></rect>"
            )
            if kind == "window-stats":
                colour = "#fff" if value is not None and value > 0.55 else "#222"
                out.append(
                    f'<text x="{x + cell_w / 2:g}" y="{y + 13}" text-anchor="middle" '
                    f'font-size="10" fill="{colour}">{_pct(value)}</text>'
                )
    out.append("</svg>")
    return "\n".join(out)


# --- idle / unallocated ----------------------------------------------------------------------


def _idle_table(slices: Sequence[Mapping[str, Any]]) -> str:
    rows = [s for s in slices if s.get("status") in ("idle", "unallocated")]
    if not rows:
        return "<p>None found.</p>"
    out = [
        '<table id="idle-slices"><tr><th>node</th><th>GPU</th><th>GI</th><th>profile</th>'
        "<th>status</th><th>held by</th><th>p95 activity</th><th>p95 memory</th>"
        "<th>confidence</th><th>why</th></tr>"
    ]
    for s in rows:
        ev = s.get("evidence")
        ev = ev if isinstance(ev, Mapping) else {}
        conf = _num(s.get("confidence"))
        out.append(
            f"<tr><td>{_e(s.get('node'))}</td><td>{_e(s.get('gpu'))}</td>"
            f"<td>{_e(s.get('gpu_instance_id'))}</td><td>{_e(s.get('profile'))}</td>"
            f"<td>{_badge(s.get('status'))}</td><td>{_e(_owner_text(s))}</td>"
            f"<td>{_pct(ev.get('activity_p95'))}</td><td>{_gib(ev.get('memory_p95_bytes'))}</td>"
            f"<td>{f'{conf:.2f}' if conf is not None else 'n/a'}</td>"
            f"<td>{_e(s.get('reason', ''))}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)


# --- namespace waste -------------------------------------------------------------------------


def _waste_bars(rows: Sequence[Mapping[str, Any]]) -> str:
    rows = [r for r in rows if isinstance(r, Mapping)]
    if not rows:
        return "<p>No waste found.</p>"
    biggest = max((_num(r.get("wasted_gpu_hours")) or 0.0) for r in rows) or 1.0
    top = 4
    width = _BAR_LABEL_W + _BAR_W + 220
    height = top + len(rows) * (_BAR_H + 6) + 4
    out = [
        f'<svg class="chart waste" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="wasted GPU-hours per namespace">'
    ]
    for i, r in enumerate(rows):
        y = top + i * (_BAR_H + 6)
        idle = max(_num(r.get("idle_gpu_hours")) or 0.0, 0.0)
        over = max(_num(r.get("oversized_gpu_hours")) or 0.0, 0.0)
        total = _num(r.get("wasted_gpu_hours"))
        w_idle = _BAR_W * idle / biggest
        w_over = _BAR_W * over / biggest
        name = _e(r.get("namespace"))
        out.append(
            f'<text x="{_BAR_LABEL_W - 6}" y="{y + 14}" text-anchor="end" font-size="12">'
            f"{name}</text>"
        )
        out.append(
            f'<rect class="bar idle" x="{_BAR_LABEL_W}" y="{y}" width="{w_idle:.1f}" '
            f'height="{_BAR_H}" fill="{STATUS_COLOURS["idle"]}"><title>{name}: idle '
            f"{_hours(idle)} GPU-h</title></rect>"
        )
        out.append(
            f'<rect class="bar oversized" x="{_BAR_LABEL_W + w_idle:.1f}" y="{y}" '
            f'width="{w_over:.1f}" height="{_BAR_H}" fill="{STATUS_COLOURS["oversized"]}">'
            f"<title>{name}: oversized {_hours(over)} GPU-h</title></rect>"
        )
        out.append(
            f'<text x="{_BAR_LABEL_W + w_idle + w_over + 6:.1f}" y="{y + 14}" font-size="12">'
            f"{_hours(total)} GPU-h ({_e(r.get('slices'))} slices)</text>"
        )
    out.append("</svg>")
    legend = (
        '<p class="legend">'
        f'<span><i style="background:{STATUS_COLOURS["idle"]}"></i>idle (unallocated slices '
        "under “(unallocated)”)</span>"
        f'<span><i style="background:{STATUS_COLOURS["oversized"]}"></i>oversized</span></p>'
    )
    return "\n".join(out) + "\n" + legend


# --- layouts -------------------------------------------------------------------------------


def _memory_slices(model: object, profile: str) -> tuple[int, int]:
    """(slices the profile takes, slices of the GPU), from the catalogue or the name."""
    if isinstance(model, str):
        try:
            gpu = find_model(model)
            return gpu.profile(profile).memory_slices, gpu.memory_slices
        except (CatalogueError, ValueError):
            pass
    try:
        compute = int(profile.split("g", 1)[0])
    except ValueError:
        compute = 1
    return {3: 4, 5: 8, 6: 8, 7: 8}.get(compute, compute), 8


def _gpu_total(model: object) -> int:
    if isinstance(model, str):
        try:
            return find_model(model).memory_slices
        except (CatalogueError, ValueError):
            pass
    return 8


def _instance_rect(
    *,
    row: str,
    y: int,
    start: int,
    size: int,
    profile: str,
    fill: str,
    tip: str,
) -> str:
    x = LAYOUT_LEFT_PX + start * LAYOUT_SLICE_PX
    w = size * LAYOUT_SLICE_PX
    return (
        f'<rect class="instance {row}" data-profile="{_e(profile)}" data-start="{start}" '
        f'data-size="{size}" x="{x + 2}" y="{y + 3}" width="{w - 4}" '
        f'height="{LAYOUT_ROW_PX - 6}" rx="4" fill="{fill}" fill-opacity="0.85" stroke="#333">'
        f"<title>{_e(tip)}</title></rect>"
        f'<text x="{x + w / 2:g}" y="{y + LAYOUT_ROW_PX / 2 + 4:g}" text-anchor="middle" '
        f'font-size="{11 if size > 1 else 9}" fill="#fff" pointer-events="none">'
        f"{_e(profile)}</text>"
    )


def _layout_svg(
    node: str,
    gpu: int,
    total: int,
    now: Sequence[Mapping[str, Any]],
    proposed: Sequence[Mapping[str, Any]] | None,
    *,
    proposed_label: str,
    kept: set[tuple[str, int]],
    mig_enabled_after: bool,
    model: object,
) -> str:
    width = LAYOUT_LEFT_PX + total * LAYOUT_SLICE_PX + 10
    height = 18 + 2 * LAYOUT_ROW_PX + 8
    out = [
        f'<svg class="chart layout" data-node="{_e(node)}" data-gpu="{gpu}" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="layout of {_e(node)} GPU {gpu}, now and proposed">'
    ]
    for k in range(total):
        x = LAYOUT_LEFT_PX + k * LAYOUT_SLICE_PX + LAYOUT_SLICE_PX / 2
        out.append(f'<text x="{x:g}" y="13" text-anchor="middle" font-size="10">{k}</text>')
    rows = (("now", "now"), ("proposed", proposed_label))
    for r, (cls, label) in enumerate(rows):
        y = 18 + r * LAYOUT_ROW_PX
        out.append(f'<text x="4" y="{y + LAYOUT_ROW_PX / 2 + 4:g}" font-size="12">{label}</text>')
        for k in range(total):
            x = LAYOUT_LEFT_PX + k * LAYOUT_SLICE_PX
            out.append(
                f'<rect class="memslice" x="{x}" y="{y}" width="{LAYOUT_SLICE_PX}" '
                f'height="{LAYOUT_ROW_PX}" fill="#fafafa" stroke="#ccc"/>'
            )
        if cls == "now":
            for s in now:
                start = s.get("placement_start")
                profile = str(s.get("profile"))
                if not isinstance(start, int):
                    continue
                size, _ = _memory_slices(model, profile)
                tip = (
                    f"{profile} at {start}, GI {s.get('gpu_instance_id')}: {s.get('status')}; "
                    f"held by {_owner_text(s)}"
                )
                out.append(
                    _instance_rect(
                        row="now",
                        y=y,
                        start=start,
                        size=size,
                        profile=profile,
                        fill=_status_colour(s.get("status")),
                        tip=tip,
                    )
                )
        elif not mig_enabled_after:
            out.append(
                f'<text x="{LAYOUT_LEFT_PX + 6}" y="{y + LAYOUT_ROW_PX / 2 + 4:g}" '
                'font-size="12">MIG disabled</text>'
            )
        elif proposed is not None:
            if not proposed:
                out.append(
                    f'<text x="{LAYOUT_LEFT_PX + 6}" y="{y + LAYOUT_ROW_PX / 2 + 4:g}" '
                    'font-size="12">no instances: the GPU is free</text>'
                )
            for p in proposed:
                start = p.get("start")
                profile = str(p.get("profile"))
                if not isinstance(start, int):
                    continue
                size, _ = _memory_slices(model, profile)
                is_kept = (profile, start) in kept
                out.append(
                    _instance_rect(
                        row="proposed",
                        y=y,
                        start=start,
                        size=size,
                        profile=profile,
                        fill=_KEPT_COLOUR if is_kept else _NEW_COLOUR,
                        tip=f"{profile} at {start}: {'unchanged' if is_kept else 're-created'}",
                    )
                )
    out.append("</svg>")
    return "".join(out)


def _pairs(items: Iterable[object]) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for p in items:
        if isinstance(p, Mapping) and isinstance(p.get("start"), int):
            out.add((str(p.get("profile")), int(p["start"])))
    return out


def _layouts(report: Mapping[str, Any], slices: Sequence[Mapping[str, Any]]) -> str:
    now: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    models: dict[tuple[str, int], object] = {}
    for s in slices:
        key = (str(s.get("node")), int(s.get("gpu") or 0))
        now.setdefault(key, []).append(s)
        models.setdefault(key, s.get("model"))
    recs = {
        str(r.get("node")): r for r in report.get("recommendations") or [] if isinstance(r, Mapping)
    }
    planned: dict[tuple[str, int], Mapping[str, Any]] = {}
    for node, node_rec in recs.items():
        for g in node_rec.get("gpus") or []:
            if isinstance(g, Mapping):
                key = (node, int(g.get("gpu") or 0))
                planned[key] = g
                models.setdefault(key, node_rec.get("model"))
    node_configs: Mapping[str, Any] = report.get("node_configs") or {}
    keys = sorted(set(now) | set(planned))
    if not keys:
        return "<p>No GPUs.</p>"
    legend = (
        '<p class="legend">Now: '
        + "".join(
            f'<span><i style="background:{c}"></i>{_e(k)}</span>' for k, c in STATUS_COLOURS.items()
        )
        + f' &nbsp; Proposed: <span><i style="background:{_KEPT_COLOUR}"></i>unchanged</span>'
        f'<span><i style="background:{_NEW_COLOUR}"></i>re-created (MIG Manager re-creates '
        "every instance of a changed GPU)</span></p>"
    )
    out = [
        '<p class="muted">Each GPU\'s memory slices (numbered) with its GPU instances at their '
        "placements: now, and after the plan. Hover an instance for its owner.</p>",
        legend,
    ]
    node_order = sorted({k[0] for k in keys})
    for node in node_order:
        rec = recs.get(node)
        title = f"<h3>{_e(node)}"
        if rec is not None:
            title += f" → <code>{_e(rec.get('mig_config'))}</code>"
            if rec.get("disruptive"):
                title += " (disruptive: drain first)"
        elif node in node_configs:
            title += f" — unchanged (<code>{_e(node_configs[node])}</code>)"
        else:
            title += " — not planned"
        out.append(title + "</h3>")
        if rec is not None and rec.get("pods_to_move"):
            pods = ", ".join(_e(p) for p in rec.get("pods_to_move") or [])
            out.append(f"<p>Pods that lose their device (on a re-created GPU): {pods}.</p>")
        out.append('<div class="gpus">')
        recreated = set(rec.get("gpus_recreated") or []) if rec is not None else set()
        for key in (k for k in keys if k[0] == node):
            model = models.get(key)
            g = planned.get(key)
            current = now.get(key, [])
            if g is not None:
                # One truth about disruption (core.disruption): a re-created GPU keeps nothing.
                changed = key[1] in recreated if rec is not None else bool(g.get("changed", True))
                proposed_state = g.get("proposed")
                enabled = not (
                    isinstance(proposed_state, Mapping)
                    and proposed_state.get("mig_enabled") is False
                )
                svg = _layout_svg(
                    node,
                    key[1],
                    _gpu_total(model),
                    current,
                    [p for p in g.get("placements") or [] if isinstance(p, Mapping)],
                    proposed_label="re-created" if changed else "unchanged",
                    kept=set() if changed else _pairs(g.get("placements") or []),
                    mig_enabled_after=enabled,
                    model=model,
                )
            else:
                same = [
                    {"profile": s.get("profile"), "start": s.get("placement_start")}
                    for s in current
                ]
                svg = _layout_svg(
                    node,
                    key[1],
                    _gpu_total(model),
                    current,
                    same,
                    proposed_label="unchanged",
                    kept=_pairs(same),
                    mig_enabled_after=True,
                    model=model,
                )
            out.append(f'<div class="gpu"><div>GPU {key[1]}</div>{svg}</div>')
        out.append("</div>")
    return "\n".join(out)


# --- page ----------------------------------------------------------------------------------


def render_html(report_json: Mapping[str, Any], *, title: str = "migscope report") -> str:
    """The whole report as one self-contained HTML page.

    Args:
        report_json: The JSON report (``AnalysisResult.to_json()`` or a parsed report.json,
            ``schema_version`` 1).
        title: Page title and heading.

    Returns:
        The HTML document: inline CSS and SVG only; it loads nothing from anywhere.
    """
    window: Mapping[str, Any] = report_json.get("window") or {}
    slices = _current_slices(report_json)
    sav: Mapping[str, Any] = report_json.get("savings") or {}
    notes = [n for n in report_json.get("notes") or []]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<script>{_ERROR_HOOK}</script>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="muted">Window: {_e(window.get("start"))} → {_e(window.get("end"))} '
        f"({_hours(window.get('hours'))} h, {_e(window.get('step_seconds'))} s step). "
        f"Schema version {_e(report_json.get('schema_version'))}.</p>",
        '<div id="js-errors" hidden></div>',
        "<h2>Summary</h2>",
        _summary(report_json),
        '<h2 id="activity">Slice activity</h2>',
        _heatmap(slices),
        "<h2>Idle and unallocated slices</h2>",
        _idle_table(slices),
        '<h2 id="waste">Waste per namespace</h2>',
        _waste_bars(sav.get("by_namespace") or []),
        '<h2 id="layouts">Layouts per GPU: now and proposed</h2>',
        _layouts(report_json, slices),
    ]
    if notes:
        parts += ["<h2>Notes</h2>", "<ul>"] + [f"<li>{_e(n)}</li>" for n in notes] + ["</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
