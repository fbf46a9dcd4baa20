"""The Markdown report: what a platform engineer reads on Monday morning.

Summary first (how much is wasted, what the plan frees, the change since the previous run),
the next step (the same decision and commands as the HTML report: :mod:`.next_step`) and
links to the Grafana dashboards over the window, then the idle slices with the pods holding
them (the people to talk to), waste per namespace, the per-node recommendations, the waste
of earlier runs, and the mig-parted config to apply. It renders from the validated report
contract (:class:`~migscope.core._spec.v1.ReportV1`), so everything in it is also in the JSON
report.

Names reach the report from Prometheus labels (node, namespace, pod, profile, pool), which
may hold any text, so every such value goes through :func:`_cell` wherever it is written:
a ``|`` would split a table row into extra columns, a line break would end the row (or a
heading) early, and ``<`` would open raw HTML.
"""

from __future__ import annotations

import re

from migscope.analyzer._judge.claims import holder_text, resize_text
from migscope.analyzer._judge.safety import snapshot_sentence
from migscope.analyzer._report.grafana import DASHBOARD_TITLES, DashboardLinks
from migscope.analyzer._report.next_step import next_step
from migscope.analyzer._report.trend import per_week, waste_change
from migscope.core import (
    EvidenceV1,
    GpuLayoutV1,
    PoolV1,
    ReportV1,
    SliceV1,
    WhatIfV1,
    emit_config,
)


def _pct(value: object) -> str:
    return f"{float(value) * 100:.1f}%" if isinstance(value, (int, float)) else "n/a"


def _gib(value: object) -> str:
    return f"{float(value) / (1 << 30):.1f} GiB" if isinstance(value, (int, float)) else "n/a"


def _gpu_h(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "n/a"


_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
"""Whatever a renderer or an editor may take for the end of a line."""


def _cell(text: object) -> str:
    r"""``text`` as one line of Markdown that keeps a table row's columns.

    Backslashes are doubled first (a name's own ``\`` then shows as written, and no
    renderer can pair it with the escape of a pipe after it), ``|`` becomes ``\|`` (GFM's
    escaped pipe, shown as ``|``), ``<`` becomes ``\<`` (no raw HTML), and every line
    break a space.
    """
    escaped = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "\\<")
    return _LINE_BREAK.sub(" ", escaped)


def _who(s: SliceV1) -> str:
    """The slice's main holder (``namespace/pod``, with its DRA claim), or a dash for none."""
    return holder_text(s.namespace, s.pod, s.claim)


def _slice_row(s: SliceV1) -> str:
    return (
        f"| {_cell(s.node)} | {s.gpu} | {s.gpu_instance_id} | {_cell(s.profile)} "
        f"| {_cell(_who(s))} | {_pct(s.evidence.activity_p95)} "
        f"| {_gib(s.evidence.memory_p95_bytes)} | {s.confidence:.2f} |"
    )


