"""The webhook: a JSON POST after every run, retried, logged, never failing the run.

Why it never raises: a chat or alerting endpoint that is down must not turn a good report
into a failed run, nor stop the scheduler; what happened to the POST is in the JSON log
(``webhook_sent``, ``webhook_retry``, ``webhook_failed``) instead.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from migscope.core import redact_data, redact_text
from migscope.scheduler._joblog import JsonLog

WEBHOOK_ATTEMPTS = 3
WEBHOOK_TIMEOUT_SECONDS = 10.0


def _version() -> str:
    try:
        return metadata.version("migscope-scheduler")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


def send_webhook(
    url: str,
    payload: Mapping[str, Any],
    *,
    log: JsonLog,
    job: str,
    token_file: str | None = None,
    attempts: int = WEBHOOK_ATTEMPTS,
    backoff_s: float = 0.5,
    timeout_s: float = WEBHOOK_TIMEOUT_SECONDS,
) -> bool:
    """POST ``payload`` as JSON; retry network errors, 408, 429 and 5xx; log, never raise.

    The URL itself is never logged (only its host): chat webhooks carry their secret in the
    path. The body is redacted (:func:`migscope.core._redaction.redact_data`): it quotes the
    child's output, which may show a credential.

    Args:
        url: Where to POST.
        payload: The JSON body (:meth:`RunResult.payload`).
        log: Where the outcome goes.
        job: The job's name, for the log.
        token_file: File holding a bearer token, read on every call (rotated secrets).
        attempts: How many times to try in all.
        backoff_s: Wait before the first retry; it doubles with each retry.
        timeout_s: Time limit of each attempt.

    Returns:
        Whether the server took it.
    """
    host = urlsplit(url).hostname
    body = redact_data(payload)
    headers = {"User-Agent": f"migscope/{_version()}"}
    if token_file is not None:
        try:
            headers["Authorization"] = f"Bearer {Path(token_file).read_text('utf-8').strip()}"
        except (OSError, UnicodeDecodeError) as exc:
            reason = f"{token_file}: {getattr(exc, 'strerror', None) or exc}"
            log("webhook_failed", level="error", job=job, host=host, reason=reason, attempts=0)
            return False
    problem = "not sent"
    attempt = 0
    with httpx.Client(timeout=timeout_s, follow_redirects=False) as client:
        for attempt in range(1, attempts + 1):
            try:
                response = client.post(url, json=body, headers=headers)
            except httpx.HTTPError as exc:
                # httpx may quote the URL (the secret in a chat webhook's path): the host only.
                reason = str(exc).replace(url, host or "the webhook")
                problem, retry = f"{type(exc).__name__}: {redact_text(reason)}", True
            else:
                if response.is_success:
                    log(
                        "webhook_sent",
                        job=job,
                        host=host,
                        status_code=response.status_code,
                        attempts=attempt,
                    )
                    return True
                code = response.status_code
                problem, retry = f"HTTP {code}", code >= 500 or code in (408, 429)
            if not retry or attempt == attempts:
                break
            log("webhook_retry", level="warning", job=job, host=host, reason=problem)
            time.sleep(backoff_s * 2 ** (attempt - 1))
    log("webhook_failed", level="error", job=job, host=host, reason=problem, attempts=attempt)
    return False
