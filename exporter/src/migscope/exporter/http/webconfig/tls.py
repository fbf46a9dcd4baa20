"""``tls_server_config`` as an OpenSSL server context, every file loaded at startup.

Why its own module: translating the exporter-toolkit's names (``TLS12``,
``RequireAndVerifyClientCert``) into :mod:`ssl` settings, and OpenSSL's errors back into one
line naming the key (``KEY_VALUES_MISMATCH`` on ``cert_file``), is the one place the file
meets Python's TLS stack. The schema checks combinations; this proves the files load.
"""

from __future__ import annotations

import logging
import re
import ssl
import warnings
from typing import TYPE_CHECKING

from migscope.core.errors import MigscopeError
from migscope.exporter.http.webconfig.errors import WebConfigError

if TYPE_CHECKING:
    from migscope.exporter.http.webconfig.schema import TLSServerConfig

__all__ = ["TLS_VERSIONS", "build_ssl_context"]

# The package's name, as before it was split: log configuration refers to it.
_log = logging.getLogger("migscope.exporter.http.webconfig")

TLS_VERSIONS: dict[str, ssl.TLSVersion] = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
"""The toolkit's version names and OpenSSL's versions."""

_VERIFY_MODES: dict[str, ssl.VerifyMode] = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}


def build_ssl_context(tls: TLSServerConfig, *, source: str) -> ssl.SSLContext:
    """Translate ``tls_server_config`` into an OpenSSL server context, loading every file.

    Args:
        tls: The validated section.
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
