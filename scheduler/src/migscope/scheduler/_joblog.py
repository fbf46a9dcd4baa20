"""The scheduler's log: one JSON object per line on stderr, and its timestamps.

Why JSON lines: a scheduler runs unattended in a pod, and log pipelines (Loki,
Elasticsearch, ``kubectl logs | jq``) filter by job and event without parsing free text.
State changes, each line a child printed, results and the webhook's fate all go here;
APScheduler's own errors are routed here too (:func:`apscheduler_logs_to`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import IO

from migscope.core import redact_data


class JsonLog:
    """One JSON object per line (``ts``, ``level``, ``event``, ``job``, ...), thread-safe.

    Lines rather than free text because a scheduler runs unattended in a pod: log pipelines
    (Loki, Elasticsearch, ``kubectl logs | jq``) filter by job and event without parsing.
    Every field is redacted (:func:`migscope.core._redaction.redact_data`) on its way out, so
    that no line carries a credential whichever code wrote it; callers with a command line
    redact it as one (``redact_argv``), which knows that a ``--header``'s value follows it.

    Args:
        stream: Where to write; None: ``sys.stderr`` at the time of each line.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def __call__(
        self, event: str, *, level: str = "info", job: str | None = None, **fields: object
    ) -> None:
        """Write one line."""
        record: dict[str, object] = {"ts": iso_utc(utc_now()), "level": level, "event": event}
        if job is not None:
            record["job"] = job
        record.update(redact_data(fields))
        line = json.dumps(record, default=str, ensure_ascii=False)
        stream = self._stream or sys.stderr
        with self._lock, contextlib.suppress(OSError, ValueError):
            stream.write(line + "\n")
            stream.flush()


class _JsonLogHandler(logging.Handler):
    """APScheduler's own log records as JSON lines (only errors: we log its events)."""

    def __init__(self, log: JsonLog) -> None:
        super().__init__(level=logging.ERROR)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        self._log(
            "scheduler_error",
            level="error",
            logger=record.name,
            message=record.getMessage(),
            error=repr(error) if error is not None else None,
        )


@contextlib.contextmanager
def apscheduler_logs_to(log: JsonLog) -> Iterator[None]:
    """Send APScheduler's error records to ``log`` while the block runs, then restore them."""
    logger = logging.getLogger("apscheduler")
    saved = (logger.level, logger.propagate, list(logger.handlers))
    handler = _JsonLogHandler(log)
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        logger.handlers = saved[2]


def utc_now() -> datetime:
    """Now, in UTC."""
    return datetime.now(timezone.utc)


def iso_utc(moment: datetime) -> str:
    """UTC with milliseconds and ``Z``: sorts as text and parses everywhere."""
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
