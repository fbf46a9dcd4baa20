"""Read samples from an exposition file: OpenMetrics or the Prometheus text format.

The embedded source analyses history without a Prometheus server. Its input is the file that
``promtool tsdb create-blocks-from openmetrics`` would take (OpenMetrics, timestamps in
seconds, ending in ``# EOF``), the text format that VictoriaMetrics imports (timestamps in
milliseconds), or a single scrape saved from ``/metrics`` with no timestamps at all (the
dcgm-exporter captures in ``tests/fixtures/dcgm/``, which do not even end in a newline).

Parsing is left to ``prometheus_client``'s two parsers, not re-implemented: the format is
told by the last line (``# EOF`` means OpenMetrics, whose parser is strict; anything else
goes to the laxer text-format parser). What this module adds is what the analyzer needs
around them: samples grouped into per-series numpy arrays, only for the metric names asked
for (a dcgm-exporter scrape has 15 families of which the analyzer uses three), the label sets
alone of the names that are only to be *indexed* (a family that tells that a GPU instance
exists costs one label set per series instead of 16 bytes per sample), numbers held to the
format's grammar rather than to Python's laxer ``float()``, and errors that say
``FILE:LINE: what`` on one line. Which names to keep or index is a set of names or a
predicate, so that a caller can match names case-insensitively (scrapes relabelled to
lower case).

Memory: the input is parsed in chunks of ``chunk_size`` sample lines (the parsers would
otherwise hold a whole metric family as Python objects, about a kilobyte per sample), and only
the kept samples are stored, as 16 bytes each (int64 milliseconds and float64): a week at
one-minute resolution costs about 160 KiB per kept series. Speed is the library's: about
25,000 samples a second on one core, so a week of 11 slices (600k samples) takes ~25 s.
"""

from __future__ import annotations

import math
import os
import re
import time
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TextIO, TypeAlias, cast

