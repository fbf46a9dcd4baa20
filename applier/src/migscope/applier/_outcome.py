"""What a run reports: each node's outcome, and the run's as a whole (text and JSON output).

Kept apart from the workflow that produces them so that the CLI, the scheduler and tests
read outcomes without the machinery of applying, and so that the JSON shape of
``migscope apply -o json`` is in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from migscope.applier._configmap import ConfigTarget
from migscope.applier._plan import Provenance


@dataclass
class NodeOutcome:
    """What happened to one node.

    Attributes:
        node: Node name.
        target: The config the plan names.
        result: ``applied``, ``unchanged``, ``would-apply``, ``skipped``, ``failed``,
            ``rolled-back`` (a change from an earlier run undone) or ``would-resume`` (a dry
            run found a change an earlier run left unfinished, and left it alone).
        reason: Why, in one sentence.
        actions: What was (or in a dry run would be) changed, one line each.
    """

    node: str
    target: str
    result: str
    reason: str = ""
    actions: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "node": self.node,
            "target": self.target,
            "result": self.result,
            "reason": self.reason,
            "actions": list(self.actions),
        }


@dataclass
class RunReport:
    """One run's outcome, node by node, and the ConfigMap it used.

    Attributes:
        run: The run's id (recorded on every node it touches).
        dry_run: Nothing was written.
        configmap: The mig-parted ConfigMap MIG Manager reads (None before it was found).
        outcomes: One per node, in the order they were handled.
        notes: Things the reader should know (a ClusterPolicy pointing elsewhere, ...).
        provenance: The plan's.
        refusal: Why ``--apply`` would refuse the plan ("" when it would not).
    """

    run: str
    dry_run: bool
    configmap: ConfigTarget | None
    outcomes: list[NodeOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provenance: Provenance | None = None
    refusal: str = ""

    def count(self, result: str) -> int:
        """Nodes with this result."""
        return sum(1 for o in self.outcomes if o.result == result)

    @property
    def ok(self) -> bool:
        """No node failed."""
        return not any(o.result == "failed" for o in self.outcomes)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        cm = self.configmap
        return {
            "run": self.run,
            "dry_run": self.dry_run,
            "configmap": None if cm is None else f"{cm.namespace}/{cm.name}",
            "nodes": [o.as_dict() for o in self.outcomes],
            "notes": list(self.notes),
            "provenance": None if self.provenance is None else self.provenance.as_dict(),
            "apply_refused": self.refusal or None,
        }
