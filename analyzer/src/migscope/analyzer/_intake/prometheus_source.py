"""A Prometheus-compatible server as a source: the server computes each slice's statistics.

Prometheus, Thanos, Mimir, Cortex and VictoriaMetrics all answer the same HTTP query API
(:mod:`~migscope.analyzer._intake.prometheus`); the window statistics are PromQL evaluated
by the server a chunk of nodes at a time, a few chunks at once
(:mod:`~migscope.analyzer._intake.stats_promql`), so the analyzer reads small results however
long the window. The window ends now unless ``--end`` says otherwise, and lies on the step
grid the server evaluates. ``--stats`` picks the exact or the fast statistics (the same
numbers at another cost, :func:`~migscope.analyzer._intake.stats_promql.evaluate.choose_mode`).

Distributed engines: a Thanos querier's ``partial_response`` and ``max_source_resolution``,
VictoriaMetrics' ``nocache``, Mimir's and Cortex's tenants reach the server as query
parameters of the URL (``?partial_response=true``) and headers; the server's warnings (a store
that did not answer) and a ``max_source_resolution`` other than raw become report notes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from migscope.analyzer._intake.base import Origin, Slices, SourceError, Window, window_ending
from migscope.analyzer._intake.gpu_facts import GpuFacts
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.stats_promql import (
    RemoteSliceStats,
    remote_slice_stats,
    snap_window,
)
from migscope.analyzer._intake.stats_promql.evaluate import DEFAULT_WORKERS
from migscope.analyzer._intake.stats_promql.gpus import remote_gpu_facts
from migscope.analyzer._intake.stats_promql.queries import Queries
from migscope.analyzer._intake.stats_promql.result import StatsMode

RAW_RESOLUTIONS = frozenset({"", "0", "0s", "0m", "0h", "raw"})
"""``max_source_resolution`` values that mean raw data (Thanos: ``0s``, the default)."""


def server_warnings(warnings: Sequence[str]) -> list[str]:
    """The server's warnings (Thanos-like stores on partial data) as report notes."""
    return [f"the server warned, so statistics may rest on partial data: {w}" for w in warnings]


def resolution_note(params: Mapping[str, str]) -> str | None:
    """A report note when the URL lets a Thanos querier answer from downsampled data.

    Why: Thanos keeps 5-minute and 1-hour downsampled blocks beside the raw ones, and
    ``max_source_resolution`` (``5m``, ``1h``, ``auto``) lets it read them where the raw
    samples are gone or the query is long. Their counts and extremes are per 5 minutes or per
    hour, not per sample: coverage, quantiles and allocation are then approximations at that
    resolution, and the report must say so. Thanos does not say which resolution it read.
    """
    value = params.get("max_source_resolution", "").strip()
    if value.lower() in RAW_RESOLUTIONS:
        return None
    return (
        f"the server was allowed to answer from data downsampled to {value} "
        "(Thanos max_source_resolution): where it did, step counts and quantiles are at that "
        "resolution, not per sample; use max_source_resolution=0s for raw data"
    )


class PrometheusSource:
    """The slices a Prometheus-compatible server holds (``--prometheus URL``).

    Args:
        client: The server's client; entered and closed with the source.
        origin: Where the data came from, when the server only replays another source's
            (the embedded Prometheus); the server's URL otherwise.
        stats: ``exact``, ``fast`` or ``auto`` (``--stats``; see
            :func:`~migscope.analyzer._intake.stats_promql.evaluate.choose_mode`).
        workers: Chunks of nodes queried at once.
    """

    simulated = False

    def __init__(
        self,
        client: PrometheusClient,
        *,
        origin: Origin | None = None,
        stats: StatsMode = "auto",
        workers: int = DEFAULT_WORKERS,
    ) -> None:
        self.client = client
        self._origin = origin
        self._stats: StatsMode = stats
        self._workers = workers
        self._run: RemoteSliceStats | None = None
        self._step_s = 0.0

    def origin(self) -> Origin:
        """``{"kind": "prometheus", "url": ...}``: the base URL, credentials removed."""
        if self._origin is not None:
            return dict(self._origin)
        return {"kind": "prometheus", "url": self.client.base_url.rstrip("/")}

    def window(self, length_s: float, end: float | None, step_s: float) -> Window:
        """``length_s`` ending at ``end`` (default: now), on the server's step grid."""
        start, stop = window_ending(time.time() if end is None else end, length_s)
        try:
            return snap_window(start, stop, step_s)
        except ValueError as exc:
            raise SourceError(str(exc)) from exc

    def slices(self, window: Window, step_s: float) -> Slices:
        """Every slice's statistics, evaluated by the server a chunk of nodes at a time."""
        self._run = remote_slice_stats(
            self.client,
            start=window[0],
            end=window[1],
            step=step_s,
            stats=self._stats,
            workers=self._workers,
        )
        self._step_s = step_s
        return self._run

    def gpus(self) -> Sequence[GpuFacts]:
        """Each GPU of the window's nodes: model, driver, the profile table it published."""
        if self._run is None:
            return []
        queries = Queries(self.client, self._run, step=self._step_s, period=None)
        facts = remote_gpu_facts(queries)
        self._run.merge(queries.ledger)
        return facts

    def notes(self) -> Sequence[str]:
        """What the statistics could not see, the server's partial-data warnings, resolution."""
        found = list(self._run.notes) if self._run is not None else []
        resolution = resolution_note(self.client.params)
        return [
            *found,
            *server_warnings(self.client.warnings),
            *([resolution] if resolution is not None else []),
        ]

    def __enter__(self) -> PrometheusSource:
        self.client.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.client.__exit__(*exc_info)