import numpy as np
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import (
    text_fd_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_fd_to_metric_families as text_families

from migscope.analyzer._intake.stats_local import TimeSeries
from migscope.core import FileProblemError, one_line

NameFilter: TypeAlias = Collection[str] | Callable[[str], bool]
"""Which sample names to take: exact names, or a predicate on the name."""

_TAIL_BYTES = 4096

DEFAULT_CHUNK_SAMPLES = 10_000
"""Sample lines parsed at a time: about 10 MB of transient parser objects."""
_METADATA = ("# HELP ", "# TYPE ", "# UNIT ")


class ExpositionError(FileProblemError):
    """A file that is not a readable exposition; the message is ``FILE:LINE: what``."""


@dataclass(frozen=True, eq=False)
class Series:
    """One series of a metric: its labels and its samples.

    Attributes:
        name: The sample name as written (counters keep their ``_total``).
        labels: The labels, empty values included as written.
        samples: Timestamps and values.
    """

    name: str
    labels: Mapping[str, str]
    samples: TimeSeries


@dataclass(frozen=True, eq=False)
class SeriesSet:
    """The series read from one file, by sample name.

    Attributes:
        source: Where they came from (file path, or the name given to a text).
        series: Kept series by sample name.
        names: Every sample name the file contains, kept or not (the dialect detector asks
            about names it did not need the samples of).
        timestamped: True when every kept sample carried its own timestamp; False when at
            least one was given the default (a single scrape saved from ``/metrics``).
        openmetrics: True if the file was OpenMetrics, False for the text format.
        label_sets: For the names that were indexed but not kept, the distinct label sets of
            their series (no samples), by sample name.
    """

    source: str
    series: Mapping[str, tuple[Series, ...]]
    names: frozenset[str]
    timestamped: bool
    openmetrics: bool
    _range: tuple[float, float] | None = field(default=None, repr=False)
    label_sets: Mapping[str, tuple[Mapping[str, str], ...]] = field(default_factory=dict)

    def get(self, name: str) -> tuple[Series, ...]:
        """The kept series called ``name`` (none if absent or not kept)."""
        return self.series.get(name, ())

    def time_range(self) -> tuple[float, float] | None:
        """First and last sample time of the kept series, Unix seconds, or None if empty."""
        return self._range


def read_exposition(
    path: str | os.PathLike[str],
    *,
    keep: NameFilter | None = None,
    index: NameFilter | None = None,
    default_timestamp: float | None = None,
    chunk_size: int = DEFAULT_CHUNK_SAMPLES,
) -> SeriesSet:
    """Read an OpenMetrics or text-format file into per-series arrays.

    Args:
        path: The file.
        keep: Sample names whose samples to keep (None keeps all), as names or a predicate.
            Families are parsed in full either way, so that a malformed line is reported
            wherever it is.
        index: Sample names, not kept, whose series' label sets to record in
            :attr:`SeriesSet.label_sets` (None: none).
        default_timestamp: Unix seconds to give samples written without a timestamp; by
            default the file's modification time, the best guess for a saved scrape.
        chunk_size: Sample lines handed to the parser at a time, which bounds its memory.

    Returns:
        The series, grouped by sample name.

    Raises:
        ExpositionError: the file cannot be opened, is not UTF-8 text, or a line does not
            parse; the message names the file and line.
    """
    source = os.fspath(path)
    try:
        openmetrics = _ends_with_eof(Path(source))
        if default_timestamp is None:
            default_timestamp = Path(source).stat().st_mtime
        with open(source, "rb") as handle:
            return _read(
                _utf8_lines(handle, source),
                source=source,
                openmetrics=openmetrics,
                keep=keep,
                index=index,
                default_timestamp=default_timestamp,
                chunk_size=chunk_size,
            )
    except OSError as exc:
        raise ExpositionError(exc.strerror or str(exc), source=source) from exc


def parse_exposition(
    text: str,
    *,
    source: str = "<text>",
    keep: NameFilter | None = None,
    index: NameFilter | None = None,
    default_timestamp: float | None = None,
    chunk_size: int = DEFAULT_CHUNK_SAMPLES,
) -> SeriesSet:
    """Parse exposition text; see :func:`read_exposition`.

    Args:
        text: The exposition.
        source: Name to use in error messages.
        keep: Sample names whose samples to keep (None keeps all).
        index: Sample names, not kept, whose label sets to record (None: none).
        default_timestamp: Unix seconds for samples without one; by default the time now.
        chunk_size: Sample lines handed to the parser at a time.

    Raises:
        ExpositionError: a line does not parse.
    """
    openmetrics = _last_line(text) == "# EOF"
    return _read(
        iter(text.splitlines(keepends=True)),
        source=source,
        openmetrics=openmetrics,
        keep=keep,
        index=index,
        default_timestamp=time.time() if default_timestamp is None else default_timestamp,
        chunk_size=chunk_size,
    )


def _last_line(text: str) -> str:
    """The last line that is not blank, without its line break."""
    stripped = text.rstrip()
    return stripped[stripped.rfind("\n") + 1 :].strip()


def _ends_with_eof(path: Path) -> bool:
    """Whether the file's last non-blank line is ``# EOF`` (OpenMetrics), reading its tail only."""
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - _TAIL_BYTES))
        tail = handle.read()
    return _last_line(tail.decode("utf-8", errors="replace")) == "# EOF"


def _utf8_lines(handle: IO[bytes], source: str) -> Iterator[str]:
    """Decode a file line by line, so that bad bytes are reported on their own line."""
    for number, raw in enumerate(handle, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ExpositionError(
                f"not UTF-8 text (byte {exc.start + 1} of the line is {raw[exc.start]:#04x})",
                source=source,
                line=number,
            ) from exc


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACES = re.compile(r"\{[^{}]*\}")
_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf(?:inity)?|nan)", re.I | re.A)
_MAX_MS = 2.0**63  # Prometheus stores int64 milliseconds


