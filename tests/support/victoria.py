"""A real single-node VictoriaMetrics for tests: the second PromQL engine.

VictoriaMetrics speaks the Prometheus query API but its MetricsQL differs in corners (NaN
handling, rounding of range-query grids, error types), which is why the analyzer's queries are
run against both engines. Debian's ``victoria-metrics`` package (v1.79) provides the binary.

History is loaded after the start through ``POST /api/v1/import/prometheus`` (the Prometheus
text format with millisecond timestamps), then ``GET /internal/force_flush`` makes the
buffered rows searchable at once (VictoriaMetrics otherwise flushes them within about a
second; the handler exists for tests, VictoriaMetrics PR #893 and issue #2061). Samples
within ``-search.latencyOffset`` (30 s) of "now" stay hidden from queries, so test history
should end at least a minute ago.

Usage::

    with VictoriaServer(history) as vm:
        client = PrometheusClient(vm.url)
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence

import httpx
import pytest

from support.prometheus import History, ManagedServer, ServerStartError, iter_import_lines

__all__ = ["VictoriaServer", "requires_victoria"]

#: Skip marker for tests that need the real VictoriaMetrics.
requires_victoria = pytest.mark.skipif(
    shutil.which("victoria-metrics") is None,
    reason="victoria-metrics not installed (Debian package 'victoria-metrics'; "
    "scripts/install-system-deps installs it)",
)


class VictoriaServer(ManagedServer):
    """A real VictoriaMetrics with history imported after the start.

    Args:
        history: Series to import once the server is ready.
        retention: ``-retentionPeriod``; samples older than it are rejected on import.
        path_prefix: Serve under this path (``-http.pathPrefix``), as a vmselect behind a
            proxy would be; :attr:`url` includes it.
        extra_args: More flags (``-search.disableCache``, ``-search.latencyOffset=1s``, ...).
        startup_timeout: Seconds to wait for ``/health``.
    """

    name = "victoria-metrics"
    ready_path = "/health"

    def __init__(
        self,
        history: History = (),
        *,
        retention: str = "100y",
        path_prefix: str = "",
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
    ) -> None:
        super().__init__(startup_timeout=startup_timeout)
        self.prefix = "/" + path_prefix.strip("/") if path_prefix.strip("/") else ""
        self._history = list(history)
        self.retention = retention
        self.extra_args = list(extra_args)
        self.samples_loaded = 0

    def __enter__(self) -> VictoriaServer:
        self.start()
        return self

    def command(self, port: int) -> list[str]:
        """``victoria-metrics`` on ``port`` with the temporary data dir."""
        return [
            "victoria-metrics",
            f"-storageDataPath={self.data_dir}",
            f"-httpListenAddr=127.0.0.1:{port}",
            f"-retentionPeriod={self.retention}",
            *([f"-http.pathPrefix={self.prefix}"] if self.prefix else []),
            *self.extra_args,
        ]

    def after_start(self) -> None:
        """Import the history given to the constructor."""
        if self._history:
            self.load(self._history)

    def load(self, history: History) -> int:
        """Import more history and flush it so the next query sees it.

        Returns:
            The number of samples sent.
        """
        count = 0

        def body() -> Iterator[bytes]:
            nonlocal count
            batch: list[str] = []
            for line in iter_import_lines(history):
                batch.append(line)
                if len(batch) >= 10_000:
                    count += len(batch)
                    yield "".join(batch).encode()
                    batch.clear()
            count += len(batch)
            yield "".join(batch).encode()

        with httpx.Client(base_url=self.url, timeout=60.0, trust_env=False, verify=False) as http:
            response = http.post("/api/v1/import/prometheus", content=body())
            if response.status_code != 204:
                raise ServerStartError(
                    f"VictoriaMetrics refused the import (HTTP {response.status_code}): "
                    f"{response.text[:500]}"
                )
            self.flush(http)
        self.samples_loaded += count
        return count

    def flush(self, http: httpx.Client | None = None) -> None:
        """Make recently imported rows searchable (``/internal/force_flush``)."""
        if http is None:
            with httpx.Client(base_url=self.url, timeout=30.0, trust_env=False) as own:
                self.flush(own)
            return
        response = http.get("/internal/force_flush")
        if response.status_code != 200:
            raise ServerStartError(
                f"VictoriaMetrics force_flush failed (HTTP {response.status_code}): "
                f"{response.text[:500]}"
            )
