"""Fault injection for the API test server (test fake): how real apiservers fail clients.

A healthy fake never produces the failures an applier must survive, so tests add rules.
A rule matches requests by method, a regular expression searched in the URL path, and
optionally whether the request is a watch; it can skip the first N matches, apply only
``times`` times, or with a ``probability`` drawn from a seeded generator (deterministic for a
given request order). Actions:

* :class:`Respond` — answer with a status code (and the Status body upstream would send
  for it, ``Retry-After`` included) instead of handling the request: 409, 429, 500, 503...;
* :class:`Delay` — hold the request for some seconds, then handle it (drives client read
  timeouts); cut short when the server stops;
* :class:`Drop` — close the connection without answering (an apiserver restart or a load
  balancer reset);
* :class:`EndWatch` — let a watch deliver K events, then end the stream cleanly, as the
  apiserver does when its watch timeout fires or it shuts down;
* :class:`ExpireWatch` — let a watch deliver K events, then send an ``ERROR`` event with a
  410 ``Expired`` Status, as when etcd compacted past the watch's revision.

Rules are evaluated in the order they were added; delays add up, the first ``Respond`` or
``Drop`` wins, and watch actions apply only to watch requests.
"""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Action",
    "Delay",
    "Drop",
    "EndWatch",
    "ExpireWatch",
    "Fault",
    "FaultPlan",
    "Faults",
    "Respond",
]


@dataclass(frozen=True)
class Respond:
    """Answer with ``status`` instead of handling the request.

    Attributes:
        status: HTTP status code.
        retry_after: Seconds for ``Retry-After`` and ``details.retryAfterSeconds``.
        body: A Status (or any JSON) to send instead of the generated one.
    """

    status: int
    retry_after: int | None = None
    body: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Delay:
    """Hold the request ``seconds`` before handling it."""

    seconds: float


@dataclass(frozen=True)
class Drop:
    """Close the connection without an answer."""


@dataclass(frozen=True)
class EndWatch:
    """End a watch stream cleanly after ``after_events`` events (bookmarks not counted)."""

    after_events: int = 0


@dataclass(frozen=True)
class ExpireWatch:
    """Send a 410 ``ERROR`` event after ``after_events`` events, then end the stream."""

    after_events: int = 0


Action = Respond | Delay | Drop | EndWatch | ExpireWatch


@dataclass
class Fault:
    """One rule; :attr:`hits` counts the requests it acted on."""

    action: Action
    method: str | None = None
    path: str = ""
    watch: bool | None = None
    times: int | None = None
    skip: int = 0
    probability: float = 1.0
    hits: int = 0
    seen: int = 0
    _pattern: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._pattern = re.compile(self.path)

    def matches(self, method: str, path: str, is_watch: bool) -> bool:
        """Whether the request is one this rule is about (before counting)."""
        if self.method is not None and self.method.upper() != method.upper():
            return False
        if self.watch is not None and self.watch != is_watch:
            return False
        if isinstance(self.action, EndWatch | ExpireWatch) and not is_watch:
            return False
        return self._pattern.search(path) is not None

    @property
    def exhausted(self) -> bool:
        """Whether the rule has acted ``times`` times already."""
        return self.times is not None and self.hits >= self.times


@dataclass(frozen=True)
class FaultPlan:
    """What the rules say to do with one request."""

    delay: float = 0.0
    respond: Respond | None = None
    drop: bool = False
    watch: EndWatch | ExpireWatch | None = None


class Faults:
    """The rule set of one server; thread-safe.

    Args:
        seed: Seed for ``probability`` draws.
    """

    def __init__(self, *, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._rules: list[Fault] = []
        self._rng = random.Random(seed)

    def add(
        self,
        action: Action,
        *,
        method: str | None = None,
        path: str = "",
        watch: bool | None = None,
        times: int | None = None,
        skip: int = 0,
        probability: float = 1.0,
    ) -> Fault:
        """Add a rule and return it (pass it to :meth:`remove` later).

        Args:
            action: What to do.
            method: HTTP method to match (any if None).
            path: Regular expression searched in the URL path (no query string).
            watch: Match only watch requests (True), only others (False), or both (None).
            times: Act on at most this many requests (forever if None).
            skip: Let the first ``skip`` matching requests through untouched.
            probability: Act on a matching request with this probability.
        """
        rule = Fault(action, method, path, watch, times, skip, probability)
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: Fault) -> None:
        """Remove a rule (no error if it is already gone)."""
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        """Remove every rule."""
        with self._lock:
            self._rules.clear()

    @property
    def rules(self) -> tuple[Fault, ...]:
        """The rules, in evaluation order."""
        with self._lock:
            return tuple(self._rules)

    def plan(self, method: str, path: str, *, is_watch: bool) -> FaultPlan:
        """Decide what to do with a request, counting it against the rules."""
        delay = 0.0
        respond: Respond | None = None
        drop = False
        watch: EndWatch | ExpireWatch | None = None
        with self._lock:
            for rule in self._rules:
                if rule.exhausted or not rule.matches(method, path, is_watch):
                    continue
                rule.seen += 1
                if rule.seen <= rule.skip:
                    continue
                if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                    continue
                action = rule.action
                if isinstance(action, Delay):
                    delay += action.seconds
                elif isinstance(action, Respond | Drop):
                    if respond is not None or drop:
                        continue  # an earlier rule already answers; this one does not act
                    respond = action if isinstance(action, Respond) else None
                    drop = isinstance(action, Drop)
                elif watch is None:
                    watch = action
                else:
                    continue
                rule.hits += 1
        return FaultPlan(delay, respond, drop, watch)
