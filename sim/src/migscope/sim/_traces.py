"""Real GPU time series to replay: Alibaba's GenTD26 per-pod duty cycle and memory traces.

The simulator replays these so that demos and analyzer tests see the burstiness, idle gaps
and memory plateaus of real inference pods instead of a textbook sine. Two facts shape the
reader:

- The upstream files disagree on column order: the duty-cycle file is
  ``value,timestamp_anon,container_ip``, the memory file ``timestamp_anon,value,container_ip``
  (its README lists timestamp first for both). Columns are therefore found by *header name*,
  never by position.
- Containers have gaps (114-171 s instead of the usual 57 s). A sample holds its value until
  the next one (sample-and-hold), which is what a scraper would have seen.

Files may be plain ``.csv``, gzip'd ``.csv.gz`` or the upstream ``.tar.gz`` (first CSV member).
A small excerpt ships in ``migscope/sim/data`` (see its README for provenance).
"""

from __future__ import annotations

import bisect
import csv
import gzip
import io
import itertools
import statistics
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

from migscope.core import UserError

TraceKind = Literal["duty", "memory"]

BUILTIN_DUTY = "genai_duty_cycle_excerpt.csv.gz"
"""Package-data file name of the shipped duty-cycle excerpt."""
BUILTIN_MEMORY = "genai_memory_used_bytes_excerpt.csv.gz"
"""Package-data file name of the shipped memory-used excerpt."""

_TIME_COLUMNS = ("timestamp_anon", "timestamp", "time")
_CONTAINER_COLUMNS = ("container_ip", "container", "container_id")


class TraceError(UserError, ValueError):
    """A trace file that cannot be read, or a container it does not have."""


@dataclass(frozen=True)
class TraceSeries:
    """One container's samples as a looping step function of time.

    Attributes:
        container: The ``container_ip`` the samples belong to.
        times: Sample times in seconds after ``origin``, strictly increasing, the first 0.
        values: Sample values, in the file's unit (percent or bytes).
        period: Length of one pass; replay loops after it.
        origin: The file timestamp that time 0 stands for.
    """

    container: str
    times: tuple[float, ...]
    values: tuple[float, ...]
    period: float
    origin: float = 0.0
    _prefix: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.times or len(self.times) != len(self.values):
            raise TraceError(f"container {self.container}: no samples")
        if self.times[0] != 0.0 or self.period <= self.times[-1]:
            raise TraceError(f"container {self.container}: samples outside 0..period")
        prefix = [0.0]
        ends = (*self.times[1:], self.period)
        for start, end, value in zip(self.times, ends, self.values, strict=True):
            prefix.append(prefix[-1] + value * (end - start))
        object.__setattr__(self, "_prefix", tuple(prefix))

    @property
    def prefix(self) -> tuple[float, ...]:
        """``integral`` at each sample time and at ``period``: ``len(times) + 1`` values."""
        return self._prefix

    def _index(self, position: float) -> int:
        return bisect.bisect_right(self.times, position) - 1

    def value_at(self, t: float) -> float:
        """The sample in force at ``t`` seconds after the start of replay (looping)."""
        return self.values[self._index(t % self.period)]

    def integral(self, t: float) -> float:
        """``∫ value dt`` from 0 to ``t`` (looping), exact for the step function.

        Exactness matters: GPM metrics are averages over the interval between two samples
        and energy integrates power, so both come from differences of this integral.
        """
        if t <= 0:
            return 0.0
        loops, position = divmod(t, self.period)
        i = self._index(position)
        partial = self._prefix[i] + self.values[i] * (position - self.times[i])
        return loops * self._prefix[-1] + partial


def builtin_trace(kind: TraceKind) -> str:
    """Path of the shipped excerpt for ``kind`` (``"duty"`` or ``"memory"``)."""
    name = BUILTIN_DUTY if kind == "duty" else BUILTIN_MEMORY
    return str(resources.files("migscope.sim") / "data" / name)


