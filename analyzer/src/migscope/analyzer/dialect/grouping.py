"""Small steps both dialects' readers take when they gather a slice's series.

Why a module of its own: a slice's series (one per pod label set, per name spelling) are
merged the same way whichever exporter wrote them: its current labels are those of the
series seen last, re-created instances are ordered by their first sample, and the pods that
held it are the union of the timestamps of the series naming each pod.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from migscope.analyzer.dialect.identity import Holder
from migscope.analyzer.openmetrics import Series
from migscope.analyzer.stats import TimeSeries

__all__ = ["first_seen", "holders", "latest"]

_Int64Array: TypeAlias = NDArray[np.int64]


def latest(series: Iterable[Series]) -> Series | None:
    """The series whose last sample is the most recent (the current labels of a slice)."""
    best: Series | None = None
    best_t = -1
    for s in series:
        if len(s.samples) and int(s.samples.timestamps_ms[-1]) > best_t:
            best, best_t = s, int(s.samples.timestamps_ms[-1])
    return best


def first_seen(items: Iterable[Series]) -> float:
    """The first sample time of any of ``items``, ms (inf without samples): orders re-creations."""
    first = math.inf
    for s in items:
        if len(s.samples):
            first = min(first, float(s.samples.timestamps_ms[0]))
    return first


def holders(
    parts: Iterable[tuple[Holder, TimeSeries]],
) -> dict[Holder, _Int64Array]:
    """Timestamps at which each holder (pod, claim) was seen holding the slice, merged."""
    stamps: dict[Holder, list[_Int64Array]] = defaultdict(list)
    for owner, samples in parts:
        stamps[owner].append(samples.timestamps_ms)
    return {owner: np.unique(np.concatenate(arrays)) for owner, arrays in stamps.items()}
