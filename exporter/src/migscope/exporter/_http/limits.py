"""How long, how slowly and how many: the exporter's limits on clients that have not asked yet.

The exporter is a DaemonSet on every GPU node, reachable by any pod on the node network, so a
client that connects and then dawdles must cost a selector slot and a few bytes, never a
worker thread. :class:`ConnectionLimits` holds the numbers the server enforces on a
connection before its request has fully arrived (see :mod:`.intake`); they are defaults that
suit Prometheus (which sends a request of a few hundred bytes in one packet), kept in one
place so docs/http.md, the tests and the benchmark quote the same values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectionLimits:
    """Deadlines and sizes for connections that are not yet a complete request.

    A request (line, headers and a ``Content-Length`` body) must arrive within
    ``request_timeout`` seconds of its first byte. After its first ``rate_grace`` seconds it
    must also have averaged ``min_rate`` bytes per second: each byte received buys
    ``1 / min_rate`` seconds beyond the grace, so a client that drips one byte every few
    seconds is cut long before the deadline. Past either, the client gets ``408`` and the
    connection is closed. The silence limit between two bytes stays the server's
    ``socket_timeout``.

    Attributes:
        request_timeout: Seconds from a request's first byte to its last.
        min_rate: Average bytes per second a request must keep up after ``rate_grace``;
            0 turns the rate check off (the deadline still applies).
        rate_grace: Seconds every request gets before ``min_rate`` is checked.
        handshake_timeout: Seconds from accepting a TLS connection to the end of its
            handshake.
        max_connections: Connections held while they wait for, or receive, a request
            (idle keep-alive, new, handshaking, half-sent). A new connection past the limit
            closes the one idle the longest, so new scrapes are never refused.
    """

    request_timeout: float = 10.0
    min_rate: float = 500.0
    rate_grace: float = 2.0
    handshake_timeout: float = 5.0
    max_connections: int = 256

    def __post_init__(self) -> None:
        """Refuse limits that would disable the protection by accident.

        Raises:
            ValueError: A limit that is not a positive finite number (``min_rate`` may be 0).
        """
        for name in ("request_timeout", "rate_grace", "handshake_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if not (math.isfinite(self.min_rate) and self.min_rate >= 0):
            raise ValueError(f"min_rate must be >= 0 bytes/s, got {self.min_rate!r}")
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {self.max_connections}")


DEFAULT_LIMITS = ConnectionLimits()
"""The limits the ``migscope exporter`` command serves with."""
