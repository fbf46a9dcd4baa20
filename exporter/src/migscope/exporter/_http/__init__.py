"""The exporter's HTTP layer: ``/metrics``, ``/healthz``, ``/``, TLS and basic auth.

Wiring, as the ``migscope exporter`` command does it::

    app = ExporterApp(registry=registry, health=sampler.health, version=__version__)
    web_config = load_web_config(path) if path else None  # WebConfigError: one line
    server = ExporterServer(app, listen=":9400", web_config=web_config)
    server.serve_forever_until_signal()  # SIGTERM: finish in-flight scrapes, exit

See docs/http.md for the endpoints, the web-config keys and the choices made.
"""

from __future__ import annotations

from migscope.exporter._http.app import ExporterApp
from migscope.exporter._http.auth import BasicAuthChecker, BasicAuthMiddleware
from migscope.exporter._http.limits import DEFAULT_LIMITS, ConnectionLimits
from migscope.exporter._http.server import ExporterServer, parse_listen_address
from migscope.exporter._http.webconfig import WebConfigError, load_web_config

__all__ = [
    "DEFAULT_LIMITS",
    "BasicAuthChecker",
    "BasicAuthMiddleware",
    "ConnectionLimits",
    "ExporterApp",
    "ExporterServer",
    "WebConfigError",
    "load_web_config",
    "parse_listen_address",
]