def _check_numbers(line: str, *, openmetrics: bool) -> None:
    """Refuse the numbers of a sample line that Prometheus would refuse and Python takes.

    Why: ``float()`` reads ``1_0`` as 10 (prometheus-client before 0.22 hands it values so)
    and any script's digits (``١٢`` is 12), and a NaN, infinite or int64-overflowing
    timestamp would only fail later, far from its line. The exposition format takes plain
    ASCII decimals, ``Inf`` and ``NaN`` (Go's ``ParseFloat``), and finite timestamps.

    Raises:
        ValueError: a value or timestamp is not such a number; the message quotes it.
    """
    if line.startswith("#"):
        return
    brace = line.rfind("}")
    if "# {" in line:  # an exemplar (or a label that looks like one): the slow, exact way
        tokens = _BRACES.sub(" ", _QUOTED.sub('""', line)).split()
        numbers = tokens if line.lstrip().startswith("{") else tokens[1:]
    else:  # after the labels, or the name, only numbers follow
        numbers = line[brace + 1 :].split() if brace >= 0 else line.split()[1:]
    for position, token in enumerate(numbers):
        if token == "#":  # an exemplar: its own value and timestamp follow
            continue
        if not _NUMBER.fullmatch(token):
            raise ValueError(f"invalid number {token!r} (plain decimals, Inf or NaN only)")
        if position == 1 and not abs(float(token) * (1000.0 if openmetrics else 1.0)) < _MAX_MS:
            raise ValueError(f"invalid timestamp {token!r} (not a finite time)")


class _CountingLines:
    """Iterate over lines and remember how many were handed out, for error messages.

    The parsers consume their input lazily, one line at a time, so when one raises, the line
    it choked on is the last one this iterator gave it. Each line's numbers are checked on
    the way (:func:`check_numbers`), so that a bad one is refused at its own line.
    """

    def __init__(self, lines: Iterable[str], *, openmetrics: bool) -> None:
        self._lines = iter(lines)
        self._openmetrics = openmetrics
        self.count = 0

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.count += 1
        _check_numbers(line, openmetrics=self._openmetrics)
        return line


def _predicate(names: NameFilter | None, *, default: bool) -> Callable[[str], bool]:
    """``names`` as a predicate (a set of names is matched exactly)."""
    if names is None:
        return lambda _name: default
    if callable(names):
        return names
    exact = frozenset(names)
    return exact.__contains__


class _Accumulator:
    """Samples of the kept series, appended family by family into compact arrays."""

    def __init__(
        self, keep: NameFilter | None, index: NameFilter | None, default_timestamp: float
    ) -> None:
        self._keep = _predicate(keep, default=True)
        self._index = _predicate(index, default=False)
        # What to do with each sample name, decided once: keep, index, or neither.
        self._verdict: dict[str, int] = {}
        self._default = default_timestamp
        self.names: set[str] = set()
        self.timestamped = True
        self._data: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[array[float], ...]] = {}
        self._label_sets: dict[str, dict[tuple[tuple[str, str], ...], None]] = {}

    def _decide(self, name: str) -> int:
        verdict = 2 if self._keep(name) else 1 if self._index(name) else 0
        self._verdict[name] = verdict
        self.names.add(name)
        return verdict

    def add(self, family: Metric) -> None:
        for sample in family.samples:
            verdict = self._verdict.get(sample.name)
            if verdict is None:
                verdict = self._decide(sample.name)
            if verdict == 1:
                labels = tuple(sorted(sample.labels.items()))
                self._label_sets.setdefault(sample.name, {})[labels] = None
                continue
            if verdict == 0:
                continue
            if sample.timestamp is None:
                stamp = self._default
                self.timestamped = False
            else:
                stamp = float(sample.timestamp)
            key = (sample.name, tuple(sorted(sample.labels.items())))
            arrays = self._data.get(key)
            if arrays is None:
                arrays = self._data[key] = (array("d"), array("d"))
            arrays[0].append(stamp)
            arrays[1].append(float(sample.value))

    def result(self, *, source: str, openmetrics: bool) -> SeriesSet:
        grouped: dict[str, list[Series]] = {}
        first, last = math.inf, -math.inf
        for (name, labels), (stamps, values) in self._data.items():
            samples = TimeSeries.of(np.frombuffer(stamps), np.frombuffer(values))
            if len(samples):
                first = min(first, int(samples.timestamps_ms[0]) / 1000.0)
                last = max(last, int(samples.timestamps_ms[-1]) / 1000.0)
            grouped.setdefault(name, []).append(Series(name, dict(labels), samples))
        return SeriesSet(
            source=source,
            series={name: tuple(series) for name, series in grouped.items()},
            names=frozenset(self.names),
            timestamped=self.timestamped,
            openmetrics=openmetrics,
            _range=(first, last) if first <= last else None,
            label_sets={
                name: tuple(dict(labels) for labels in sets)
                for name, sets in self._label_sets.items()
            },
        )


