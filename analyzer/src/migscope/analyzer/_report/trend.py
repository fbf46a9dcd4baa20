"""The waste trend: earlier runs' headline numbers, read from the reports they left behind.

Why from files and not a database or a server: the weekly report job already keeps its
earlier runs (``<dir>/<UTC time>/report.json``: the Helm CronJob's ``$REPORT_DIR`` and
``migscope schedule``'s ``out_dir``, with ``latest`` pointing at the newest), so the trend
needs nothing else. ``--previous-reports DIR`` reads them; each becomes one
:class:`~migscope.core._spec.v1.TrendPointV1` in the new report's ``trend``.

Only ``window``, ``summary``, ``savings`` and ``provenance`` of each file are read, and each
is checked against the report contract and then number by number (:func:`_check_numbers`):
every number read must be a JSON number, finite, not below zero, and still a number when a
GPU-hour total is scaled to a week. Why the second check (issue 20): Python's ``json`` reads
``NaN``, ``Infinity`` and ``-Infinity`` (and ``1e999`` as infinity), the contract's lax
floats accept them and even the text ``"NaN"``, and one such earlier report crashed every
later run when its point was written into the new report.json (JSON has no word for them).
A file that cannot be read, is not JSON, does not follow the contract or holds a number that
cannot be used is left out with a note, and a directory that cannot be read gives no trend
and a note: the trend is context, it never stops a report (the first run of a fresh volume,
or a command line copied from the chart to a laptop, still reports). Each run counts once:
``latest`` (a link to a run, or its copy where the volume refuses links), hidden entries
(``.latest-new-*``, a swap in progress) and links to a directory already read are skipped.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from migscope.core import (
    REPORT_FILE,
    MigscopeError,
    ProvenanceV1,
    ReportV1,
    SavingsV1,
    TrendPointV1,
    WindowV1,
)

WEEK_HOURS = 168.0

MAX_TREND_RUNS = 52
"""Earlier runs kept in a trend: a year of weekly reports (the chart stays readable)."""
LATEST = "latest"
"""The name of the link (or copy) that shows the newest good run: never a run of its own."""


@dataclass(frozen=True)
class Trend:
    """Earlier runs, oldest first, and what could not be read.

    Attributes:
        points: One entry per earlier report (``TrendPointV1`` fields).
        notes: One sentence per file left out, for the report's notes.
    """

    points: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()


class UnusableReport(MigscopeError, ValueError):
    """A report.json that parses, but is not one the trend can use (the message says why)."""


def per_week(gpu_hours: float, window_hours: float) -> float:
    """GPU-hours over a window as GPU-hours per week of window (0 for an empty window)."""
    return gpu_hours * WEEK_HOURS / window_hours if window_hours > 0 else 0.0


@dataclass(frozen=True)
class WasteChange:
    """Wasted GPU-hours now against the previous run (what both report formats headline).

    Attributes:
        now: This run's wasted GPU-hours (per week when ``weekly``).
        before: The previous run's, likewise.
        weekly: The two windows differ in length, so both are scaled to a week.
        before_end: The end of the previous run's window (ISO 8601, UTC).
    """

    now: float
    before: float
    weekly: bool
    before_end: str

    @property
    def delta(self) -> float:
        """Now less before: negative when the waste went down."""
        return self.now - self.before

    @property
    def share(self) -> float | None:
        """The change as a share of before, None when before was 0."""
        return self.delta / self.before if self.before else None


def waste_change(report: ReportV1) -> WasteChange | None:
    """How the waste moved since the previous run in ``report.trend`` (None without one)."""
    if not report.trend:
        return None
    before = report.trend[-1]
    now, then = report.savings.wasted_gpu_hours, before.wasted_gpu_hours
    weekly = round(before.window_hours, 1) != round(report.window.hours, 1)
    if weekly:
        now = per_week(now, report.window.hours)
        then = per_week(then, before.window_hours)
    return WasteChange(now, then, weekly, before.window_end)


def read_trend(
    folder: str | os.PathLike[str],
    *,
    exclude: Sequence[str | os.PathLike[str]] = (),
    limit: int = MAX_TREND_RUNS,
) -> Trend:
    """Read ``<folder>/*/report.json`` into trend points, oldest window first.

    Args:
        folder: The directory of earlier runs.
        exclude: Directories to skip (the run being written now).
        limit: Keep the newest this many.

    Returns:
        The points, and a note per file left out (one note and no points when ``folder``
        cannot be read).
    """
    root = Path(folder)
    try:
        entries = sorted(root.iterdir())
    except OSError as exc:
        return Trend((), (f"trend: {folder}: {exc.strerror or exc}: no earlier runs read",))
    seen = {_real(Path(p)) for p in exclude}
    points: list[dict[str, Any]] = []
    notes: list[str] = []
    for entry in entries:
        path = entry / REPORT_FILE
        real = _real(entry)
        if entry.name.startswith(".") or entry.name == LATEST or real in seen:
            continue
        seen.add(real)
        if not path.is_file():
            continue
        try:
            points.append(_point(entry.name, path))
        except (OSError, ValueError, ValidationError, RecursionError) as exc:
            notes.append(f"trend: {path} left out: {_why(exc)}")
    ordered = sorted(points, key=lambda p: (p["window_end_unix"], p["created"] or "", p["run"]))
    return Trend(tuple(ordered[-limit:] if limit > 0 else ()), tuple(notes))


def _real(path: Path) -> str:
    return os.path.realpath(path)


def _why(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"not a migscope report ({where}: {first['msg']})"
    if isinstance(exc, OSError):
        return str(exc.strerror or exc)
    if isinstance(exc, UnusableReport):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "not JSON (nested too deeply)"
    return f"not JSON ({exc})"


def _point(run: str, path: Path) -> dict[str, Any]:
    """One report's trend point (its parts checked against the report contract)."""
    with path.open(encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("schema_version") != 1:
        raise UnusableReport("not schema_version 1 of a migscope report")
    window = WindowV1.model_validate(data.get("window"))
    savings = SavingsV1.model_validate(data.get("savings"))
    _check_numbers(data["window"], data["savings"])
    summary = data.get("summary")
    slices = summary.get("slices") if isinstance(summary, dict) else None
    raw_provenance = data.get("provenance")
    provenance = ProvenanceV1.model_validate(raw_provenance) if raw_provenance is not None else None
    point = TrendPointV1(
        run=run,
        created=provenance.created if provenance is not None else None,
        window_start=window.start,
        window_end=window.end,
        window_end_unix=window.end_unix,
        window_hours=window.hours,
        slices=slices if isinstance(slices, int) and not isinstance(slices, bool) else None,
        idle_slices=savings.idle_slices,
        unallocated_slices=savings.unallocated_slices,
        oversized_slices=savings.oversized_slices,
        wasted_gpu_hours=savings.wasted_gpu_hours,
        idle_gpu_hours=savings.idle_gpu_hours,
        unallocated_gpu_hours=savings.unallocated_gpu_hours,
        oversized_gpu_hours=savings.oversized_gpu_hours,
        gpus_freed=savings.gpus_freed,
        gpu_hours_freed=savings.gpu_hours_freed,
        price_per_gpu_hour=savings.price_per_gpu_hour,
        wasted_cost=savings.wasted_cost,
        simulated=provenance.simulated if provenance is not None else None,
        by_namespace={r.namespace: r.wasted_gpu_hours for r in savings.by_namespace},
    )
    return point.model_dump()


_WINDOW_NUMBERS = ("end_unix", "hours")
_SAVINGS_NUMBERS = (
    "idle_slices",
    "unallocated_slices",
    "oversized_slices",
    "gpus_freed",
    "gpu_hours_freed",
    "wasted_gpu_hours",
    "idle_gpu_hours",
    "unallocated_gpu_hours",
    "oversized_gpu_hours",
    "price_per_gpu_hour",
    "wasted_cost",
)
_WEEKLY = ("wasted_gpu_hours", "idle_gpu_hours", "unallocated_gpu_hours", "oversized_gpu_hours")
"""The totals the report scales to a week when window lengths differ (:func:`waste_change`)."""


def _check_numbers(window: dict[str, Any], savings: dict[str, Any]) -> None:
    """Refuse the numbers a trend point takes that are no usable number (module docstring).

    Called after the contract's check, on the raw JSON (the contract's floats are lax: they
    take ``"12"``, ``true`` and ``"NaN"``). Absent and null optional values pass.

    Raises:
        UnusableReport: which value, and what it is.
    """
    values: list[tuple[str, object]] = [(f"window.{k}", window.get(k)) for k in _WINDOW_NUMBERS]
    values += [(f"savings.{k}", savings.get(k)) for k in _SAVINGS_NUMBERS]
    values += [
        (f"savings.by_namespace[{i}].wasted_gpu_hours", row.get("wasted_gpu_hours"))
        for i, row in enumerate(savings.get("by_namespace") or ())
        if isinstance(row, dict)
    ]
    for where, value in values:
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UnusableReport(f"{where} is not a number ({json.dumps(value)[:40]})")
        if not math.isfinite(value):
            raise UnusableReport(f"{where} is {json.dumps(value)}, not a finite number")
        if value < 0:
            raise UnusableReport(f"{where} is {value!r}, below zero")
    hours = window["hours"]
    for key in _WEEKLY:
        value = savings.get(key)
        if value is not None and not math.isfinite(per_week(value, hours)):
            raise UnusableReport(
                f"savings.{key} per week is beyond a number ({value!r} GPU-hours in {hours!r} h)"
            )
