"""The HTML report's layout diagrams: each GPU's instances now and as the plan proposes.

A GPU's memory slices are a row of numbered boxes; each GPU instance is a span at its
placement, once as it is now (coloured by its slice's status) and once as proposed (kept or
re-created). One truth about disruption (:mod:`migscope.core._disruption`, through the
recommendation's ``gpus_recreated``): mig-parted re-creates every instance of a changed GPU,
so such a GPU keeps nothing in the diagram.
"""

from __future__ import annotations

from collections.abc import Sequence

from migscope.analyzer._report.html.format import (
    STATUS_COLOURS,
    anchor,
    escape,
    owner_text,
    status_colour,
)
from migscope.core import (
    CatalogueError,
    PlannedGpuV1,
    RecommendationV1,
    ReportV1,
    SliceV1,
    find_model,
)

LAYOUT_SLICE_PX = 48
"""Width of one memory slice in a layout diagram, pixels."""
LAYOUT_LEFT_PX = 90
"""x of memory slice 0 in a layout diagram (the row labels sit left of it), pixels."""
LAYOUT_ROW_PX = 34
"""Height of one row (now / proposed) in a layout diagram, pixels."""

_OPEN_NODES = 10
"""Up to this many changed nodes, their diagrams are open on the page."""
_KEPT_COLOUR = "#5b8def"
_NEW_COLOUR = "#17becf"

Placement = tuple[str, int | None]
"""A proposed instance: ``(profile, start)``; an unknown start is not drawn."""
GpuKey = tuple[str, int]
"""``(node, GPU index)``."""


def _memory_slices(model: str | None, profile: str) -> int:
    """Memory slices the profile takes, from the catalogue or, failing that, its name."""
    if model is not None:
        try:
            return find_model(model).profile(profile).memory_slices
        except (CatalogueError, ValueError):
            pass
    try:
        compute = int(profile.split("g", 1)[0])
    except ValueError:
        compute = 1
    return {3: 4, 5: 8, 6: 8, 7: 8}.get(compute, compute)


def _gpu_total(model: str | None) -> int:
    """Memory slices of the GPU (8 when the model is not in the catalogue)."""
    if model is not None:
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
    """One GPU instance: a rounded box across its memory slices, with its profile name."""
    x = LAYOUT_LEFT_PX + start * LAYOUT_SLICE_PX
    w = size * LAYOUT_SLICE_PX
    small = "" if size > 1 else " s"
    return (
        f'<rect class="instance {row}" data-profile="{escape(profile)}" data-start="{start}" '
        f'data-size="{size}" x="{x + 2}" y="{y + 3}" width="{w - 4}" '
        f'height="{LAYOUT_ROW_PX - 6}" fill="{fill}"><title>{escape(tip)}</title></rect>'
        f'<text class="il{small}" x="{x + w / 2:g}" y="{y + LAYOUT_ROW_PX / 2 + 4:g}">'
        f"{escape(profile)}</text>"
    )


def _row_note(y: int, text: str) -> str:
    """A sentence in place of a row's instances."""
    return f'<text x="{LAYOUT_LEFT_PX + 6}" y="{y + LAYOUT_ROW_PX / 2 + 4:g}">{text}</text>'


def _layout_svg(
    node: str,
    gpu: int,
    now: Sequence[SliceV1],
    proposed: Sequence[Placement],
    *,
    proposed_label: str,
    kept: set[tuple[str, int]],
    mig_enabled_after: bool,
    model: str | None,
) -> str:
    """One GPU's diagram: the memory slices, the instances now, and the proposed ones."""
    total = _gpu_total(model)
    width = LAYOUT_LEFT_PX + total * LAYOUT_SLICE_PX + 10
    height = 18 + 2 * LAYOUT_ROW_PX + 8
    out = [
        f'<svg class="chart layout" data-node="{escape(node)}" data-gpu="{gpu}" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="layout of {escape(node)} GPU {gpu}, now and proposed">'
    ]
    # The memory slices' numbers: one <text> whose characters each get their own x.
    xs = " ".join(
        f"{LAYOUT_LEFT_PX + k * LAYOUT_SLICE_PX + LAYOUT_SLICE_PX / 2 - 3:g}" for k in range(total)
    )
    digits = "".join(str(k % 10) for k in range(total))
    out.append(f'<text class="ms" x="{xs}" y="13">{digits}</text>')
    rows = (("now", "now"), ("proposed", proposed_label))
    for r, (cls, label) in enumerate(rows):
        y = 18 + r * LAYOUT_ROW_PX
        out.append(f'<text x="4" y="{y + LAYOUT_ROW_PX / 2 + 4:g}">{label}</text>')
        # The row of memory slices: one box and its dividers.
        dividers = "".join(
            f"M{LAYOUT_LEFT_PX + k * LAYOUT_SLICE_PX} {y}v{LAYOUT_ROW_PX}" for k in range(1, total)
        )
        out.append(
            f'<rect class="memslices" x="{LAYOUT_LEFT_PX}" y="{y}" '
            f'width="{total * LAYOUT_SLICE_PX}" height="{LAYOUT_ROW_PX}"/>'
            f'<path class="memslices" d="{dividers}"/>'
        )
        if cls == "now":
            for s in now:
                if s.placement_start is None:
                    continue
                tip = (
                    f"{s.profile} at {s.placement_start}, GI {s.gpu_instance_id}: {s.status}; "
                    f"held by {owner_text(s)}"
                )
                out.append(
                    _instance_rect(
                        row="now",
                        y=y,
                        start=s.placement_start,
                        size=_memory_slices(model, s.profile),
                        profile=s.profile,
                        fill=status_colour(s.status),
                        tip=tip,
                    )
                )
        elif not mig_enabled_after:
            out.append(_row_note(y, "MIG disabled"))
        else:
            if not proposed:
                out.append(_row_note(y, "no instances: the GPU is free"))
            for profile, start in proposed:
                if start is None:
                    continue
                is_kept = (profile, start) in kept
                out.append(
                    _instance_rect(
                        row="proposed",
                        y=y,
                        start=start,
                        size=_memory_slices(model, profile),
                        profile=profile,
                        fill=_KEPT_COLOUR if is_kept else _NEW_COLOUR,
                        tip=f"{profile} at {start}: {'unchanged' if is_kept else 're-created'}",
                    )
                )
    out.append("</svg>")
    return "".join(out)


