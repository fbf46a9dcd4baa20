"""Which path computes the statistics: ``exact``, ``fast``, or ``auto`` by the fleet's size.

Why a module of its own: the choice is made once per run, from one cheap count, and its rule
is documented in one place (``docs/analyzer-sources.md``).

* ``exact``: :mod:`.statistics`, one PromQL aggregation per field over ``[W:step]``
  subqueries. The reference on a server, proven equal to the embedded statistics
  (``tests/analyzer/test_stats_agree.py``); its cost grows with slices times steps
  (about 0.25 s of Prometheus time per slice-week at one sample a minute on the development
  machine).
* ``fast``: :mod:`.fast`, the same numbers from a few reads per series (about 5-10x a raw
  scan of the data), with the exact queries kept for the slices those reads cannot settle.
  It needs the window cut into whole cells (:meth:`.cells.Grid.of`: whole hours ending on
  the hour, a step of whole seconds); where it is not, the exact path is used and a note says
  so.
* ``auto``: exact up to :data:`AUTO_EXACT_MAX_SLICES` slices (a small fleet's week costs
  seconds either way, and the reference path then answers), fast above.
"""

from __future__ import annotations

from migscope.analyzer._intake.dialect import MIG_INFO
from migscope.analyzer._intake.stats_promql.cells import Grid
from migscope.analyzer._intake.stats_promql.queries import Queries
from migscope.analyzer._intake.stats_promql.result import StatsMode
from migscope.analyzer._options import STATS_MODES

AUTO_EXACT_MAX_SLICES = 64
"""Up to this many slices ``auto`` takes the exact path: about 15 s of Prometheus time for a
week at one sample a minute on the development machine (``docs/analyzer-benchmark.md``)."""


def count_slices(q: Queries, nodes: tuple[str, ...]) -> int:
    """How many slices the window holds on ``nodes``: one instant query over raw ranges.

    migscope: the ``migscope_mig_info`` series; dcgm-exporter: the slice keys of its activity
    and framebuffer series.
    """
    if q.migscope:
        expr = f"count({q.over('last_over_time', MIG_INFO, nodes, q.window)})"
    else:
        expr = f"count(count {q.by} ({q.last([*q.activity, *q.memory], nodes)}))"
    result = q.ask(expr)
    return int(next((s.value for s in result), 0.0))


def choose_mode(
    requested: StatsMode, q: Queries, nodes: tuple[str, ...], grid: Grid | None
) -> tuple[StatsMode, str | None]:
    """The path to take, and a note when ``fast`` was asked for but cannot be taken.

    Raises:
        ValueError: ``requested`` is not one of :data:`STATS_MODES`.
    """
    if requested not in STATS_MODES:
        raise ValueError(f"stats must be one of {', '.join(STATS_MODES)}, got {requested!r}")
    if requested == "exact":
        return "exact", None
    if grid is None:
        note = (
            "fast statistics need a window of whole hours ending on the hour and a step of "
            "whole seconds: the exact queries were used"
        )
        return "exact", note if requested == "fast" else None
    if requested == "fast":
        return "fast", None
    return ("exact" if count_slices(q, nodes) <= AUTO_EXACT_MAX_SLICES else "fast"), None
