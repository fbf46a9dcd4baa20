"""HTTP basic authentication against bcrypt hashes, cheap for scrapes, bounded for guesses.

bcrypt is slow on purpose (about 70–100 ms at cost 10, doubling with each cost step), and
Prometheus sends the same credentials on every scrape, sometimes from two HA replicas and
several targets' worth of concurrency. So, as the exporter-toolkit does, a verification that
succeeded is remembered: the next request with the same user, hash and password costs one
HMAC, not one bcrypt.

What is remembered, and what is not:

* Successes, as an HMAC of (user, hash, password) under a random per-process key, never the
  password: a memory dump yields nothing that can be brute-forced offline faster than the
  bcrypt hashes already in the config file. The cache is bounded (least recently used go).
* A wrong password is re-checked with full bcrypt cost whenever a check slot is free, so
  the cache never speeds up guessing.

What bounds the work of wrong passwords (issue 12: 30 clients with a wrong password pushed
good scrapes to seconds and ``/healthz`` with them, because every worker thread of the
server queued behind one bcrypt lock):

* At most :data:`MAX_CONCURRENT_CHECKS` bcrypt checks run at once. A request that needs a
  check when every slot is taken is answered "wrong" (401) at once, without waiting and
  without bcrypt, so guesses hold at most that many of the server's workers; the others
  keep serving cached scrapes and ``/healthz`` (which needs no credentials at all). The
  refusals are counted and logged at most once per :data:`BUSY_LOG_INTERVAL`.
* Concurrent first logins with the same credentials cost one bcrypt: requests whose check
  is already running wait for its result instead of taking a slot. A pair already known to
  be wrong (a scraper still sending an old password) never waits that way: while its check
  runs, its repeats are answered 401 at once.
* :data:`MAX_BCRYPT_COST` caps the cost of the hashes (the web-config loader refuses more, and
  so does this class): one check at cost 31 takes days, and the dummy hash made at start
  would keep the exporter from ever opening its port.

Unknown users are checked against a dummy hash of the same cost as the real ones, so the
response time does not reveal which user names exist.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING

import bcrypt

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

_log = logging.getLogger(__name__)

Verify = Callable[[bytes, bytes], bool]
"""``verify(password, hashed) -> bool``; :func:`bcrypt.checkpw` unless a test injects one."""

DEFAULT_PUBLIC_PATHS: frozenset[str] = frozenset({"/healthz"})
"""Paths served without credentials: liveness probes cannot easily send any (docs/http.md)."""

MAX_BCRYPT_COST = 14
"""The highest bcrypt cost accepted: one check takes about 1–1.5 s on a server core."""

MAX_CONCURRENT_CHECKS = 2
"""bcrypt checks allowed at once; with the server's 8 workers, 6 stay free for scrapes."""

BUSY_LOG_INTERVAL = 10.0
"""Seconds between two log lines about requests refused because every slot was busy."""

_FAILED_KEYS = 1024
"""How many pairs known to be wrong are remembered (only to keep their repeats from waiting)."""

_COST = re.compile(rb"^\$2[abxy]\$(\d\d)\$")


def bcrypt_cost(hashed: str | bytes) -> int | None:
    """The cost of a bcrypt hash (``$2b$10$...`` → 10), or None if it is not one."""
    match = _COST.match(hashed.encode("ascii", "replace") if isinstance(hashed, str) else hashed)
    return int(match.group(1)) if match else None


class _Pending:
    """A bcrypt check in progress, which identical requests wait for instead of repeating."""

    __slots__ = ("done", "ok")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ok = False


