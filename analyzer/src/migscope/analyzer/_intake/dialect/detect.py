"""Which exporter wrote a set of series, and why none, when the answer is neither.

Detection and its failure message are shared by the file reader
and the Prometheus source, so that both tell a user the same thing about the same data: the
dcgm-exporter families found without ``GPU_I_ID`` (MIG off), or the names closest to the
expected ones (a relabelling renamed them).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Sequence
from enum import Enum

from migscope.analyzer._intake.dialect.names import (
    DCGM_ACTIVITY,
    DCGM_FB_USED,
    DCGM_FIELDS,
    DIALECT_METRICS,
    MIG_INFO,
    MIGSCOPE_PREFIX,
    dcgm_family,
    fields_of,
)
from migscope.analyzer._intake.openmetrics import SeriesSet
from migscope.core import UserError


class Dialect(str, Enum):
    """Which exporter wrote the series."""

    MIGSCOPE = "migscope"
    DCGM = "dcgm"


class NoMigSeriesError(UserError, ValueError):
    """The input holds no per-slice series of either dialect; the message says what it holds."""


def gi_families(series: SeriesSet) -> frozenset[str]:
    """The dcgm-exporter families (upper case) in which some series has a ``GPU_I_ID``.

    Looks at the kept series and at the label sets of the indexed ones, so that it sees the
    families whose samples were not kept (read with ``index=indexes``).
    """
    found: set[str] = set()
    for name, items in series.series.items():
        family = dcgm_family(name)
        if family is not None and any(s.labels.get("GPU_I_ID") for s in items):
            found.add(family)
    for name, sets in series.label_sets.items():
        family = dcgm_family(name)
        if family is not None and any(labels.get("GPU_I_ID") for labels in sets):
            found.add(family)
    return frozenset(found)


def closest_names(names: Iterable[str], *, limit: int = 5) -> list[str]:
    """The names that look most like what the analyzer reads: a renamed family shows here.

    Why: a scrape relabelled with a prefix (``gpu_DCGM_FI_DEV_FB_USED``) finds nothing, and
    "no MIG series" alone does not say why; naming what *was* found next to what was
    expected does. A name that contains an expected one (any case) comes first, then the
    nearest by :func:`difflib.get_close_matches`.
    """
    expected = sorted(DIALECT_METRICS)
    upper = {e.upper() for e in expected}
    candidates = sorted(set(names))
    containing = [n for n in candidates if any(e in n.upper() for e in upper)]
    near: list[str] = []
    for wanted in expected:
        for hit in difflib.get_close_matches(wanted, candidates, n=limit, cutoff=0.75):
            if hit not in near:
                near.append(hit)
    return list(dict.fromkeys([*containing, *near]))[:limit]


def _listing(names: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    more = f", and {len(names) - limit} more" if len(names) > limit else ""
    return f"{len(names)} famil{'y' if len(names) == 1 else 'ies'}: {shown}{more}"


def explain_no_mig(where: str, names: Collection[str], *, empty: str) -> str:
    """Why no MIG series was found in ``names`` (every sample name there), for one line.

    Shared by the file and the Prometheus paths, so both say the same thing.

    Args:
        where: The file or server.
        names: Every sample (metric) name found.
        empty: What to say when there is no name at all ("no samples").
    """
    first = [f.name for f in DCGM_FIELDS]  # what the analyzer reads, first
    dcgm = sorted(
        {n for n in names if dcgm_family(n) is not None},
        key=lambda n: (first.index(n.upper()) if n.upper() in first else len(first), n),
    )
    if dcgm:
        return (
            f"{where}: dcgm-exporter series found ({_listing(dcgm)}), but none has a GPU_I_ID "
            "label: no GPU instance is reported (MIG disabled, or enabled with no GPU "
            "instance created)"
        )
    if any(name.startswith(MIGSCOPE_PREFIX) for name in names):
        return (
            f"{where}: migscope series found, but no {MIG_INFO}: "
            "MIG is disabled or the GPUs have no GPU instances"
        )
    found = f"{len(names)} other metric names" if names else empty
    close = closest_names(names)
    hint = (
        f"; closest to the expected names: {', '.join(close)} (renamed by relabelling? "
        "dcgm-exporter's names are read in any letter case, but not with a prefix)"
        if close
        else ""
    )
    new = "/".join(fields_of(q)[-1].name for q in (DCGM_ACTIVITY, DCGM_FB_USED))
    return (
        f"{where}: no MIG series found ({found}{hint}; expected {MIG_INFO} from migscope "
        f"or {DCGM_ACTIVITY}/{DCGM_FB_USED} (4.9+: {new}) with GPU_I_ID from dcgm-exporter)"
    )


def detect_dialect(series: SeriesSet) -> Dialect:
    """Which exporter's series ``series`` holds.

    Raises:
        NoMigSeriesError: neither dialect's per-slice series is present; the message says
            what was found instead (e.g. dcgm-exporter families without ``GPU_I_ID``, named:
            MIG is off or no GPU instance exists; or the names closest to the expected ones).
    """
    if MIG_INFO in series.names:
        return Dialect.MIGSCOPE
    if gi_families(series):
        return Dialect.DCGM
    raise NoMigSeriesError(explain_no_mig(series.source, series.names, empty="no samples"))
