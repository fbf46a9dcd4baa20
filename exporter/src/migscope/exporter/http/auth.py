"""HTTP basic authentication against bcrypt hashes, cheap enough for every scrape.

bcrypt is slow on purpose (about 70–100 ms at cost 10), and Prometheus sends the same
credentials on every scrape, sometimes from two HA replicas and several targets' worth of
concurrency. So, as the exporter-toolkit does, a verification that succeeded is remembered:
the next request with the same user, hash and password costs one HMAC, not one bcrypt.

What is remembered, and what is not:

* Only successes. A wrong password is re-checked with full bcrypt cost every time, so the
  cache never speeds up guessing.
* The cache key is an HMAC of (user, hash, password) under a random per-process key, never
  the password: a memory dump yields nothing that can be brute-forced offline faster than
  the bcrypt hashes already in the config file.
* Its size is bounded (least recently used entries go first).

Unknown users are checked against a dummy hash of the same cost as the real ones, so the
response time does not reveal which user names exist. All bcrypt work runs one at a time
behind a lock: a flood of wrong passwords can use one core, not all of them, and 200
concurrent first requests with the right password cost one bcrypt (the others find the
result cached when they get the lock).
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
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING

import bcrypt

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "DEFAULT_PUBLIC_PATHS",
    "BasicAuthChecker",
    "BasicAuthMiddleware",
    "Verify",
    "parse_basic_authorization",
]

_log = logging.getLogger(__name__)

Verify = Callable[[bytes, bytes], bool]
"""``verify(password, hashed) -> bool``; :func:`bcrypt.checkpw` unless a test injects one."""

DEFAULT_PUBLIC_PATHS: frozenset[str] = frozenset({"/healthz"})
"""Paths served without credentials: liveness probes cannot easily send any (docs/http.md)."""

_COST = re.compile(rb"^\$2[abxy]\$(\d\d)\$")


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
    ) -> None:
        """Prepare the checker.

        Args:
            users: User name → bcrypt hash (already validated by the web-config loader).
            verify: The bcrypt comparison; injectable so tests can count the expensive
                calls without mocking the checker itself.
            cache_size: How many successful ``(user, password)`` pairs to remember.
        """
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        self._users = {user: hashed.encode("ascii") for user, hashed in users.items()}
        self._verify = verify
        self._cache_size = cache_size
        self._cache: OrderedDict[bytes, None] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._verify_lock = threading.Lock()
        self._hmac_key = secrets.token_bytes(32)
        self._dummy = bcrypt.hashpw(
            secrets.token_bytes(16), bcrypt.gensalt(rounds=self._dummy_cost())
        )

    def _dummy_cost(self) -> int:
        """The highest cost among the real hashes, so an unknown user takes as long."""
        costs = [int(m.group(1)) for h in self._users.values() if (m := _COST.match(h))]
        return max(costs, default=10)

    def check(self, user: str, password: bytes) -> bool:
        """True when ``password`` is the user's; constant bcrypt cost for unknown users.

        Args:
            user: The user name from the request.
            password: The password bytes, exactly as sent.
        """
        hashed = self._users.get(user)
        key = self._cache_key(user, hashed, password)
        if hashed is not None and self._cached(key):
            return True
        with self._verify_lock:
            # Another thread may have verified the same pair while we waited.
            if hashed is not None and self._cached(key):
                return True
            ok = self._safe_verify(password, hashed if hashed is not None else self._dummy)
        if not ok or hashed is None:
            return False
        self._remember(key)
        return True

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

    def _cached(self, key: bytes) -> bool:
        with self._cache_lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return True
            return False

    def _remember(self, key: bytes) -> None:
        if self._cache_size == 0:
            return
        with self._cache_lock:
            self._cache[key] = None
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)


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
