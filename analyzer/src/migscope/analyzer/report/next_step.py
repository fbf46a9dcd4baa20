"""What to do with a report: apply its plan, collect more history, or nothing to change.

Why its own module: the HTML and Markdown reports both end their summary with it, and the
two must never disagree on whether a report may be applied, or with which command. The
decision lives here; each format only words it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from migscope.core.spec.v1 import REPORT_FILE, ReportV1

__all__ = ["NextStep", "next_step"]

StepKind = Literal["snapshot", "no-change", "apply"]


@dataclass(frozen=True)
class NextStep:
    """The next step a report leads to.

    Attributes:
        kind: ``snapshot`` (too little history: no plan may be applied), ``no-change``
            (nothing to re-partition) or ``apply`` (the plan's commands).
        idle_slices: Idle slices whose owners could give them back; 0 for a ``snapshot``
            (minutes of history say nothing of a week: a pod idle now may be busy all week,
            so no one is asked to give anything back on it).
        history_hours: The history the analysis had (``snapshot``).
        min_history_hours: The history the policy needs (``snapshot``).
        gpus_changed: GPUs the plan changes (``apply``).
        nodes: Nodes the plan relabels (``apply``).
        disruptive_nodes: Of those, nodes where a pod loses its device (``apply``).
        pods_losing: Pods that lose their device (``apply``).
        commands: What to run from the report's directory: a dry run, then one node. They
            name ``report.json``: the plan with its per-slice evidence and per-GPU pods,
            which the applier needs (it skips every node of a bare ``node-plan.json``).
        simulated: The report comes from the simulator (``migscope apply`` refuses it).
    """

    kind: StepKind
    idle_slices: int
    history_hours: float = 0.0
    min_history_hours: float = 0.0
    gpus_changed: int = 0
    nodes: int = 0
    disruptive_nodes: int = 0
    pods_losing: int = 0
    commands: tuple[str, ...] = ()
    simulated: bool = False


def next_step(report: ReportV1) -> NextStep:
    """The next step of ``report`` (see :class:`NextStep`)."""
    sav = report.savings
    evidence = report.evidence
    simulated = bool(report.provenance is not None and report.provenance.simulated)
    if evidence is not None and not evidence.enough_for_a_plan:
        return NextStep(
            "snapshot",
            0,
            history_hours=evidence.history_hours,
            min_history_hours=evidence.min_history_hours,
            simulated=simulated,
        )
    if not report.recommendations:
        return NextStep("no-change", sav.idle_slices, simulated=simulated)
    disruptive = [r for r in report.recommendations if r.disruptive]
    drain = " --drain" if disruptive else ""
    return NextStep(
        "apply",
        sav.idle_slices,
        gpus_changed=sav.gpus_changed,
        nodes=len(report.recommendations),
        disruptive_nodes=len(disruptive),
        pods_losing=sum(len(r.pods_to_move) for r in disruptive),
        commands=(
            f"migscope apply --plan {REPORT_FILE}",
            f"migscope apply --plan {REPORT_FILE} --apply --max-nodes 1{drain}",
        ),
        simulated=simulated,
    )
