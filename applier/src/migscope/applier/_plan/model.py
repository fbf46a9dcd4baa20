"""What the applier is asked to do: node → named config, with the layouts before and after.

These are the applier's own types, independent of the file a plan came from
(:mod:`~migscope.applier._plan.read` builds them from ``report.json`` or ``node-plan.json``;
tests and ``migscope analyze --apply`` build them directly). They also hold the one rule that
decides whether a plan may be applied at all (:meth:`ApplyPlan.refusal`): layouts computed
from a simulation describe no real cluster, a stale plan describes the cluster as it was,
and a plan without provenance could be either, so none of them is applied by default.

Why the per-GPU layouts matter: MIG Manager (mig-parted) re-creates *every* GPU instance of
a GPU whose layout changes, placements chosen by NVML; an instance the plan "keeps" on a
changed GPU is destroyed and created again all the same. So the pods at risk are all pods
holding devices on changed GPUs, and the applier needs to know which GPUs change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from migscope.core import GpuLayouts, MigPartedConfig, UserError, gpu_recreated

FUTURE_SLACK_S = 300.0
"""How far in the future a plan's creation time may be (clock skew) before it is suspect."""


class PlanError(UserError, ValueError):
    """The plan file cannot be used (one line: file and what is wrong)."""


class PlanRefused(PlanError):
    """The plan is readable but must not be applied (simulated, too old, of unknown origin).

    Args:
        source: The plan's file (or "the analysis").
        why: :meth:`ApplyPlan.refusal`'s reason.
    """

    def __init__(self, source: str, why: str) -> None:
        super().__init__(f"refusing to apply {source}: {why}")
        self.why = why


@dataclass(frozen=True)
class Provenance:
    """Where a plan's data came from and when the plan was made (``provenance`` in the file).

    Attributes:
        kind: ``source.kind``: ``prometheus``, ``file``, ``simulation``, or what a newer
            analyzer writes.
        simulated: The data came from a simulation (``simulated``, or a ``simulation``
            source): the plan describes no real cluster.
        created_unix: When the plan was made (Unix seconds).
        created: The same as the file spells it (for messages).
        source: The whole ``source`` object (``url``, ``path`` or ``scenarios``).
    """

    kind: str
    simulated: bool
    created_unix: float
    created: str = ""
    source: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """``prometheus http://...``, ``file x.json``, ``simulation h200-node``: for messages."""
        detail = self.source.get("url") or self.source.get("path")
        scenarios = self.source.get("scenarios")
        if detail is None and isinstance(scenarios, list):
            detail = ", ".join(str(x) for x in scenarios)
        return f"{self.kind} {detail}" if detail else self.kind

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, in the file's shape."""
        return {
            "source": dict(self.source),
            "simulated": self.simulated,
            "created": self.created,
            "created_unix": self.created_unix,
        }


def format_age(seconds: float) -> str:
    """``45 s``, ``90 min``, ``25.0 h``, ``3.5 days``: durations for messages."""
    s = abs(seconds)
    if s < 120:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


@dataclass(frozen=True)
class GpuChange:
    """One GPU's layout now and after the change.

    Attributes:
        index: GPU index on the node.
        current: ``{profile: count}`` now (empty with MIG disabled or no instances).
        proposed: ``{profile: count}`` after.
        current_mig: MIG enabled now.
        proposed_mig: MIG enabled after.
        uuid: The GPU's UUID (``GPU-...``) as the report's slices pair it with ``index``;
            empty when the plan does not say for sure (no slice of the GPU in the report,
            a ``node-plan.json``, or the index seen with two UUIDs). It is how a device a
            DRA claim holds is told to be on this GPU
            (:func:`migscope.applier._dra.dra_pods_at_risk`): the driver's ResourceSlices
            name a device's GPU by UUID and minor, never by index.
    """

    index: int
    current: Mapping[str, int]
    proposed: Mapping[str, int]
    current_mig: bool = True
    proposed_mig: bool = True
    uuid: str = ""

    @property
    def changed(self) -> bool:
        """Whether MIG Manager will touch this GPU (and so destroy all its instances).

        The report computed the same with the same code (:mod:`migscope.core._disruption`).
        """
        return gpu_recreated(
            GpuLayouts(self.index, self.current, self.proposed, self.current_mig, self.proposed_mig)
        )


