"""What to do with a report: apply its plan, collect more history, or nothing to change.

The HTML and Markdown reports both end their summary with it, and the
two must never disagree on whether a report may be applied, with which command, or in which
order. The decision and the order live here (:meth:`NextStep.parts`); each format only
renders the parts.

The order (issue 22): change the workloads' MIG requests first (a pod the plan moves must ask
for a profile the new layout offers, or it stays Pending), scale down the idle holders the
plan evicts (they would come back and take a slice made for someone else), then apply the
plan; asking the owners of idle slices to give them back comes last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from migscope.core import REPORT_FILE, ReportV1

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
        request_commands: The ``kubectl`` commands of the request changes (``apply``).
        request_file: The patch file they are in (``request-changes.yaml``).
        guessed_owners: Some workloads were guessed from pod names.
        scale_down: Workloads (``namespace/Kind/name``) holding idle slices on GPUs the
            plan re-creates: scale them down or drop their request before applying.
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
    request_commands: tuple[str, ...] = ()
    request_file: str = ""
    guessed_owners: bool = False
    scale_down: tuple[str, ...] = ()

    def parts(self) -> list[Part]:
        """The step as ordered parts; Markdown and HTML render exactly these, in this order."""
        out: list[Part] = []
        if self.kind == "snapshot":
            out.append(
                Part(
                    "history",
                    f"Let the exporter collect at least {self.min_history_hours:g} h of "
                    f"history (there is {self.history_hours:.1f} h), then run the analysis "
                    "again: a snapshot recommends no change.",
                )
            )
        elif self.kind == "no-change":
            out.append(Part("no-change", "No layout change is needed."))
        else:
            steps: list[Part] = []
            if self.request_commands:
                guessed = (
                    " Owners marked guessed come from pod names: check them, and replace "
                    "<container> with the container's name."
                    if self.guessed_owners
                    else ""
                )
                steps.append(
                    Part(
                        "requests",
                        f"Change the MIG requests of {len(self.request_commands)} "
                        f"workload(s) first ({self.request_file}), or the pods the plan moves "
                        f"ask for a profile no GPU offers afterwards and stay Pending.{guessed}",
                        self.request_commands,
                    )
                )
            if self.scale_down:
                steps.append(
                    Part(
                        "scale-down",
                        "Scale down, or remove the MIG request of, the workloads holding "
                        "idle slices on GPUs the plan re-creates; evicted, their pods come back "
                        "and take a slice the plan made for someone else: "
                        + ", ".join(self.scale_down)
                        + ".",
                    )
                )
            steps.append(
                Part(
                    "apply",
                    f"Apply the plan: {self.gpus_changed} GPU(s) on {self.nodes} "
                    f"node(s), {self.disruptive_nodes} of them disruptive ({self.pods_losing} "
                    "pod(s) lose their device). From the directory of this report, dry run "
                    "first:",
                    self.commands,
                )
            )
            numbered = len(steps) > 1
            for n, part in enumerate(steps, 1):
                text = f"{n}. {part.text}" if numbered else part.text
                out.append(Part(part.key, text, part.commands))
        if self.idle_slices:
            out.append(
                Part(
                    "idle",
                    f"Ask the owners of the {self.idle_slices} idle slice(s) to give them back.",
                )
            )
        if self.simulated:
            out.append(Part("simulated", "Simulated data: migscope apply refuses this plan."))
        return out


@dataclass(frozen=True)
class Part:
    """One paragraph of the next step: its key (an id for the page), text and commands."""

    key: str
    text: str
    commands: tuple[str, ...] = ()


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
    changes = report.request_changes
    workloads = changes.workloads if changes is not None else []
    holders = changes.idle_holders if changes is not None else []
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
        request_commands=tuple(c.command for c in workloads),
        request_file=changes.file if changes is not None else "",
        guessed_owners=any(c.workload.source == "guessed" for c in workloads),
        scale_down=tuple(
            _ref(h.workload.namespace, h.workload.kind, h.workload.name, h.workload.source)
            for h in holders
            if h.evicted_by_plan
        ),
    )


def _ref(namespace: str, kind: str, name: str, source: str) -> str:
    return f"{namespace}/{kind}/{name}" + (" (guessed)" if source == "guessed" else "")