def _known(placements: Sequence[Placement]) -> set[tuple[str, int]]:
    """The placements whose start is known."""
    return {(profile, start) for profile, start in placements if start is not None}


def _node_title(node: str, rec: RecommendationV1 | None, node_configs: dict[str, str]) -> str:
    """A node's title: the config it moves to, or that it stays (or is not planned)."""
    title = f"<b>{escape(node)}</b>"
    if rec is not None:
        title += f" → <code>{escape(rec.mig_config)}</code>"
        if rec.disruptive:
            title += " (disruptive: drain first)"
    elif node in node_configs:
        title += f" — unchanged (<code>{escape(node_configs[node])}</code>)"
    else:
        title += " — not planned"
    return title


def _gpu_svg(
    key: GpuKey,
    current: Sequence[SliceV1],
    planned: PlannedGpuV1 | None,
    recreated: set[int],
    model: str | None,
) -> str:
    """A GPU's diagram: as its recommendation plans it, or as it stays when none changes it."""
    node, gpu = key
    if planned is not None:
        changed = gpu in recreated
        placements: list[Placement] = [(p.profile, p.start) for p in planned.placements]
        return _layout_svg(
            node,
            gpu,
            current,
            placements,
            proposed_label="re-created" if changed else "unchanged",
            kept=set() if changed else _known(placements),
            mig_enabled_after=planned.proposed.mig_enabled,
            model=model,
        )
    same: list[Placement] = [(s.profile, s.placement_start) for s in current]
    return _layout_svg(
        node,
        gpu,
        current,
        same,
        proposed_label="unchanged",
        kept=_known(same),
        mig_enabled_after=True,
        model=model,
    )


def layouts_section(report: ReportV1, slices: Sequence[SliceV1]) -> str:
    """Every GPU's diagram, grouped by node with the node's config and pods to move.

    Args:
        report: The validated report (its recommendations and ``node_configs``).
        slices: The current slices (what each GPU holds now).

    Returns:
        HTML: a caption, the legend and one ``<svg class="chart layout">`` per GPU that has
        a current slice or a planned layout: per node whose layout changes a ``<details>``
        (open when there are few), then the nodes left as they are in one closed
        ``<details id="unchanged-layouts">``.
    """
    now: dict[GpuKey, list[SliceV1]] = {}
    models: dict[GpuKey, str | None] = {}
    for s in slices:
        key = (s.node, s.gpu)
        now.setdefault(key, []).append(s)
        models.setdefault(key, s.model)
    recs = {r.node: r for r in report.recommendations}
    planned: dict[GpuKey, PlannedGpuV1] = {}
    for node, node_rec in recs.items():
        for g in node_rec.gpus or []:
            key = (node, g.gpu)
            planned[key] = g
            models.setdefault(key, node_rec.model)
    keys = sorted(set(now) | set(planned))
    if not keys:
        return "<p>No GPUs.</p>"
    legend = (
        '<p class="legend">Now: '
        + "".join(
            f'<span><i style="background:{c}"></i>{escape(k)}</span>'
            for k, c in STATUS_COLOURS.items()
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
    by_node: dict[str, list[GpuKey]] = {}
    for key in keys:
        by_node.setdefault(key[0], []).append(key)
    changed = [n for n in sorted(by_node) if n in recs]
    kept = [n for n in sorted(by_node) if n not in recs]
    is_open = " open" if len(changed) <= _OPEN_NODES else ""
    if not changed:
        out.append("<p>The plan changes no node.</p>")
    for node in changed:
        rec = recs[node]
        out.append(
            f'<details class="layout-node" id="{anchor("layout", node)}"{is_open}><summary>'
            f"{_node_title(node, rec, report.node_configs)}</summary>"
        )
        if rec.pods_to_move:
            pods = ", ".join(escape(p) for p in rec.pods_to_move)
            out.append(f"<p>Pods that lose their device (on a re-created GPU): {pods}.</p>")
        out.append(_gpus(by_node[node], now, planned, set(rec.gpus_recreated), models))
        out.append("</details>")
    if kept:
        out.append(
            f'<details id="unchanged-layouts"><summary>{len(kept)} node(s) the plan leaves '
            "as they are</summary>"
        )
        for node in kept:
            out.append(f"<h4>{_node_title(node, None, report.node_configs)}</h4>")
            out.append(_gpus(by_node[node], now, planned, set(), models))
        out.append("</details>")
    return "\n".join(out)


def _gpus(
    keys: Sequence[GpuKey],
    now: dict[GpuKey, list[SliceV1]],
    planned: dict[GpuKey, PlannedGpuV1],
    recreated: set[int],
    models: dict[GpuKey, str | None],
) -> str:
    """One node's GPU diagrams in a row."""
    out = ['<div class="gpus">']
    for key in keys:
        svg = _gpu_svg(key, now.get(key, []), planned.get(key), recreated, models.get(key))
        out.append(f'<div class="gpu"><div>GPU {key[1]}</div>{svg}</div>')
    out.append("</div>")
    return "".join(out)