@dataclass(frozen=True)
class NodeChange:
    """One node's change.

    Attributes:
        node: Node name.
        config: The config name for ``nvidia.com/mig.config``.
        gpus: Per-GPU layouts (empty when the plan did not say).
        pods_to_move: ``namespace/pod`` the analyzer saw on the GPUs the change re-creates.
        disruptive: The analyzer expects a pod to be moved.
        unsafe: Where the recommendation breaks the safety contract, as
            :func:`migscope.core._disruption.violations` re-checks it on the plan's own data
            (empty: safe). ``--apply`` skips a node with any.
        placed: ``(namespace/pod, GPU indices)`` of every pod the analyzer saw holding a
            slice of this node, from the report's per-GPU slices (empty: the plan does not
            say, as a ``node-plan.json`` does not).
        placed_at: When the analyzer saw them (the plan's creation, Unix seconds): a pod
            created later may hold other devices than the plan says.
    """

    node: str
    config: str
    gpus: tuple[GpuChange, ...] = ()
    pods_to_move: tuple[str, ...] = ()
    disruptive: bool = False
    unsafe: tuple[str, ...] = ()
    placed: tuple[tuple[str, tuple[int, ...]], ...] = ()
    placed_at: float | None = None

    @property
    def changed_gpus(self) -> tuple[GpuChange, ...]:
        """The GPUs whose layout changes."""
        return tuple(g for g in self.gpus if g.changed)

    def expected_resources(self) -> dict[str, int]:
        """``nvidia.com/mig-<profile>`` counts the node should advertise afterwards."""
        total: Counter[str] = Counter()
        for gpu in self.gpus:
            if gpu.proposed_mig:
                total.update({f"nvidia.com/mig-{p}": n for p, n in gpu.proposed.items()})
        return dict(+total)

    def destroyed_profiles(self) -> set[str]:
        """Profiles with an instance on a GPU that changes (all of them are re-created)."""
        return {p for g in self.changed_gpus for p, n in g.current.items() if n}


@dataclass(frozen=True)
class ApplyPlan:
    """The changes to apply and the mig-parted configs they name.

    Attributes:
        source: Where it was read from.
        nodes: Changed nodes, in the plan's order.
        configs: The named configs (only those the changes name are written).
        provenance: Where its data came from and when it was made; None for a file written
            before migscope recorded that (such a plan is never applied).
        pools: ``{node: pool}`` for every node of the report (empty: not known).
        profiles_now: ``{node: profiles it has now}`` from the report's current slices.
    """

    source: str
    nodes: tuple[NodeChange, ...]
    configs: MigPartedConfig
    provenance: Provenance | None = None
    pools: Mapping[str, str] = field(default_factory=dict)
    profiles_now: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def offered_after(self, node: str) -> frozenset[str] | None:
        """The MIG profiles the node's pool offers once the plan is applied (None: unknown).

        Nodes the plan changes offer their proposed layouts; the pool's other nodes keep what
        they have now. A pod whose request is none of these cannot be scheduled again in its
        pool after its eviction (issue 22: ``ml/llm-serve-0`` kept asking for
        ``7g.141gb`` after its GPU was cut into 4g+3g, and stayed Pending).
        """
        pool = self.pools.get(node)
        if pool is None:
            return None
        changes = {c.node: c for c in self.nodes}
        offered: set[str] = set()
        for name, of in self.pools.items():
            if of != pool:
                continue
            change = changes.get(name)
            if change is not None and change.gpus:
                offered.update(
                    p for g in change.gpus if g.proposed_mig for p, n in g.proposed.items() if n
                )
            else:
                offered.update(self.profiles_now.get(name, frozenset()))
        return frozenset(offered)

    def config_entries(self, name: str) -> MigPartedConfig:
        """A config holding only the named config ``name`` (what one node's change adds)."""
        return MigPartedConfig.of({name: self.configs.mig_configs[name]})

    def refusal(self, *, now: float, allow_simulated: bool, max_age_s: float | None) -> str:
        """Why ``--apply`` must not apply this plan ("" when it may), in one line.

        The rules, in order: a plan without provenance is of unknown origin and age; a plan
        from simulated data describes no real cluster (``allow_simulated``: test clusters
        only); a plan older than ``max_age_s`` (None: no limit) describes the cluster as it
        was, and a plan made more than :data:`FUTURE_SLACK_S` in the future means a clock is
        wrong, so its age is unknown. Each reason ends with what to do about it.

        Args:
            now: The applier's clock (Unix seconds).
            allow_simulated: ``--allow-simulated``.
            max_age_s: ``--max-plan-age`` in seconds; None for no limit.

        Returns:
            The reason, or "" when the plan may be applied.
        """
        p = self.provenance
        if p is None:
            return (
                "it has no provenance (written by an older migscope, or not by migscope "
                "analyze): re-run `migscope analyze` for a plan that can be applied"
            )
        if p.simulated and not allow_simulated:
            return (
                f"it comes from simulated data ({p.describe()}), not from a cluster; "
                "--allow-simulated applies it anyway, for test clusters only"
            )
        age = now - p.created_unix
        created = p.created or datetime.fromtimestamp(p.created_unix, tz=timezone.utc).isoformat()
        if age < -FUTURE_SLACK_S:
            return (
                f"it was created {format_age(age)} in the future ({created}): check the clocks "
                "of this machine and of the one that ran `migscope analyze`"
            )
        if max_age_s is not None and age > max_age_s:
            return (
                f"it is {format_age(age)} old (created {created}), over --max-plan-age "
                f"{format_age(max_age_s)}: re-run `migscope analyze`, or raise --max-plan-age"
            )
        return ""