@dataclass(frozen=True)
class _Chunk:
    """A run of input lines that the parsers can read on their own.

    Attributes:
        first_line: File line number of ``lines[0]``.
        replayed: Metadata lines (``# HELP``/``# TYPE``/``# UNIT``) of the family in progress,
            repeated in front so that the chunk's first samples keep their type.
        lines: The file's lines.
        add_eof: Whether an OpenMetrics ``# EOF`` must be appended (every chunk but the last).
    """

    first_line: int
    replayed: list[str]
    lines: list[str]
    add_eof: bool

    def text(self) -> list[str]:
        return self.replayed + self.lines + (["# EOF\n"] if self.add_eof else [])

    def file_line(self, parsed: int) -> int:
        """The file line of the ``parsed``-th line handed to the parser (1-based)."""
        within = min(max(1, parsed - len(self.replayed)), max(1, len(self.lines)))
        return self.first_line + within - 1


def _chunks(lines: Iterable[str], *, openmetrics: bool, size: int) -> Iterator[_Chunk]:
    """Cut the input into runs of about ``size`` samples, between two sample lines.

    The parsers collect a whole metric family before handing it over, and a family of a
    week's history is hundreds of thousands of samples held as Python objects (about a
    kilobyte each). Parsing chunk by chunk keeps that transient memory bounded whatever the
    window; each chunk is checked by the parser in full, so only the checks that span chunks
    (a family repeated far apart) are lost, and the samples are merged per series anyway.
    """
    meta: list[str] = []
    meta_name = ""
    chunk: list[str] = []
    replay: list[str] = []
    first = 1
    eof = False
    for number, line in enumerate(lines, start=1):
        sample = not line.startswith("#") and bool(line.strip())
        if sample and len(chunk) >= size and not eof:
            yield _Chunk(first, replay, chunk, add_eof=openmetrics)
            first, replay, chunk = number, list(meta), []
        if line.startswith(_METADATA):
            parts = line.split(None, 3)
            name = parts[2] if len(parts) > 2 else ""
            if name != meta_name:
                meta, meta_name = [], name
            meta.append(line if line.endswith("\n") else line + "\n")
        elif line.rstrip("\r\n") == "# EOF":
            eof = True
        chunk.append(line)
    yield _Chunk(first, replay, chunk, add_eof=False)


def _read(
    lines: Iterable[str],
    *,
    source: str,
    openmetrics: bool,
    keep: NameFilter | None,
    index: NameFilter | None,
    default_timestamp: float,
    chunk_size: int,
) -> SeriesSet:
    # The OpenMetrics parser has no annotations; give it the text parser's signature.
    strict_parser: Callable[[TextIO], Iterable[Metric]] = openmetrics_families
    parse = strict_parser if openmetrics else text_families
    accumulator = _Accumulator(keep, index, default_timestamp)
    for chunk in _chunks(lines, openmetrics=openmetrics, size=max(1, chunk_size)):
        counted = _CountingLines(chunk.text(), openmetrics=openmetrics)
        try:
            for family in parse(cast(TextIO, counted)):
                accumulator.add(family)
        except (ValueError, IndexError, KeyError, TypeError) as exc:
            kind = "OpenMetrics" if openmetrics else "Prometheus text format"
            raise ExpositionError(
                f"not valid {kind}: {_describe(exc)}",
                source=source,
                line=chunk.file_line(counted.count),
            ) from exc
    return accumulator.result(source=source, openmetrics=openmetrics)


def _describe(exc: Exception) -> str:
    """The parser's complaint on one line (its messages may quote the whole bad line)."""
    if not str(exc).strip():
        return f"unparsable line ({type(exc).__name__})"
    text = one_line(exc)
    return text if len(text) <= 160 else text[:157] + "..."
