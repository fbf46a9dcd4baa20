"""``tls_server_config`` as an OpenSSL server context, every file loaded at startup.

Translating the exporter-toolkit's names (``TLS12``,
``RequireAndVerifyClientCert``) into :mod:`ssl` settings, and OpenSSL's errors back into one
line naming the key (``KEY_VALUES_MISMATCH`` on ``cert_file``), is the one place the file
meets Python's TLS stack. The schema checks combinations; this proves the files load, and
warns (without refusing) about a certificate that has expired or expires within
:data:`EXPIRY_WARNING_DAYS`, each time a context is built.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import time
import warnings
from datetime import datetime, timezone
from typing import Protocol

from migscope.core import MigscopeError
from migscope.exporter._http.webconfig.errors import WebConfigError

# The package's name, as before it was split: log configuration refers to it.
_log = logging.getLogger("migscope.exporter._http.webconfig")

TLS_VERSIONS: dict[str, ssl.TLSVersion] = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
"""The toolkit's version names and OpenSSL's versions."""

EXPIRY_WARNING_DAYS = 7
"""A certificate that expires within this many days is loaded with a warning."""

_VERIFY_MODES: dict[str, ssl.VerifyMode] = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}


class TLSSection(Protocol):
    """What :func:`build_ssl_context` reads of ``tls_server_config``.

    The schema's ``TLSServerConfig`` is one, checked there: the names are the toolkit's, the
    version names keys of :data:`TLS_VERSIONS`, the client-auth type one of the verifying
    modes or ``NoClientCert``.
    """

    @property
    def cert_file(self) -> os.PathLike[str]:
        """The server's certificate (chain), PEM."""

    @property
    def key_file(self) -> os.PathLike[str]:
        """Its unencrypted private key, PEM."""

    @property
    def client_auth_type(self) -> str:
        """The toolkit's client-certificate mode."""

    @property
    def client_ca_file(self) -> os.PathLike[str] | None:
        """The CA that signs client certificates, where they are verified."""

    @property
    def min_version(self) -> str:
        """The oldest TLS version served (``TLS12``)."""

    @property
    def max_version(self) -> str:
        """The newest TLS version served (``TLS13``)."""


def build_ssl_context(tls: TLSSection, *, source: str) -> ssl.SSLContext:
    """Translate ``tls_server_config`` into an OpenSSL server context, loading every file.

    Args:
        tls: The validated section (a :class:`~.schema.TLSServerConfig`).
        source: The file, as the user named it (quoted in errors and the log).

    Raises:
        WebConfigError: the certificate, key or client CA does not load.
    """

    def fail(key: str, message: str) -> WebConfigError:
        return WebConfigError(message, path=source, key=f"tls_server_config.{key}")

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    old = {"TLS10", "TLS11"} & {tls.min_version, tls.max_version}
    with warnings.catch_warnings():
        # Python deprecates TLS 1.0/1.1 as settings; the file asked for it, so we warn once
        # in the log instead of raising a DeprecationWarning at the user.
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = TLS_VERSIONS[tls.min_version]
        context.maximum_version = TLS_VERSIONS[tls.max_version]
    if old:
        _log.warning(
            "web-config %s: %s allowed; TLS 1.0/1.1 are deprecated and OpenSSL's security "
            "level may refuse them anyway",
            source,
            " and ".join(sorted(old)),
        )

    def no_password() -> str:
        # Without a callback OpenSSL would prompt on the terminal for an encrypted key.
        raise _EncryptedKey

    try:
        context.load_cert_chain(tls.cert_file, tls.key_file, password=no_password)
    except _EncryptedKey as exc:
        raise fail("key_file", "the key is encrypted; migscope needs an unencrypted key") from exc
    except (ssl.SSLError, OSError) as exc:
        raise fail(
            "cert_file", f"cannot load certificate and key_file: {_ssl_reason(exc)}"
        ) from exc
    warn_if_expiring(tls.cert_file, source=source)
    context.verify_mode = _VERIFY_MODES[tls.client_auth_type]
    if tls.client_ca_file is not None:
        try:
            context.load_verify_locations(cafile=tls.client_ca_file)
        except (ssl.SSLError, OSError) as exc:
            raise fail(
                "client_ca_file", f"cannot load CA certificates: {_ssl_reason(exc)}"
            ) from exc
        if not context.get_ca_certs():
            raise fail("client_ca_file", "no CA certificate found in the file")
    context.set_alpn_protocols(["http/1.1"])
    return context


def warn_if_expiring(
    cert_file: str | os.PathLike[str], *, source: str, now: float | None = None
) -> None:
    """Log a warning when the certificate in ``cert_file`` has expired or expires soon.

    Only a warning: an expired certificate still loads (OpenSSL does not check dates when
    loading), and refusing it would stop every scrape, including those of scrapers that do
    not verify. The date is the first certificate's ``notAfter`` (the server's own, in a
    chain file), read with the standard library's certificate decoder; where that decoder
    is missing (it is a private CPython function) the check is skipped.

    Args:
        cert_file: The certificate file, as resolved (it is named in the warning).
        source: The web-config file, as the user named it.
        now: The current Unix time; default the clock.
    """
    decode = getattr(getattr(ssl, "_ssl", None), "_test_decode_cert", None)
    if decode is None:  # pragma: no cover - CPython has it
        return
    try:
        not_after = ssl.cert_time_to_seconds(decode(os.fspath(cert_file))["notAfter"])
    except (ssl.SSLError, OSError, KeyError, TypeError, ValueError) as exc:
        _log.debug("cannot read the expiry date of %s: %s", cert_file, exc)
        return
    left = not_after - (time.time() if now is None else now)
    if left > EXPIRY_WARNING_DAYS * 86400:
        return
    when = datetime.fromtimestamp(not_after, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    where = f"web-config {source}: tls_server_config.cert_file: the certificate in {cert_file}"
    if left <= 0:
        _log.warning("%s expired on %s", where, when)
        return
    days = int(left // 86400)
    soon = "less than a day" if days == 0 else f"{days} day{'s' if days > 1 else ''}"
    _log.warning("%s expires on %s (in %s)", where, when, soon)


class _EncryptedKey(MigscopeError):
    """Raised from the password callback: the key file wants a passphrase."""


def _ssl_reason(exc: BaseException) -> str:
    """OpenSSL's short reason (``KEY_VALUES_MISMATCH``) or the OS error, on one line."""
    reason = getattr(exc, "reason", None)
    if isinstance(exc, ssl.SSLError) and reason:
        return f"{reason} ({exc.library or 'ssl'})"
    if isinstance(exc, ssl.SSLError) and "PEM lib" in str(exc):
        return "not PEM (expected a PEM certificate and its PEM private key)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return " ".join(re.sub(r"\s*\(_ssl\.c:\d+\)", "", str(exc)).split())
