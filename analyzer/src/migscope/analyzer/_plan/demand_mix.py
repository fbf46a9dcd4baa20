"""Demand in MIG instances from fractional-GPU requests, such as the Alibaba GPU traces.

Schedulers that share GPUs (the Alibaba 2023 trace's ``gpu_milli``, fractional GPU
plug-ins) ask for a share of a GPU; MIG sells fixed slices. The mapping used here: a pod
asking for ``gpu_milli`` thousandths of one GPU gets the smallest base profile whose compute
share ``g / C`` is at least ``gpu_milli / 1000`` (``C`` = 7 on H100/H200: 1/7 ≈ 143,
2/7 ≈ 286, 3/7 ≈ 429, 4/7 ≈ 571 milli, anything above needs the full 7g); a pod asking for
whole GPUs gets that many full-GPU instances. Base profiles only: no ``+me``, no
double-memory 1g (the trace has no memory request to justify it). The comparison is done in
integers, so 1000 × 3 ≥ 429 × 7 is decided exactly.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from migscope.analyzer._plan.pool import PlanInputError
from migscope.core import GiProfile, GpuModel

_BASE = re.compile(r"^\d+g\.\d+gb$")


@dataclass(frozen=True)
class RequestCount:
    """Pods asking for the same GPU share.

    Attributes:
        num_gpu: GPUs per pod (0: no GPU; 1 with ``gpu_milli < 1000``: a share of one).
        gpu_milli: Thousandths of a GPU per pod when ``num_gpu`` is 1.
        pods: How many pods ask for it.
    """

    num_gpu: int
    gpu_milli: int
    pods: int = 1


def base_profiles(model: GpuModel) -> list[GiProfile]:
    """The model's base profiles (no attribute suffix), smallest first.

    Where two share a compute size (1g.18gb and 1g.35gb), the smaller memory comes first,
    which is the one a compute-only request maps to.
    """
    base = [p for p in model.profiles if _BASE.match(p.name)]
    return sorted(base, key=lambda p: (p.compute_slices, p.memory_slices))


def profile_for_milli(model: GpuModel, gpu_milli: int) -> GiProfile:
    """The smallest base profile whose compute share is at least ``gpu_milli / 1000``.

    Raises:
        PlanInputError: ``gpu_milli`` outside 1..1000.
    """
    if not 0 < gpu_milli <= 1000:
        raise PlanInputError(f"gpu_milli must be in 1..1000, got {gpu_milli}")
    for profile in base_profiles(model):
        if profile.compute_slices * 1000 >= gpu_milli * model.compute_slices:
            return profile
    raise PlanInputError(f"{model.key} has no full-GPU profile")  # pragma: no cover - catalogue has


def _full_gpu(model: GpuModel) -> GiProfile:
    return profile_for_milli(model, 1000)


def demand_from_requests(model: GpuModel, requests: Iterable[RequestCount]) -> dict[str, int]:
    """Instances per profile for a set of GPU requests (see the module docstring)."""
    demand: Counter[str] = Counter()
    for request in requests:
        if request.num_gpu <= 0 or request.pods <= 0:
            continue
        if request.num_gpu == 1 and request.gpu_milli < 1000:
            demand[profile_for_milli(model, request.gpu_milli).name] += request.pods
        else:
            demand[_full_gpu(model).name] += request.num_gpu * request.pods
    return dict(sorted(demand.items()))


def scale_demand(
    model: GpuModel, mix: Mapping[str, int], *, gpus: int, fill: float
) -> dict[str, int]:
    """Scale a demand mix to a pool: ``fill`` of its compute slices, the mix's proportions kept.

    Counts are rounded by largest remainder, so the instance total is the rounded scaled
    total and equal inputs give equal outputs.

    Args:
        model: The GPU model (compute slices per profile and per GPU).
        mix: Instances per profile, any scale (e.g. :func:`demand_from_requests`).
        gpus: Pool size.
        fill: Fraction of the pool's compute slices to demand (0..1).

    Raises:
        PlanInputError: an empty mix or ``fill`` outside 0..1.
    """
    if not 0.0 <= fill <= 1.0:
        raise PlanInputError(f"fill must be in 0..1, got {fill}")
    weight = sum(model.profile(p).compute_slices * n for p, n in mix.items())
    if weight <= 0:
        raise PlanInputError("the demand mix is empty")
    factor = fill * model.compute_slices * gpus / weight
    raw = {p: n * factor for p, n in sorted(mix.items())}
    counts = {p: math.floor(v) for p, v in raw.items()}
    short = round(sum(raw.values())) - sum(counts.values())
    by_remainder = sorted(raw, key=lambda p: (-(raw[p] - counts[p]), p))
    for name in by_remainder[: max(short, 0)]:
        counts[name] += 1
    return {p: n for p, n in counts.items() if n > 0}