def render_markdown(report: ReportV1, *, title: str = "migscope report") -> str:
    """The whole report as GitHub-flavoured Markdown.

    Args:
        report: The report (:func:`~migscope.analyzer._report.build_report`).
        title: The top heading.

    Returns:
        The Markdown text, ending in a newline.
    """
    sav = report.savings
    window = report.window
    summary = report.summary
    lines = [
        f"# {title}",
        "",
        f"Window: {window.start} → {window.end} ({window.hours:g} h, "
        f"{window.step_seconds:g} s step).",
        "",
        "## Summary",
        "",
        f"- Slices analysed: {summary.slices} "
        f"({', '.join(f'{n} {k}' for k, n in summary.by_status.items())}).",
        f"- Idle slices (held, unused): **{sav.idle_slices}**; unallocated: "
        f"**{sav.unallocated_slices}**; oversized: **{sav.oversized_slices}**.",
        f"- Wasted over the window: **{sav.wasted_gpu_hours:.1f} GPU-hours** "
        f"(idle {_gpu_h(sav.idle_gpu_hours)}, unallocated {_gpu_h(sav.unallocated_gpu_hours)}, "
        f"oversized {_gpu_h(sav.oversized_gpu_hours)}).",
        f"- The plan uses {sav.gpus_used_after} of {sav.gpus_planned} MIG GPUs and "
        f"frees **{sav.gpus_freed} whole GPU(s)** ({sav.gpu_hours_freed:.1f} GPU-hours "
        f"per window), changing {sav.gpus_changed} GPU(s) on {sav.nodes_changed} "
        f"node(s); unmet demand: {sav.unmet_demand} instance(s).",
    ]
    if sav.price_per_gpu_hour is not None:
        wasted = f"{sav.wasted_cost:,.2f}" if sav.wasted_cost is not None else "n/a"
        freed = f"{sav.freed_cost:,.2f}" if sav.freed_cost is not None else "n/a"
        lines.append(
            f"- At {sav.price_per_gpu_hour:g} per GPU-hour: wasted "
            f"**{wasted}**, freed by the plan **{freed}** per window."
        )
    change = waste_change(report)
    if change is not None:
        share = f", {change.share * 100:+.0f}%" if change.share is not None else ""
        unit = " per week" if change.weekly else ""
        lines.append(
            f"- Since the run ending {_cell(change.before_end[:10])}: waste "
            f"{change.before:,.1f} → {change.now:,.1f} GPU-hours{unit} "
            f"({change.delta:+,.1f}{share})."
        )
    lines += _next_step_lines(report)
    lines += _request_lines(report)
    lines += _grafana_lines(report)
    current = [s for s in report.slices if s.current]
    idle = [s for s in current if s.status == "idle"]
    unalloc = [s for s in current if s.status == "unallocated"]
    header = [
        "| node | GPU | GI | profile | held by | p95 activity | p95 memory | confidence |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += ["", "## Idle slices (held by a pod, not used)", ""]
    lines += header + [_slice_row(s) for s in idle] if idle else ["None found."]
    lines += ["", "## Unallocated slices (no pod)", ""]
    lines += header + [_slice_row(s) for s in unalloc] if unalloc else ["None found."]
    sized = [s for s in current if s.status in ("oversized", "saturated")]
    lines += ["", "## Mis-sized slices", ""]
    if sized:
        lines += [
            "| node | GPU | GI | profile | status | suggested | held by | reason |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {_cell(s.node)} | {s.gpu} | {s.gpu_instance_id} | {_cell(s.profile)} | "
            f"{s.status} | {_cell(s.demand_profile or '—')} | {_cell(_who(s))} | "
            f"{_cell(' '.join(filter(None, (s.reason, resize_text(s)))))} |"
            for s in sized
        ]
    else:
        lines.append("None found.")
    lines += ["", "## Waste per namespace", ""]
    if sav.by_namespace:
        lines += [
            "| namespace | slices | idle GPU-h | unallocated GPU-h | oversized GPU-h "
            "| wasted GPU-h |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {_cell(r.namespace)} | {r.slices} | {r.idle_gpu_hours:.1f} | "
            f"{r.unallocated_gpu_hours:.1f} | "
            f"{r.oversized_gpu_hours:.1f} | {r.wasted_gpu_hours:.1f} |"
            for r in sav.by_namespace
        ]
    else:
        lines.append("No waste found.")
    lines += ["", "## Recommendations", ""]
    recs = report.recommendations
    evidence = report.evidence
    if evidence is not None and not evidence.enough_for_a_plan:
        lines.append(_snapshot_sentence(evidence))
    elif not recs:
        lines.append("No layout change needed.")
    for rec in recs:
        flag = " (disruptive: drain first)" if rec.disruptive else ""
        lines += [f"### {_cell(rec.node)} → {_code(rec.mig_config)}{flag}", ""]
        lines += ["| GPU | current | proposed | re-created |", "|---|---|---|---|"]
        recreated = set(rec.gpus_recreated)
        for cur, new in zip(rec.current, rec.proposed, strict=True):
            again = "yes: every instance" if cur.gpu in recreated else "no"
            lines.append(f"| {cur.gpu} | {_layout(cur)} | {_layout(new)} | {again} |")
        if rec.pods_to_move:
            pods = ", ".join(_cell(p) for p in rec.pods_to_move)
            lines += ["", f"Pods that lose their device: {pods}."]
        lines.append("")
    lines += ["## Pools", ""]
    lines += ["| pool | GPUs | demand | plan | solver |", "|---|---|---|---|---|"]
    for pool in report.pools:
        demand = ", ".join(f"{_cell(k)}×{v}" for k, v in pool.demand.total.items())
        solve = pool.solve
        lines.append(
            f"| {_cell(pool.pool)} | {pool.gpus} | {demand or 'none'} | "
            f"{pool.plan.gpus_used} used, "
            f"{pool.plan.gpus_free} free (bound {pool.lower_bound.gpus}) | "
            f"{_cell(solve.status)}, gap {solve.gap} |"
        )
    lines += _replay_lines(report.pools, report.what_if)
    lines += _trend_lines(report)
    if report.mig_parted_config is not None:
        config = emit_config(report.mig_parted_config).rstrip()
        lines += ["", "## mig-parted config", "", "```yaml", config]
        lines += ["```"]
    if report.notes:
        lines += ["", "## Notes", ""] + [f"- {_cell(n)}" for n in report.notes]
    return "\n".join(lines) + "\n"


def _next_step_lines(report: ReportV1) -> list[str]:
    """The next step, in the parts and order of :meth:`.next_step.NextStep.parts` (the page's)."""
    lines = ["", "## Next step"]
    for part in next_step(report).parts():
        text = f"**{_cell(part.text)}**" if part.key == "simulated" else _cell(part.text)
        lines += ["", text]
        if part.commands:
            lines += ["", "```sh", *(_LINE_BREAK.sub(" ", c) for c in part.commands), "```"]
    return lines


def _request_lines(report: ReportV1) -> list[str]:
    """Each workload's request change and the idle holders to scale down (none: nothing)."""
    changes = report.request_changes
    if changes is None or not (changes.workloads or changes.idle_holders or changes.skipped):
        return []
    lines = ["", "## Request changes", ""]
    if changes.workloads:
        lines += [
            f"What each workload should ask for, from the largest need of its pods "
            f"(patches in `{_cell(changes.file)}`).",
            "",
            "| workload | owner from | pods | now | should ask for | how |",
            "|---|---|---|---|---|---|",
        ]
        for c in changes.workloads:
            w = c.workload
            how = c.resource_to if c.mechanism == "device-plugin" else c.selector
            lines.append(
                f"| {_cell(f'{w.namespace}/{w.kind}/{w.name}')} | {w.source} | "
                f"{_cell(', '.join(c.pods))} | {_cell(c.current_profile)} | "
                f"{_cell(c.profile)} | {_cell(how or '')} |"
            )
    else:
        lines.append("No workload needs another profile.")
    if changes.idle_holders:
        lines += [
            "",
            "Idle holders (scale down or drop the request before applying when the plan "
            "evicts them):",
            "",
            "| workload | owner from | pods | profiles | evicted by the plan |",
            "|---|---|---|---|---|",
        ]
        for h in changes.idle_holders:
            w = h.workload
            lines.append(
                f"| {_cell(f'{w.namespace}/{w.kind}/{w.name}')} | {w.source} | "
                f"{_cell(', '.join(h.pods))} | {_cell(', '.join(h.profiles))} | "
                f"{'yes' if h.evicted_by_plan else 'no'} |"
            )
    if changes.skipped:
        lines += ["", "Not changed:", ""] + [f"- {_cell(x)}" for x in changes.skipped]
    return lines


def _grafana_lines(report: ReportV1) -> list[str]:
    """Links to the dashboards over the window, when the report knows Grafana's address."""
    links = DashboardLinks(report)
    found = [(title, links.url(name)) for name, title in DASHBOARD_TITLES.items()]
    shown = [f"[{title}](<{url}>)" for title, url in found if url is not None]
    return ["", "Grafana over this window: " + ", ".join(shown) + "."] if shown else []


def _trend_lines(report: ReportV1) -> list[str]:
    """Earlier runs' waste, newest first, this one on top (nothing without a trend)."""
    if not report.trend:
        return []
    sav = report.savings
    rows = [
        (
            "this report",
            report.window.end,
            report.window.hours,
            sav.wasted_gpu_hours,
            sav.gpus_freed,
        )
    ] + [
        (p.run, p.window_end, p.window_hours, p.wasted_gpu_hours, p.gpus_freed)
        for p in reversed(report.trend)
    ]
    lines = [
        "",
        "## Waste of earlier runs",
        "",
        "| run | window end | hours | wasted GPU-h | per week | GPUs freeable |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {_cell(run)} | {_cell(end)} | {hours:g} | {wasted:,.1f} | "
        f"{per_week(wasted, hours):,.1f} | {freed} |"
        for run, end, hours, wasted, freed in rows
    ]
    return lines


def _snapshot_sentence(evidence: EvidenceV1) -> str:
    """Why a snapshot recommends no change: the analysis' own note, as a sentence."""
    words = snapshot_sentence(evidence.history_hours, evidence.min_history_hours)
    return f"{words[:1].upper()}{words[1:]}."


def _replay_lines(all_pools: list[PoolV1], what_if: WhatIfV1 | None) -> list[str]:
    """Hour-by-hour replay of the window's demand: current, proposed, what-if layouts."""
    pools = [p for p in all_pools if p.replay]
    if not pools:
        return []
    names = [n for n in ("current", "proposed", "what_if") if n in pools[0].replay]
    lines = [
        "",
        "## Replay of the window's demand",
        "",
        "Each hour's demand (busy slices held by a pod, at their right size) against the "
        "instances each layout offers in the pool.",
        "",
        "| pool | " + " | ".join(f"{n.replace('_', '-')} served" for n in names) + " | short |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for pool in pools:
        replays = pool.replay
        cells = [
            f"{replays[n].served_share:.1%} ({replays[n].unmet_instance_hours:g} instance-h unmet)"
            for n in names
        ]
        last = replays[names[-1]]
        short = ", ".join(
            f"{_cell(p.profile)} peak {p.unmet_peak:g} in {p.hours_short} h"
            for p in last.profiles
            if p.hours_short
        )
        lines.append(f"| {_cell(pool.pool)} | " + " | ".join(cells) + f" | {short or '-'} |")
    if what_if is not None:
        configs = ", ".join(f"{k}={v}" for k, v in what_if.configs.items())
        lines += ["", f"What-if layout: {_code(configs)}."]
    return lines


def _code(text: str) -> str:
    """``text`` as a one-line code span (backticks included) that no backtick in it can end.

    The fence is one backtick longer than the longest run inside (CommonMark's rule), padded
    with spaces when the text starts or ends with one.
    """
    flat = _LINE_BREAK.sub(" ", text)
    runs = re.findall(r"`+", flat)
    fence = "`" * (max((len(r) for r in runs), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _layout(entry: GpuLayoutV1) -> str:
    if not entry.mig_enabled:
        return "MIG disabled"
    if not entry.layout:
        return "empty"
    return " + ".join(_cell(f"{n}×{c}" if c != 1 else n) for n, c in entry.layout.items())
