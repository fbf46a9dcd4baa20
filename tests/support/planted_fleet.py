"""A fleet of any size from planted statistics: the HTML report's tests and benchmark read it.

Why planted statistics and not the simulator: the report's cost grows with the number of
slices, not with how they were measured, and a 5,000-slice fleet of planted week statistics
is analysed in seconds (the planner still runs for real, through
:func:`migscope.analyzer._pipeline.analyze`). Each slice plays a role of
:mod:`support.planted_slices` and gets 168 hours of activity and allocation drawn from a
seeded generator, so two calls with the same size give the same report.

The fleet: HGX nodes of 8 GPUs, H200 nodes with the balanced layout (3g + 2g + 1g + 1g) and
every fifth node an H100 with seven 1g slices (a second pool); slices held by pods of a
dozen namespaces, a share of them idle, unallocated or oversized; every seventh node is
forgotten (nothing on it works), so that the plan has whole GPUs to change.
"""

from __future__ import annotations

import dataclasses
import random

from migscope.analyzer._model import HourlyUse, Owner, SliceStats
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._result import AnalysisResult
from migscope.core._catalogue import find_model
from migscope.core._layout import is_valid
from support.planted_slices import WEEK, planted_week

__all__ = ["FLEET_START", "NAMESPACES", "planted_fleet", "planted_fleet_stats"]

FLEET_START = 1_767_571_200.0
"""Monday 2026-01-05 00:00 UTC: the week the fleet is planted in (whole hours, a real date)."""
NAMESPACES = (
    "ml-training",
    "ml-serving",
    "research",
    "genai",
    "vision",
    "speech",
    "recsys",
    "search",
    "ads",
    "platform",
    "notebooks",
    "batch",
)
HOURS = 168
_H200 = find_model("H200-141GB")
_H100 = find_model("H100-80GB")
_LAYOUTS = {
    _H200.key: is_valid(_H200, {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}).placements,
    _H100.key: is_valid(_H100, {"1g.10gb": 7}).placements,
}


def _role(rng: random.Random, forgotten: bool) -> str:
    draw = rng.random()
    if forgotten:
        return "idle" if draw < 0.5 else "unallocated"
    if draw < 0.18:
        return "idle"
    if draw < 0.33:
        return "unallocated"
    if draw < 0.36:
        return "busy_nopod"
    if draw < 0.38:
        return "unknown"
    return "busy"


def _hourly(rng: random.Random, level: float | None, held: float) -> HourlyUse:
    """A diurnal week of activity around ``level`` (None: no data), held ``held`` of the time."""
    activity: list[float | None] = []
    for h in range(HOURS):
        if level is None:
            activity.append(None)
            continue
        day = 0.5 + 0.5 * ((h % 24) in range(8, 20))
        activity.append(round(min(1.0, max(0.0, level * day + rng.uniform(-0.05, 0.05))), 3))
    return HourlyUse(3600.0, tuple(activity), tuple(held for _ in range(HOURS)))


def planted_fleet_stats(n_slices: int, *, seed: int = 14) -> list[SliceStats]:
    """``n_slices`` slices' week statistics, one week from :data:`FLEET_START`."""
    rng = random.Random(seed)
    out: list[SliceStats] = []
    node = 0
    while len(out) < n_slices:
        model = _H100 if node % 5 == 4 else _H200
        name = f"gpu-{model.key.split('-')[0].lower()}-{node:04d}"
        for gpu in range(8):
            for gi, placement in enumerate(_LAYOUTS[model.key], start=1):
                if len(out) == n_slices:
                    break
                role = _role(rng, forgotten=node % 7 == 3)
                profile = placement.profile.name
                stats, pod = planted_week(model, name, gpu, gi, profile, placement.start, role)
                namespace = NAMESPACES[rng.randrange(len(NAMESPACES))]
                owners = (Owner(namespace, pod, 1.0),) if pod is not None else ()
                level = stats.activity_p95
                if role == "busy" and profile.startswith("3g") and rng.random() < 0.4:
                    level = 0.08  # a 3g that a 1g would serve: oversized
                stats = dataclasses.replace(
                    stats,
                    window_start=FLEET_START,
                    window_end=FLEET_START + WEEK,
                    activity_p50=level,
                    activity_p95=level,
                    activity_max=level,
                    owners=owners,
                    hourly=_hourly(rng, level, stats.allocated_fraction),
                )
                if role == "busy" and level == 0.08:
                    total = stats.memory_total_bytes or 0.0
                    stats = dataclasses.replace(
                        stats, memory_p95_bytes=0.05 * total, memory_peak_bytes=0.05 * total
                    )
                out.append(stats)
        node += 1
    return out


def planted_fleet(
    n_slices: int, *, seed: int = 14, price_per_gpu_hour: float | None = 2.5
) -> AnalysisResult:
    """The analysis of :func:`planted_fleet_stats` over its week (the real pipeline)."""
    options = AnalyzeOptions(time_limit_s=2.0, price_per_gpu_hour=price_per_gpu_hour)
    window = (FLEET_START, FLEET_START + WEEK)
    return analyze(planted_fleet_stats(n_slices, seed=seed), window=window, options=options)