def _open_text(path: Path) -> Iterator[str]:
    """Lines of the CSV in ``path``, whatever the compression."""
    name = path.name.lower()
    if name.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(path) as archive:
            member = next((m for m in archive.getmembers() if m.name.endswith(".csv")), None)
            if member is None:
                raise TraceError(f"{path}: no .csv member in the archive")
            raw = archive.extractfile(member)
            if raw is None:  # pragma: no cover - a .csv member that is not a file
                raise TraceError(f"{path}: cannot read {member.name}")
            with raw:
                yield from io.TextIOWrapper(raw, encoding="utf-8", newline="")
        return
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        yield from handle


def _column(header: list[str], choices: tuple[str, ...], path: Path) -> int:
    for name in choices:
        if name in header:
            return header.index(name)
    raise TraceError(f"{path}: no {'/'.join(choices)} column in header {','.join(header)}")


@lru_cache(maxsize=8)
def _load_table(path_text: str) -> dict[str, tuple[tuple[float, float], ...]]:
    """All samples of a file, per container, sorted by time (cached: files are re-used)."""
    path = Path(path_text)
    if not path.exists():
        raise TraceError(f"trace file not found: {path}")
    rows = csv.reader(_open_text(path))
    header = [h.strip() for h in next(rows, [])]
    if not header:
        raise TraceError(f"{path}: empty file")
    value_col = _column(header, ("value",), path)
    time_col = _column(header, _TIME_COLUMNS, path)
    container_col = _column(header, _CONTAINER_COLUMNS, path)
    samples: dict[str, dict[float, float]] = {}
    for line, row in enumerate(rows, start=2):
        if not row:
            continue
        try:
            when, value = float(row[time_col]), float(row[value_col])
            container = row[container_col]
        except (IndexError, ValueError):
            raise TraceError(f"{path}:{line}: not a trace row: {','.join(row)}") from None
        samples.setdefault(container, {})[when] = value
    return {c: tuple(sorted(points.items())) for c, points in samples.items()}


def load_containers(path: str | None, kind: TraceKind) -> list[str]:
    """Container ids in ``path`` (the shipped excerpt when None), sorted: index order."""
    return sorted(_load_table(path or builtin_trace(kind)))


def load_series(
    path: str | None,
    kind: TraceKind,
    container: str | int,
    *,
    align: TraceSeries | None = None,
) -> TraceSeries:
    """One container's samples from ``path`` (the shipped excerpt of ``kind`` when None).

    Args:
        path: A GenTD26-format file, or None for the shipped excerpt.
        kind: Which excerpt None means.
        container: A ``container_ip`` (a unique prefix is enough) or an index into the
            sorted container ids.
        align: Another series of the same container (the duty cycle, when loading its
            memory): use its origin and period, so that both replay in step. Samples before
            the origin are dropped; the first remaining value also holds before it.

    Raises:
        TraceError: unreadable file, unknown or ambiguous container.
    """
    source = path or builtin_trace(kind)
    table = _load_table(source)
    ids = sorted(table)
    if isinstance(container, int):
        if not 0 <= container < len(ids):
            raise TraceError(
                f"{source}: container index {container} out of range 0..{len(ids) - 1}"
            )
        chosen = ids[container]
    else:
        matches = [c for c in ids if c.startswith(container)]
        if len(matches) != 1:
            what = "ambiguous" if matches else "unknown"
            raise TraceError(f"{source}: {what} container {container!r} ({len(ids)} in file)")
        chosen = matches[0]
    points = list(table[chosen])
    if align is None:
        origin = points[0][0]
        gaps = [b[0] - a[0] for a, b in itertools.pairwise(points)]
        period = points[-1][0] - origin + (statistics.median(gaps) if gaps else 60.0)
    else:
        origin, period = align.origin, align.period
        points = [(t, v) for t, v in points if origin <= t < origin + period]
        if not points:
            raise TraceError(f"{source}: container {chosen} has no samples in the aligned window")
        if points[0][0] != origin:
            points.insert(0, (origin, points[0][1]))
    times = tuple(t - origin for t, _ in points)
    return TraceSeries(chosen, times, tuple(v for _, v in points), period, origin)
