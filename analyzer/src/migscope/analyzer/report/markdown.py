"""The Markdown report: what a platform engineer reads on Monday morning.

Summary first (how much is wasted, what the plan frees), then the idle slices with the pods
holding them (the people to talk to), waste per namespace, the per-node recommendations,
and the mig-parted config to apply. Everything in it is also in the JSON report.
"""

from __future__ import annotations

from typing import Any

from migscope.analyzer.classify import Status
from migscope.analyzer.pipeline import AnalysisResult, SliceResult
from migscope.core.migparted import emit_config

__all__ = ["render_markdown"]


def _pct(value: object) -> str:
    return f"{float(value) * 100:.1f}%" if isinstance(value, (int, float)) else "n/a"


def _gib(value: object) -> str:
    return f"{float(value) / (1 << 30):.1f} GiB" if isinstance(value, (int, float)) else "n/a"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _slice_row(s: SliceResult) -> str:
    info, owner = s.stats.info, s.stats.main_owner
    who = f"{owner.namespace}/{owner.pod}" if owner is not None else "—"
    return (
        f"| {info.key.node} | {info.key.gpu} | {info.key.gpu_instance_id} | {info.profile} "
        f"| {_cell(who)} | {_pct(s.stats.activity_p95)} | {_gib(s.stats.memory_p95_bytes)} "
        f"| {s.verdict.confidence:.2f} |"
    )


