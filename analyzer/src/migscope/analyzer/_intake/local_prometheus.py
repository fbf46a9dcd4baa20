"""A real Prometheus on this machine: backfilled from a file, on a free loopback port.

``--prometheus-embedded`` answers "what would the report look like through our Prometheus?"
without one: the simulated (or recorded) history is written as OpenMetrics, loaded with
``promtool tsdb create-blocks-from openmetrics`` into a temporary data directory, and a
``prometheus`` process serves it on ``127.0.0.1`` until the analysis is done. The analysis
then runs exactly as against production, through the HTTP API and PromQL.

Backfill cost: promtool re-reads its input once per block, so blocks are made as long as the
history (``--max-block-duration``); with the default 2 h blocks a week takes ~20× longer.

:class:`ManagedServer` is the process handling this needs (free port, readiness, log,
SIGTERM then SIGKILL, cleanup); the test suite reuses it for its Prometheus and
VictoriaMetrics peers.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

import httpx

from migscope.analyzer._intake.backfill import HistoryWritten, write_openmetrics
from migscope.analyzer._intake.dialect import Dialect
from migscope.analyzer._intake.stats_local import SliceSeries
from migscope.core import UserError


class ServerStartError(UserError):
    """The server (or promtool) did not come up; the message carries its log."""


class MissingBinaryError(ServerStartError):
    """``prometheus`` or ``promtool`` is not on the PATH."""


def _excerpt(text: str, keep: int = 2500) -> str:
    # The cause is usually near the top (a bad flag, before the usage text) or at the end.
    if len(text) <= 2 * keep:
        return text
    return f"{text[:keep]}\n[... {len(text) - 2 * keep} characters ...]\n{text[-keep:]}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS just handed out (bind port 0, then release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ManagedServer:
    """A server binary on a free loopback port with a temporary data dir and a log file.

    Subclasses give the command line, the readiness path and any loading before or after the
    start. Stopping terminates the process (SIGTERM, then SIGKILL after 10 s), waits for it,
    closes the log and removes the temporary directory.
    """

    name = "server"
    ready_path = "/"

    def __init__(self, *, startup_timeout: float = 30.0) -> None:
        self.startup_timeout = startup_timeout
        self.port = 0
        #: A path prefix the server serves under ("/prom"); part of :attr:`url`.
        self.prefix = ""
        self.scheme = "http"
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    # -- for subclasses ------------------------------------------------------------------------

    def command(self, port: int) -> list[str]:
        """The command line to start the server on ``port``."""
        raise NotImplementedError

    def before_start(self) -> None:
        """Runs once, after the directories exist and before the first start attempt."""

    def after_start(self) -> None:
        """Runs once the server is ready."""

    # -- paths ---------------------------------------------------------------------------------

    @property
    def root(self) -> Path:
        """The temporary directory holding data, config and log."""
        if self._tmp is None:
            raise RuntimeError(f"{self.name} is not started")
        return Path(self._tmp.name)

    @property
    def data_dir(self) -> Path:
        """The server's storage directory."""
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        """Where the server's stdout and stderr go."""
        return self.root / f"{self.name}.log"

    @property
    def root_url(self) -> str:
        """The server's root, e.g. ``http://127.0.0.1:41234``, without the path prefix."""
        if not self.port:
            raise RuntimeError(f"{self.name} is not started")
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The base URL for an API client: the root plus the path prefix, if any."""
        return self.root_url + self.prefix

    def log_text(self) -> str:
        """The log so far (for failure messages)."""
        try:
            return self.log_path.read_text(errors="replace")
        except (OSError, RuntimeError):
            return ""

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ManagedServer:
        """Start and wait until ready; on failure stop everything and raise ServerStartError."""
        self._tmp = tempfile.TemporaryDirectory(prefix=f"migscope-{self.name}-")
        try:
            self.data_dir.mkdir()
            self.before_start()
            for attempt in range(3):
                self.port = free_port()
                if self._launch():
                    break
                # Another process took the port between bind(0) and the server's bind: retry.
                if "address already in use" not in self.log_text() or attempt == 2:
                    raise ServerStartError(
                        f"{self.name} did not become ready on {self.url}: "
                        f"{self._exit_note()}\n--- {self.log_path.name} ---\n"
                        f"{_excerpt(self.log_text())}"
                    )
            self.after_start()
        except BaseException:
            self.stop()
            raise
        return self

    def _exit_note(self) -> str:
        code = self._proc.poll() if self._proc is not None else None
        return f"exited with {code}" if code is not None else "timed out"

    def _launch(self) -> bool:
        self._terminate()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _terminate
        self._proc = subprocess.Popen(
            self.command(self.port),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.root,
        )
        deadline = time.monotonic() + self.startup_timeout
        # Readiness only: certificates are checked by the tests, and 401 means "up, with auth".
        with httpx.Client(timeout=2.0, trust_env=False, verify=False) as http:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    return False
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(self.url + self.ready_path).status_code in (200, 401):
                        return True
                time.sleep(0.05)
        return False

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            else:
                proc.wait()
        log, self._log = self._log, None
        if log is not None:
            log.close()

    def stop(self) -> None:
        """Stop the server and delete its directory (idempotent)."""
        self._terminate()
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            tmp.cleanup()
        self.port = 0

    def __enter__(self) -> ManagedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def block_duration(span_seconds: float) -> str:
    """The ``--max-block-duration`` promtool needs for history spanning ``span_seconds``.

    One block per history (rounded up to whole 2 h, Prometheus's block grid, plus 2 h
    because promtool aligns blocks to multiples of their duration): promtool reads its input
    once per block, so fewer blocks is what makes a week's backfill take seconds.
    """
    hours = max(2, 2 * math.ceil(max(0.0, span_seconds) / 7200.0) + 2)
    return f"{hours}h"


class LocalPrometheus(ManagedServer):
    """A ``prometheus`` process serving history backfilled from an OpenMetrics file.

    Args:
        openmetrics: An OpenMetrics file (``# EOF`` last) to backfill, or None.
        slices: Or slices to write as history first (see :mod:`migscope.analyzer._intake.backfill`),
            in ``dialect``; :attr:`written` says how much. With neither the server is empty.
        dialect: Whose series to write ``slices`` as.
        span_seconds: How much time the file covers (sets the block duration).
        retention: ``--storage.tsdb.retention.time``; long enough that no backfilled block
            is deleted as too old.
        extra_args: More ``prometheus`` flags (e.g. ``--query.max-samples=...``).
        startup_timeout: Seconds to wait for ``/-/ready``.

    Raises (from :meth:`start`):
        MissingBinaryError: ``prometheus`` or ``promtool`` is not installed.
        ServerStartError: promtool rejected the file, or the server did not become ready.
    """

    name = "prometheus"
    ready_path = "/-/ready"

    def __init__(
        self,
        openmetrics: str | Path | None = None,
        *,
        slices: Iterable[SliceSeries] | None = None,
        dialect: Dialect = Dialect.MIGSCOPE,
        span_seconds: float = 7 * 86400.0,
        retention: str = "3650d",
        extra_args: Sequence[str] = (),
        startup_timeout: float = 60.0,
    ) -> None:
        super().__init__(startup_timeout=startup_timeout)
        self.openmetrics = Path(openmetrics) if openmetrics is not None else None
        self.slices = slices
        self.dialect = dialect
        self.written: HistoryWritten | None = None
        self.span_seconds = span_seconds
        self.retention = retention
        self.extra_args = list(extra_args)

    def __enter__(self) -> LocalPrometheus:
        self.start()
        return self

    def config_lines(self) -> list[str]:
        """``prometheus.yml``: nothing to scrape, the history is all there is."""
        return ["global:", "  scrape_interval: 1m", "scrape_configs: []"]

    def before_start(self) -> None:
        """Check the binaries, write the config and backfill the file with promtool."""
        missing = [b for b in ("prometheus", "promtool") if shutil.which(b) is None]
        if missing:
            raise MissingBinaryError(
                f"{' and '.join(missing)} not found on PATH: install Prometheus (Debian/Ubuntu: "
                "apt-get install prometheus) or run without --prometheus-embedded"
            )
        (self.root / "prometheus.yml").write_text("\n".join(self.config_lines()) + "\n")
        if self.slices is not None and self.openmetrics is None:
            self.openmetrics = self.root / "history.om"
            with open(self.openmetrics, "w", encoding="utf-8") as out:
                self.written = write_openmetrics(self.slices, out, dialect=self.dialect)
        if self.openmetrics is not None:
            self.backfill(self.openmetrics)

    def backfill(self, source: Path) -> None:
        """Load ``source`` into the data directory as TSDB blocks."""
        result = subprocess.run(
            [
                "promtool",
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                f"--max-block-duration={block_duration(self.span_seconds)}",
                str(source),
                str(self.data_dir),
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=self.root,
        )
        if result.returncode != 0:
            raise ServerStartError(
                f"promtool could not backfill {source.name} (exit {result.returncode}):\n"
                f"{_excerpt(result.stdout + result.stderr)}"
            )

    def command(self, port: int) -> list[str]:
        """``prometheus`` on ``port`` with the temporary config and data dir."""
        return [
            "prometheus",
            f"--config.file={self.root / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--storage.tsdb.retention.time={self.retention}",
            f"--web.listen-address=127.0.0.1:{port}",
            *self.extra_args,
        ]
