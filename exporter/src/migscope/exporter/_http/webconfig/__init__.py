"""The exporter's web-config file: TLS, basic auth and response headers, read strictly.

The file format is the Prometheus exporter-toolkit's ``--web.config.file``, so a platform team
can hand migscope the same file (and the same Secret) that its node_exporter and
dcgm-exporter already use. migscope reads it more strictly than a YAML loader would, and
once, at startup: an unknown or misspelt key, a duplicate user, a missing certificate, a key
that does not match its certificate or a password that is not a bcrypt hash stops the
exporter with one line naming the file and the key::

    web-config /etc/migscope/web.yml: tls_server_config.cert_file: file not found: server.crt

rather than surfacing on the first scrape as a TLS alert, or never (a typo in
``basic_auth_users`` that silently leaves the endpoint open). The design guide's rule is
"degrade per metric at scrape time, but fail loudly at startup"; this is the startup half.

Keys the toolkit knows but migscope cannot honour with Python's TLS stack (inline PEM,
Go cipher-suite and curve names, SAN allow-lists, the rate limiter) are rejected by name
with the reason, not ignored: a security setting that is silently dropped is worse than
one that refuses to start. ``http_server_config.http2`` is the one exception: it is on by
default in every toolkit file, only tunes the protocol (migscope speaks HTTP/1.1, which
every Prometheus speaks), and so is accepted and ignored.

Unlike the toolkit, migscope does not re-read the file on each request; restart the pod
(or roll the DaemonSet) after changing it. Certificates are read at startup too; one that
has expired, or expires within 7 days, is loaded with a warning naming the file and the date.

- :mod:`.schema`: the strict models and their checks.
- :mod:`.tls`: ``tls_server_config`` as an :class:`ssl.SSLContext`.
- :mod:`.messages`: pydantic's errors in the file's terms.
- :mod:`.loader`: :func:`load_web_config`, reading and proving a file.
- :mod:`.errors`: :class:`WebConfigError`.
"""

from migscope.exporter._http.webconfig.errors import WebConfigError
from migscope.exporter._http.webconfig.loader import load_web_config
from migscope.exporter._http.webconfig.schema import WebConfig

__all__ = [
    "WebConfig",
    "WebConfigError",
    "load_web_config",
]