class BasicAuthChecker:
    """Checks ``(user, password)`` against bcrypt hashes, caching successes.

    Thread-safe; one instance serves every worker thread of the server.
    """

    def __init__(
        self,
        users: Mapping[str, str],
        *,
        verify: Verify = bcrypt.checkpw,
        cache_size: int = 1024,
        max_concurrent_checks: int = MAX_CONCURRENT_CHECKS,
    ) -> None:
        """Prepare the checker.

        Args:
            users: User name → bcrypt hash (already validated by the web-config loader).
            verify: The bcrypt comparison; injectable so tests can count the expensive
                calls without mocking the checker itself.
            cache_size: How many successful ``(user, password)`` pairs to remember.
            max_concurrent_checks: bcrypt checks allowed at once; a request that needs one
                while all are running is refused (401) without a check.

        Raises:
            ValueError: A size below its minimum, or a hash whose cost is above
                :data:`MAX_BCRYPT_COST` (naming the user).
        """
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        if max_concurrent_checks < 1:
            raise ValueError(f"max_concurrent_checks must be >= 1, got {max_concurrent_checks}")
        for user, hashed in users.items():
            cost = bcrypt_cost(hashed)
            if cost is not None and cost > MAX_BCRYPT_COST:
                raise ValueError(
                    f"user {user!r}: bcrypt cost {cost} is above {MAX_BCRYPT_COST}, "
                    "the most migscope accepts"
                )
        self._users = {user: hashed.encode("ascii") for user, hashed in users.items()}
        self._verify = verify
        self._cache_size = cache_size
        self._cache: OrderedDict[bytes, None] = OrderedDict()
        self._failed: OrderedDict[bytes, None] = OrderedDict()
        self._pending: dict[bytes, _Pending] = {}
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_concurrent_checks)
        self._max_checks = max_concurrent_checks
        self._refused_busy = 0
        self._unlogged_busy = 0
        self._busy_logged_at: float | None = None
        self._hmac_key = secrets.token_bytes(32)
        self._dummy = bcrypt.hashpw(
            secrets.token_bytes(16), bcrypt.gensalt(rounds=self._dummy_cost())
        )

    @property
    def refused_busy(self) -> int:
        """Requests answered "wrong" without a check because every slot was busy."""
        with self._lock:
            return self._refused_busy

    def _dummy_cost(self) -> int:
        """The highest cost among the real hashes, so an unknown user takes as long."""
        costs = [c for h in self._users.values() if (c := bcrypt_cost(h)) is not None]
        return max(costs, default=10)

    def check(self, user: str, password: bytes) -> bool:
        """True when ``password`` is the user's; constant bcrypt cost for unknown users.

        Never waits for a free check slot: with every slot busy, a pair that is neither
        cached nor being checked right now is refused at once.

        Args:
            user: The user name from the request.
            password: The password bytes, exactly as sent.
        """
        hashed = self._users.get(user)
        key = self._cache_key(user, hashed, password)
        with self._lock:
            if hashed is not None and key in self._cache:
                self._cache.move_to_end(key)
                return True
            pending = self._pending.get(key)
            if pending is None:
                if not self._slots.acquire(blocking=False):
                    self._note_busy()
                    return False
                pending = self._pending[key] = _Pending()
                wait_for_other = False
            elif key in self._failed:
                return False  # known wrong, and being checked again right now
            else:
                wait_for_other = True
        if wait_for_other:
            # The same pair is being checked by another request: its answer is ours.
            pending.done.wait()
            return pending.ok
        return self._run_check(key, pending, password, hashed)

    def _run_check(
        self, key: bytes, pending: _Pending, password: bytes, hashed: bytes | None
    ) -> bool:
        ok = False
        try:
            ok = self._safe_verify(password, hashed if hashed is not None else self._dummy)
            ok = ok and hashed is not None
        finally:
            with self._lock:
                del self._pending[key]
                if ok:
                    self._remember(self._cache, key, self._cache_size)
                    self._failed.pop(key, None)
                else:
                    self._remember(self._failed, key, _FAILED_KEYS)
            pending.ok = ok
            pending.done.set()
            self._slots.release()
        return ok

    def _note_busy(self) -> None:
        """Count a refusal; log one line per :data:`BUSY_LOG_INTERVAL` (lock held)."""
        self._refused_busy += 1
        self._unlogged_busy += 1
        now = time.monotonic()
        if self._busy_logged_at is not None and now - self._busy_logged_at < BUSY_LOG_INTERVAL:
            return
        _log.warning(
            "basic auth: refused %d request(s) without checking the password: all %d bcrypt "
            "check slots are busy (many wrong passwords at once?)",
            self._unlogged_busy,
            self._max_checks,
        )
        self._busy_logged_at = now
        self._unlogged_busy = 0

    def _safe_verify(self, password: bytes, hashed: bytes) -> bool:
        try:
            return bool(self._verify(password, hashed))
        except ValueError:
            # bcrypt >= 5 refuses passwords over 72 bytes instead of truncating them; no
            # stored hash can match such a password, so it is simply wrong.
            return False

    def _cache_key(self, user: str, hashed: bytes | None, password: bytes) -> bytes:
        h = hmac.new(self._hmac_key, digestmod=hashlib.sha256)
        for part in (user.encode("utf-8"), hashed or b"", password):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
        return h.digest()

    @staticmethod
    def _remember(entries: OrderedDict[bytes, None], key: bytes, size: int) -> None:
        """Add ``key`` as the most recent of ``entries``, keeping at most ``size`` (lock held)."""
        if size == 0:
            return
        entries[key] = None
        entries.move_to_end(key)
        while len(entries) > size:
            entries.popitem(last=False)


def parse_basic_authorization(header: str | None) -> tuple[str, bytes] | None:
    """``(user, password)`` from an ``Authorization: Basic ...`` header, or None.

    WSGI hands headers over as latin-1 strings; the credentials inside are base64 of UTF-8
    (RFC 7617). Anything malformed is treated as no credentials at all.
    """
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic" or not token:
        return None
    try:
        raw = base64.b64decode(token.strip().encode("latin-1"), validate=True)
        user_bytes, colon, password = raw.partition(b":")
        user = user_bytes.decode("utf-8")
    except (ValueError, binascii.Error, UnicodeError):
        return None
    if not colon:
        return None
    return user, password


class BasicAuthMiddleware:
    """WSGI middleware: 401 unless the request carries valid basic-auth credentials."""

    def __init__(
        self,
        app: WSGIApplication,
        *,
        checker: BasicAuthChecker,
        public_paths: Collection[str] = DEFAULT_PUBLIC_PATHS,
        realm: str = "migscope",
    ) -> None:
        """Wrap ``app``.

        Args:
            app: The application to protect.
            checker: Verifies credentials (and caches successes).
            public_paths: Exact ``PATH_INFO`` values served without credentials; the same
                string the router matches, so no other spelling slips through.
            realm: Shown by browsers in the login prompt.
        """
        self._app = app
        self._checker = checker
        self._public = frozenset(public_paths)
        self._challenge = f'Basic realm="{realm}"'

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Pass the request on when public or authenticated; answer 401 otherwise."""
        if environ.get("PATH_INFO", "") in self._public:
            return self._app(environ, start_response)
        credentials = parse_basic_authorization(environ.get("HTTP_AUTHORIZATION"))
        if credentials is not None:
            user, password = credentials
            if self._checker.check(user, password):
                environ["REMOTE_USER"] = user
                return self._app(environ, start_response)
            _log.info(
                "basic auth failed for user %r from %s",
                user[:64],
                environ.get("REMOTE_ADDR", "?"),
            )
        body = b"Unauthorized\n"
        start_response(
            "401 Unauthorized",
            [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("WWW-Authenticate", self._challenge),
            ],
        )
        return [body] if environ.get("REQUEST_METHOD") != "HEAD" else [b""]
