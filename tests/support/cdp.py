"""Drive headless Chromium through the DevTools protocol over a pipe: no port, no package.

Why: ``--dump-dom`` and ``--screenshot`` cannot click a column or read the page's own
timings. Chromium's ``--remote-debugging-pipe`` speaks the DevTools protocol on file
descriptors 3 (commands in) and 4 (replies and events out), one JSON message per
NUL-terminated line, so the standard library is enough. The HTML report's tests use it to
sort and group tables in a real browser; ``bench/report_bench.py`` to time a page's load and
first paint.

Protocol reference: https://chromedevtools.github.io/devtools-protocol/ (Target, Page,
Runtime domains; ``flatten`` sessions).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["CHROMIUM", "Browser", "CdpError", "Page"]

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)
"""Debian's chromium (scripts/install-system-deps), or None."""


class CdpError(RuntimeError):
    """The browser answered a command with an error, or did not answer in time."""


class Browser:
    """A headless Chromium with a DevTools pipe; use as a context manager.

    Args:
        window: Viewport ``(width, height)`` in pixels.
        timeout_s: Default wait for an answer or an event.
    """

    def __init__(self, *, window: tuple[int, int] = (1280, 1000), timeout_s: float = 120.0):
        if CHROMIUM is None:
            raise CdpError("chromium is not installed")
        self.timeout_s = timeout_s
        self._profile = tempfile.mkdtemp(prefix="cdp-profile-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # bash puts the pipe ends on the descriptors Chromium reads (3) and writes (4); dash
        # cannot (it takes one-digit descriptors only, and under pytest they are larger).
        script = f'exec "$0" "$@" 3<&{to_child_r} 4>&{from_child_w}'
        self._proc = subprocess.Popen(
            [
                "bash",
                "-c",
                script,
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--window-size={window[0]},{window[1]}",
                f"--user-data-dir={self._profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            pass_fds=(to_child_r, from_child_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """End the browser and remove its profile."""
        with contextlib.suppress(CdpError, OSError):
            self.call("Browser.close", timeout_s=10)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError("no answer from the browser in time")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise CdpError("the browser closed its pipe")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Send one command and wait for its answer (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CdpError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self._events.append(reply)

    def wait_event(
        self, method: str, *, session: str | None = None, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """The first event ``method`` (of ``session``) not consumed yet."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            for i, event in enumerate(self._events):
                if event.get("method") == method and event.get("sessionId") == session:
                    del self._events[i]
                    return event
            self._events.append(self._read(deadline))

    def page(self) -> Page:
        """A new tab, attached."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        page = Page(self, str(session["sessionId"]))
        page.call("Page.enable")
        page.call("Runtime.enable")
        return page


class Page:
    """One tab of a :class:`Browser`."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """A command in this tab's session."""
        return self.browser.call(method, params, session=self.session, **kw)

    def open(self, url: str, *, timeout_s: float | None = None) -> float:
        """Navigate and wait for the load event; returns the seconds it took."""
        start = time.monotonic()
        self.call("Page.navigate", {"url": url}, timeout_s=timeout_s)
        self.browser.wait_event("Page.loadEventFired", session=self.session, timeout_s=timeout_s)
        return time.monotonic() - start

    def evaluate(self, expression: str, *, timeout_s: float | None = None) -> Any:
        """The value of a JavaScript expression (promises awaited), as JSON."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout_s=timeout_s,
        )
        if "exceptionDetails" in result:
            raise CdpError(f"script failed: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def console_errors(self) -> list[str]:
        """Exceptions thrown and console errors logged so far."""
        out = []
        for event in list(self.browser._events):
            if event.get("sessionId") != self.session:
                continue
            if event.get("method") == "Runtime.exceptionThrown":
                out.append(str(event["params"]["exceptionDetails"].get("text")))
            elif (
                event.get("method") == "Runtime.consoleAPICalled"
                and event["params"].get("type") == "error"
            ):
                out.append(str(event["params"].get("args")))
        return out
