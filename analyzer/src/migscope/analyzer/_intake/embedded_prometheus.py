"""Another source replayed through a real Prometheus started for the run: ``--prometheus-embedded``.

Why: the statistics of a live fleet come from PromQL; this runs the same PromQL on the demo's
or a file's history, so that the two paths can be compared on any machine with a
``prometheus`` binary. The inner source's series are written as OpenMetrics, backfilled
with ``promtool`` into a fresh TSDB (:mod:`~migscope.analyzer._intake.local_prometheus`),
and read back through :class:`~migscope.analyzer._intake.prometheus_source.PrometheusSource`.
The provenance stays the inner source's: simulated data stays simulated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from migscope.analyzer._intake.base import Origin, SeriesSource, Slices, Window
from migscope.analyzer._intake.gpu_facts import GpuFacts
from migscope.analyzer._intake.local_prometheus import LocalPrometheus, ServerStartError
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.prometheus_source import PrometheusSource
from migscope.analyzer._intake.stats_promql import snap_window
from migscope.analyzer._options import DEFAULT_TIMEOUT_SECONDS, Progress


class EmbeddedPrometheusSource:
    """``inner``'s history, backfilled into a local Prometheus and analysed through PromQL.

    Args:
        inner: The file or simulation source whose raw series are replayed.
        timeout_s: Timeout of each query to the local server.
        progress: Stage messages (backfill, server address).
    """

    def __init__(
        self,
        inner: SeriesSource,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_SECONDS,
        progress: Progress | None = None,
    ) -> None:
        self.inner = inner
        self.simulated = inner.simulated
        self.timeout_s = timeout_s
        self._progress = progress
        self._inner_window: Window | None = None
        self._server: PrometheusSource | None = None
        self._stack = contextlib.ExitStack()

    def origin(self) -> Origin:
        """The inner source's: the local server is a means, not where the data came from."""
        return self.inner.origin()

    def window(self, length_s: float, end: float | None, step_s: float) -> Window:
        """The inner source's window, on the step grid the server evaluates."""
        self._inner_window = self.inner.window(length_s, end, step_s)
        return snap_window(*self._inner_window, step_s)

    def slices(self, window: Window, step_s: float) -> Slices:
        """Backfill the inner source's series, start the server, query its statistics."""
        inner_window = self._inner_window or window
        series = self.inner.series(inner_window, step_s)
        self._say("writing the history and backfilling a local Prometheus with promtool")
        span = inner_window[1] - inner_window[0]
        try:
            local = self._stack.enter_context(LocalPrometheus(slices=series, span_seconds=span))
        except ServerStartError as exc:
            raise ServerStartError(f"embedded Prometheus: {exc}") from exc
        if local.written is not None:
            w = local.written
            self._say(f"Prometheus at {local.url}: {w.series} series, {w.samples:,} samples")
        client = PrometheusClient(local.url, timeout=self.timeout_s)
        self._server = self._stack.enter_context(PrometheusSource(client, origin=self.origin()))
        return self._server.slices(window, step_s)

    def gpus(self) -> Sequence[GpuFacts]:
        """What the inner source says of each GPU (the local server only replays its slices)."""
        return self.inner.gpus()

    def notes(self) -> Sequence[str]:
        """The inner source's notes and the local server's."""
        server = list(self._server.notes()) if self._server is not None else []
        return [*self.inner.notes(), *server]

    def _say(self, message: str) -> None:
        if self._progress is not None:
            self._progress(message)

    def __enter__(self) -> EmbeddedPrometheusSource:
        self._stack.enter_context(self.inner)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()
