"""The one place that talks to HiGHS (``highspy``), kept small and typed as ``Any``.

highspy's C++ constructor prints a two-line banner to the process's standard output the
first time a solver is created, before any option can turn logging off. ``migscope analyze
--output json`` writes its report to standard output, so the first construction happens
with file descriptor 1 pointed at ``/dev/null`` for that instant.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import highspy

INF = float("inf")
_lock = threading.Lock()
_banner_shown = False


def _construct_quietly() -> Any:
    """Create the process's first solver with stdout silenced (the banner only prints once)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # pragma: no cover - no stdout at all: nothing to protect
        return highspy.Highs()  # type: ignore[no-untyped-call]
    sink = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(sink, 1)
        return highspy.Highs()  # type: ignore[no-untyped-call]
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(sink)


def new_highs(*, time_limit_s: float, mip_rel_gap: float, mip_abs_gap: float, seed: int) -> Any:
    """A silent HiGHS instance with the planner's options set.

    Args:
        time_limit_s: Wall-clock limit for ``run()``; HiGHS returns its best plan so far.
        mip_rel_gap: Stop once ``(objective - bound) / |objective|`` is at most this.
        mip_abs_gap: Stop once ``objective - bound`` is at most this (just under 1 proves
            optimality when every objective value is a whole number).
        seed: HiGHS's random seed; fixed so that equal inputs give equal plans.
    """
    global _banner_shown
    with _lock:
        if _banner_shown:
            solver = highspy.Highs()  # type: ignore[no-untyped-call]
        else:
            solver = _construct_quietly()
            _banner_shown = True
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("time_limit", float(time_limit_s))
    solver.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    solver.setOptionValue("mip_abs_gap", float(mip_abs_gap))
    solver.setOptionValue("random_seed", int(seed))
    return solver