def render_markdown(result: AnalysisResult, *, title: str = "migscope report") -> str:
    """The whole report as GitHub-flavoured Markdown."""
    data = result.to_json()
    sav = data["savings"]
    window = data["window"]
    lines = [
        f"# {title}",
        "",
        f"Window: {window['start']} → {window['end']} ({window['hours']:g} h, "
        f"{window['step_seconds']:g} s step).",
        "",
        "## Summary",
        "",
        f"- Slices analysed: {data['summary']['slices']} "
        f"({', '.join(f'{n} {k}' for k, n in data['summary']['by_status'].items())}).",
        f"- Idle slices (held, unused): **{sav['idle_slices']}**; unallocated: "
        f"**{sav['unallocated_slices']}**; oversized: **{sav['oversized_slices']}**.",
        f"- Wasted over the window: **{sav['wasted_gpu_hours']:.1f} GPU-hours** "
        f"(idle {sav['idle_gpu_hours']:.1f}, unallocated {sav['unallocated_gpu_hours']:.1f}, "
        f"oversized {sav['oversized_gpu_hours']:.1f}).",
        f"- The plan uses {sav['gpus_used_after']} of {sav['gpus_planned']} MIG GPUs and "
        f"frees **{sav['gpus_freed']} whole GPU(s)** ({sav['gpu_hours_freed']:.1f} GPU-hours "
        f"per window), changing {sav['gpus_changed']} GPU(s) on {sav['nodes_changed']} "
        f"node(s); unmet demand: {sav['unmet_demand']} instance(s).",
    ]
    if sav.get("price_per_gpu_hour") is not None:
        lines.append(
            f"- At {sav['price_per_gpu_hour']:g} per GPU-hour: wasted "
            f"**{sav['wasted_cost']:,.2f}**, freed by the plan "
            f"**{sav['freed_cost']:,.2f}** per window."
        )
    idle = [s for s in result.slices if s.current and s.status is Status.IDLE]
    unalloc = [s for s in result.slices if s.current and s.status is Status.UNALLOCATED]
    header = [
        "| node | GPU | GI | profile | held by | p95 activity | p95 memory | confidence |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += ["", "## Idle slices (held by a pod, not used)", ""]
    lines += header + [_slice_row(s) for s in idle] if idle else ["None found."]
    lines += ["", "## Unallocated slices (no pod)", ""]
    lines += header + [_slice_row(s) for s in unalloc] if unalloc else ["None found."]
    sized = [
        s for s in result.slices if s.current and s.status in (Status.OVERSIZED, Status.SATURATED)
    ]
    lines += ["", "## Mis-sized slices", ""]
    if sized:
        lines += [
            "| node | GPU | GI | profile | status | suggested | held by | reason |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for s in sized:
            info, owner = s.stats.info, s.stats.main_owner
            who = f"{owner.namespace}/{owner.pod}" if owner is not None else "—"
            lines.append(
                f"| {info.key.node} | {info.key.gpu} | {info.key.gpu_instance_id} | "
                f"{info.profile} | {s.status.value} | {s.demand_profile or '—'} | {_cell(who)} "
                f"| {_cell(s.verdict.reason)} |"
            )
    else:
        lines.append("None found.")
    lines += ["", "## Waste per namespace", ""]
    if sav["by_namespace"]:
        lines += [
            "| namespace | slices | idle GPU-h | oversized GPU-h | wasted GPU-h |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {_cell(r['namespace'])} | {r['slices']} | {r['idle_gpu_hours']:.1f} | "
            f"{r['oversized_gpu_hours']:.1f} | {r['wasted_gpu_hours']:.1f} |"
            for r in sav["by_namespace"]
        ]
    else:
        lines.append("No waste found.")
    lines += ["", "## Recommendations", ""]
    recs = data["recommendations"]
    if result.history is not None and not result.history.enough:
        lines.append(result.history.sentence()[0].upper() + result.history.sentence()[1:] + ".")
    elif not recs:
        lines.append("No layout change needed.")
    for rec in recs:
        flag = " (disruptive: drain first)" if rec["disruptive"] else ""
        lines += [f"### {rec['node']} → `{rec['mig_config']}`{flag}", ""]
        lines += ["| GPU | current | proposed | re-created |", "|---|---|---|---|"]
        recreated = set(rec["gpus_recreated"])
        for cur, new in zip(rec["current"], rec["proposed"], strict=True):
            again = "yes: every instance" if cur["gpu"] in recreated else "no"
            lines.append(f"| {cur['gpu']} | {_layout(cur)} | {_layout(new)} | {again} |")
        if rec["pods_to_move"]:
            lines += ["", f"Pods that lose their device: {', '.join(rec['pods_to_move'])}."]
        lines.append("")
    lines += ["## Pools", ""]
    lines += ["| pool | GPUs | demand | plan | solver |", "|---|---|---|---|---|"]
    for pool in data["pools"]:
        demand = ", ".join(f"{k}×{v}" for k, v in pool["demand"]["total"].items()) or "none"
        solve = pool["solve"]
        lines.append(
            f"| {pool['pool']} | {pool['gpus']} | {demand} | {pool['plan']['gpus_used']} used, "
            f"{pool['plan']['gpus_free']} free (bound {pool['lower_bound']['gpus']}) | "
            f"{solve['status']}, gap {solve['gap']} |"
        )
    lines += _replay_lines(data)
    if result.mig_parted is not None:
        lines += [
            "",
            "## mig-parted config",
            "",
            "```yaml",
            emit_config(result.mig_parted).rstrip(),
        ]
        lines += ["```"]
    if result.notes:
        lines += ["", "## Notes", ""] + [f"- {_cell(n)}" for n in result.notes]
    return "\n".join(lines) + "\n"


def _replay_lines(data: dict[str, Any]) -> list[str]:
    """Hour-by-hour replay of the window's demand: current, proposed, what-if layouts."""
    pools = [p for p in data["pools"] if p.get("replay")]
    if not pools:
        return []
    names = [n for n in ("current", "proposed", "what_if") if n in pools[0]["replay"]]
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
        replays = pool["replay"]
        cells = [
            f"{replays[n]['served_share']:.1%} ({replays[n]['unmet_instance_hours']:g} "
            "instance-h unmet)"
            for n in names
        ]
        last = replays[names[-1]]
        short = ", ".join(
            f"{p['profile']} peak {p['unmet_peak']:g} in {p['hours_short']} h"
            for p in last["profiles"]
            if p["hours_short"]
        )
        lines.append(f"| {pool['pool']} | " + " | ".join(cells) + f" | {short or '-'} |")
    what_if = data.get("what_if")
    if what_if:
        configs = ", ".join(f"{k}={v}" for k, v in what_if["configs"].items())
        lines += ["", f"What-if layout: `{configs}`."]
    return lines


def _layout(entry: dict[str, object]) -> str:
    if not entry.get("mig_enabled", True):
        return "MIG disabled"
    layout = entry.get("layout")
    if not isinstance(layout, dict) or not layout:
        return "empty"
    return " + ".join(f"{n}×{c}" if c != 1 else str(n) for n, c in layout.items())
