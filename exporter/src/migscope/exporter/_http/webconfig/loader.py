"""Read a web-config file once, at startup, and prove it: the one entry point.

Reading is where the file's problems become one line each, in order:
unreadable, not YAML (the one strict loader: duplicate keys refused), not a mapping, a
toolkit key migscope recognises but refuses (named with the reason, before the generic
schema would call it "unknown"), the schema (a null ``tls_server_config`` is read as the
empty mapping, which the schema refuses), and finally the TLS files themselves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from migscope.core import YamlProblem, load_strict
from migscope.exporter._http.webconfig.errors import WebConfigError
from migscope.exporter._http.webconfig.messages import describe_validation_error
from migscope.exporter._http.webconfig.schema import WebConfig

# Keys of the exporter-toolkit format that migscope recognises but does not implement, with
# the reason shown to the user. Checked before the schema, so the error explains instead of
# calling a documented toolkit key "unknown".
_UNSUPPORTED: Mapping[tuple[str, ...], str] = {
    ("rate_limit",): (
        "not supported by migscope; concurrent scrapes are bounded instead (see docs/http.md)"
    ),
    ("tls_server_config", "cert"): "inline PEM is not supported; put it in a file, use cert_file",
    ("tls_server_config", "key"): "inline PEM is not supported; put it in a file, use key_file",
    ("tls_server_config", "client_ca"): (
        "inline PEM is not supported; put it in a file, use client_ca_file"
    ),
    ("tls_server_config", "cipher_suites"): (
        "not supported: Go cipher-suite names do not map onto OpenSSL's; migscope keeps "
        "OpenSSL's defaults (TLS 1.3 suites cannot be chosen at all)"
    ),
    ("tls_server_config", "curve_preferences"): (
        "not supported: migscope keeps OpenSSL's default curves"
    ),
    ("tls_server_config", "prefer_server_cipher_suites"): (
        "not supported: migscope keeps OpenSSL's default cipher order"
    ),
    ("tls_server_config", "client_allowed_sans"): (
        "not supported: give migscope a client_ca_file that signs only the clients allowed "
        "to scrape, with client_auth_type: RequireAndVerifyClientCert"
    ),
}


def load_web_config(path: str | os.PathLike[str]) -> WebConfig:
    """Read, validate and prove a web-config file; raise :class:`WebConfigError` if unusable.

    Relative file names inside are resolved against the file's own directory. The TLS
    context is built here, so a wrong certificate stops startup rather than the first
    scrape.

    Args:
        path: The file, as the user gave it (it is quoted back in errors).

    Returns:
        The validated configuration, with its TLS context already built.

    Raises:
        WebConfigError: Anything wrong with the file, on one line.
    """
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise WebConfigError(f"cannot read: {reason}", path=source, key=None) from exc
    try:
        # The one strict loader: safe tags only, size, depth and alias limits, and duplicate
        # keys refused (a duplicated user would silently drop a password the operator
        # believes is valid, a duplicated tls_server_config half of a TLS setup).
        data = load_strict(text)
    except YamlProblem as exc:
        raise WebConfigError(_yaml_reason(exc), path=source, key=None) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise WebConfigError(
            f"the file must be a mapping of keys, got {type(data).__name__}",
            path=source,
            key=None,
        )
    _reject_unsupported(data, source=source)
    if "tls_server_config" in data and data["tls_server_config"] is None:
        # `tls_server_config:` with nothing under it (a commented-out block, an unset Helm
        # value) is YAML's null. Read as "no TLS" it would silently serve plain HTTP to
        # someone who asked for TLS; it is refused exactly as the empty mapping `{}` is.
        data = {**data, "tls_server_config": {}}
    base_dir = Path(source).resolve().parent
    try:
        config = WebConfig.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        key, message = describe_validation_error(exc)
        raise WebConfigError(message, path=source, key=key) from exc
    config._source = source
    config.ssl_context()
    return config


def _reject_unsupported(data: Mapping[object, object], *, source: str) -> None:
    """Name the toolkit keys migscope recognises but refuses, before the generic schema."""
    for keys, reason in _UNSUPPORTED.items():
        section: object = data
        for key in keys[:-1]:
            section = section.get(key) if isinstance(section, Mapping) else None
        if isinstance(section, Mapping) and keys[-1] in section:
            raise WebConfigError(reason, path=source, key=".".join(keys))


def _yaml_reason(exc: YamlProblem) -> str:
    """One line with the line number for a YAML syntax, limit or duplicate-key error."""
    where = f"line {exc.line}: " if exc.line is not None else ""
    return f"{where}invalid YAML: {' '.join(exc.problem.split())}"
