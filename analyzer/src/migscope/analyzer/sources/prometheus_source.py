"""A Prometheus-compatible server as a source: the server computes each slice's statistics.

Prometheus, Thanos, Mimir, Cortex and VictoriaMetrics all answer the same HTTP query API
(:mod:`~migscope.analyzer.sources.prometheus`); the window statistics are PromQL evaluated
by the server a chunk of nodes at a time (:mod:`~migscope.analyzer.sources.remote_stats`),
so the analyzer reads small results however long the window. The window ends now unless
``--end`` says otherwise, and lies on the step grid the server evaluates.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from migscope.analyzer.gpu_facts import GpuFacts
from migscope.analyzer.sources.base import Origin, Slices, SourceError, Window, window_ending
from migscope.analyzer.sources.prometheus import PrometheusClient
from migscope.analyzer.sources.remote_stats import (
    RemoteSliceStats,
    remote_slice_stats,
    snap_window,
)
from migscope.analyzer.sources.remote_stats.gpus import remote_gpu_facts
from migscope.analyzer.sources.remote_stats.queries import Queries

__all__ = ["PrometheusSource", "server_warnings"]


def server_warnings(warnings: Sequence[str]) -> list[str]:
    """The server's warnings (Thanos-like stores on partial data) as report notes."""
    return [f"the server warned, so statistics may rest on partial data: {w}" for w in warnings]


class PrometheusSource:
    """The slices a Prometheus-compatible server holds (``--prometheus URL``).

    Args:
        client: The server's client; entered and closed with the source.
        origin: Where the data came from, when the server only replays another source's
            (the embedded Prometheus); the server's URL otherwise.
    """

    simulated = False

    def __init__(self, client: PrometheusClient, *, origin: Origin | None = None) -> None:
        self.client = client
        self._origin = origin
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
        self._run = remote_slice_stats(self.client, start=window[0], end=window[1], step=step_s)
        self._step_s = step_s
        return self._run

    def gpus(self) -> Sequence[GpuFacts]:
        """Each GPU of the window's nodes: model, driver, the profile table it published."""
        if self._run is None:
            return []
        return remote_gpu_facts(Queries(self.client, self._run, step=self._step_s, period=None))

    def notes(self) -> Sequence[str]:
        """What the statistics could not see, and the server's partial-data warnings."""
        found = list(self._run.notes) if self._run is not None else []
        return [*found, *server_warnings(self.client.warnings)]

    def __enter__(self) -> PrometheusSource:
        self.client.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.client.__exit__(*exc_info)
