"""Every knob of one analysis, with its default written once.

Why a dataclass: the CLI (``analyze``, ``demo``), the scheduler's runs (which are ``migscope
analyze`` child processes), the benchmarks and the tests all start an analysis; each used to
restate a dozen defaults (window, step, headroom, solver time, objective). They now build an
:class:`AnalyzeOptions` and change only what they mean to change, and the CLI's ``--help``
shows these same defaults.

The module imports nothing heavy (the types it names are for the type checker only, and the
packaged policy is loaded when an :class:`AnalyzeOptions` is made), so that ``migscope
analyze --help`` can show the defaults without loading numpy, the policy or the sources.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from migscope.core import UserError

if TYPE_CHECKING:
    from migscope.analyzer._judge.policy import Policy
    from migscope.analyzer._judge.workloads import OwnerLookup
    from migscope.analyzer._model import SliceInfo
    from migscope.core import MigPartedConfig

DEFAULT_WINDOW_SECONDS = 7 * 86400.0
"""A week: long enough to see weekly cycles, what the report is meant to summarise."""

DEFAULT_STEP_SECONDS = 60.0
"""Resolution the analyzer expects its data at: one sample per slice per minute."""

DEFAULT_HEADROOM = 0.10
"""Share of each demanded profile added on top, rounded to the nearest instance."""

DEFAULT_TIME_LIMIT_SECONDS = 5.0
"""Solver seconds per pool: exact for fleets of hundreds of GPUs, bounded for larger ones."""

DEFAULT_TIMEOUT_SECONDS = 60.0
"""How long one request to a server may take (``--timeout``): a week of statistics is slow."""

STATS_MODES: tuple[str, ...] = ("exact", "fast", "auto")
"""How a server computes the statistics (``--stats``; ``remote_stats.modes`` says each)."""

PoolSelector = Callable[["SliceInfo"], "str | None"]
"""Names a slice's node pool (None: ungrouped); the demand is met pool by pool."""

Objective = Literal["consolidate", "minimal-change"]
"""What the plan optimises after covering demand (docs/planner.md, Weights)."""

DEFAULT_OBJECTIVE: Objective = "consolidate"
"""Free GPUs first."""

Progress = Callable[[str], None]
"""Called with a short message at each stage (the CLI shows it on a terminal)."""


class BadOptionError(UserError, ValueError):
    """An option outside what an analysis can use (the message names it)."""


def _default_policy() -> Policy:
    """The packaged policy, loaded when options are made (not when this module is imported)."""
    from migscope.analyzer._judge.policy import default_policy

    return default_policy()


@dataclass(frozen=True)
class AnalyzeOptions:
    """How to analyse: the window, the thresholds, the plan's goal and its limits.

    Attributes:
        window_s: Length of the analysed window, seconds.
        end: Window end (Unix seconds); None: the source's newest sample, or now.
        step_s: Sample interval for coverage, seconds.
        policy: Classification thresholds (``--policy``; the packaged default otherwise).
        headroom: Extra share of each demanded profile, rounded to the nearest instance.
        price_per_gpu_hour: Adds money figures to the savings when given.
        objective: ``consolidate`` (free GPUs first) or ``minimal-change``.
        time_limit_s: Solver time limit per pool.
        keep_mis_sized: Pin oversized/saturated held slices at their current size.
        selector: Hook splitting pools further (:func:`~migscope.analyzer._judge.demand.pool_key`).
        what_if: ``{node: config name}`` (``"*"``: every other node) to replay.
        what_if_config: The mig-parted config those names come from (None: MIG Manager's
            generated configs).
        pending: ``(profile, count)`` of pods waiting for ``nvidia.com/mig-*``.
        pending_notes: What the report says about how pending pods were read.
        progress: Stage messages (None: silent).
        owners: Where the pods' workloads are looked up (the cluster, kube-state-metrics;
            :mod:`~migscope.analyzer._judge.workloads`); None: guessed from the pods' names.
    """

    window_s: float = DEFAULT_WINDOW_SECONDS
    end: float | None = None
    step_s: float = DEFAULT_STEP_SECONDS
    policy: Policy = field(default_factory=_default_policy)
    headroom: float = DEFAULT_HEADROOM
    price_per_gpu_hour: float | None = None
    objective: Objective = DEFAULT_OBJECTIVE
    time_limit_s: float = DEFAULT_TIME_LIMIT_SECONDS
    keep_mis_sized: bool = False
    selector: PoolSelector | None = None
    what_if: Mapping[str, str] | None = None
    what_if_config: MigPartedConfig | None = None
    pending: Sequence[tuple[str, int]] = ()
    pending_notes: Sequence[str] = ()
    progress: Progress | None = None
    owners: OwnerLookup | None = None

    def __post_init__(self) -> None:
        """Refuse what no analysis can use, in the user's terms."""
        for name in ("window_s", "step_s", "time_limit_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise BadOptionError(f"{name} must be a number > 0, got {value!r}")
        if not (math.isfinite(self.headroom) and self.headroom >= 0):
            raise BadOptionError(f"headroom must be a fraction >= 0, got {self.headroom}")
        price = self.price_per_gpu_hour
        if price is not None and not (math.isfinite(price) and price >= 0):
            raise BadOptionError(f"price per GPU-hour must be a number >= 0, got {price}")

    def say(self, message: str) -> None:
        """Report a stage to :attr:`progress`, if anyone listens."""
        if self.progress is not None:
            self.progress(message)
