"""``run(source, options)``: one analysis from any source, the way every entry point starts one.

The CLI's ``analyze`` and ``demo`` (and through them the scheduler's runs, which are ``migscope
analyze`` child processes) call this and nothing else: the source says which window and
which slices (:class:`~migscope.analyzer._intake.base.Source`), the options say how to judge
and plan them (:class:`~migscope.analyzer._options.AnalyzeOptions`), and the result carries
its provenance, which the applier checks before it touches a cluster.
"""

from __future__ import annotations

import dataclasses
import time

from migscope.analyzer._intake.base import Origin, Source, SourceError, Window
from migscope.analyzer._intake.gpu_catalogue import choose_catalogue
from migscope.analyzer._judge.workloads import advise
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._result import AnalysisResult, iso_utc


class NothingInWindowError(SourceError):
    """The source holds no MIG sample in the window (the message says what to check)."""


def run(source: Source, options: AnalyzeOptions | None = None) -> AnalysisResult:
    """Analyse ``source`` as ``options`` say.

    The catalogue planned with is chosen from what the source says of each GPU
    (:func:`~migscope.analyzer._intake.gpu_catalogue.choose_catalogue`: a GPU's own profile table
    wins
    over the built-in one), and the report's ``provenance.catalogue`` says which was used.

    Raises:
        UserError: the source cannot be read, holds nothing in the window, or an option
            does not fit it (subclasses say which; the CLI prints one line).
    """
    options = options or AnalyzeOptions()
    with source:
        window = source.window(options.window_s, options.end, options.step_s)
        slices = source.slices(window, options.step_s)
        gpus = choose_catalogue(source.gpus())
        result = analyze(slices, window=window, options=options, gpus=gpus)
        notes = [*source.notes(), *options.pending_notes]
        if options.owners is not None and result.workloads is not None:
            found = options.owners(*_fleet_pods(result), window)
            result = dataclasses.replace(result, workloads=advise(result.slices, found))
            notes += found.notes
    if notes:
        result = dataclasses.replace(result, notes=(*result.notes, *notes))
    if not any(s.stats.samples for s in result.slices):
        raise NothingInWindowError(_nothing_in_window(window, options.end))
    made = provenance(source.origin(), source.simulated)
    made["catalogue"] = dict(sorted(gpus.used.items()))
    return dataclasses.replace(result, provenance=made)


def _fleet_pods(result: AnalysisResult) -> tuple[list[tuple[str, str]], list[str]]:
    """The pods seen on the current slices, and the nodes: what an owner lookup reads."""
    current = [s for s in result.slices if s.current]
    pods = {(o.namespace, o.pod) for s in current for o in s.stats.owners if o.pod}
    return sorted(pods), sorted({s.stats.info.key.node for s in current})


def provenance(origin: Origin, simulated: bool) -> dict[str, object]:
    """Where a report's data came from and when it was made (report ``provenance``).

    Why: a plan is only as good as its data. The applier refuses plans from simulated data
    (they must never reach a cluster) and plans older than its limit, and a reader of an old
    report can tell what it rests on.
    """
    now = time.time()
    return {
        "source": dict(origin),
        "simulated": simulated,
        "created": iso_utc(now),
        "created_unix": round(now, 3),
    }


def _nothing_in_window(window: Window, end: float | None) -> str:
    """Why there is nothing to report, and what to try (not "no MIG series" when it is time)."""
    span = f"{iso_utc(window[0])} .. {iso_utc(window[1])}"
    if end is not None:
        return f"no MIG samples in the window {span}: is --end right?"
    return (
        f"no MIG samples in the window {span}: the exporter may not have been scraped yet "
        "(a new install needs a scrape or two), or the series are named differently"
    )
