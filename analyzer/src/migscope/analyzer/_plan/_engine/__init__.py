"""Internals shared by the exact planner and the baselines.

* :func:`prepare` checks the input and aggregates GPUs into *classes* (same current target,
  same kept instances) and *pools* (same kept instances): the MILP decides how many GPUs of
  each class keep their layout and how many GPUs of each pool take each candidate layout,
  so its size depends on the variety of the fleet, not on its size.
* :func:`realize` turns per-GPU targets plus per-layout coverage counts into a :class:`Plan`:
  placements, which instances count towards demand, stranded slices, configs.
* :class:`Usage` is the coverage the solver counted per target, what :func:`realize` needs
  besides the targets.

The two halves live in :mod:`.prepare` and :mod:`.realize`; this package gathers their names
for the planner's modules. Nothing here does I/O.
"""

from __future__ import annotations

from migscope.analyzer._plan._engine.prepare import (
    ANYWHERE,
    PoolKey,
    Prepared,
    balanced_layout,
    prepare,
)
from migscope.analyzer._plan._engine.realize import Usage, realize

__all__ = [
    "ANYWHERE",
    "PoolKey",
    "Prepared",
    "Usage",
    "balanced_layout",
    "prepare",
    "realize",
]
