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
(or roll the DaemonSet) after changing it. Certificates are read at startup too.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from migscope.core.errors import UserError
from migscope.core.yaml_messages import YamlProblem, load_strict

__all__ = [
    "ALLOWED_HEADERS",
    "ClientAuthType",
    "HTTPServerConfig",
    "TLSServerConfig",
    "TLSVersionName",
    "WebConfig",
    "WebConfigError",
    "load_web_config",
]

_log = logging.getLogger(__name__)

TLSVersionName = Literal["TLS10", "TLS11", "TLS12", "TLS13"]
ClientAuthType = Literal[
    "NoClientCert",
    "RequestClientCert",
    "RequireAnyClientCert",
    "RequireClientCert",  # the toolkit's older spelling of RequireAnyClientCert
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
]

_TLS_VERSIONS: dict[str, ssl.TLSVersion] = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_VERIFY_MODES: dict[str, ssl.VerifyMode] = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}

ALLOWED_HEADERS: Mapping[str, tuple[str, ...]] = {
    "Content-Security-Policy": (),
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
}
"""Response headers the file may set, and their allowed values (empty: any value).

The same list as the exporter-toolkit's: headers meant to harden a browser's view of the
page, not a way to rewrite ``Content-Type`` or ``WWW-Authenticate``.
"""

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

_BCRYPT = re.compile(r"^\$2[abxy]\$(?P<cost>\d\d)\$[./A-Za-z0-9]{53}$")
_HEADER_VALUE_FORBIDDEN = re.compile(r"[\r\n\x00]")


class WebConfigError(UserError, ValueError):
    """A web-config file that cannot be used; its text is one line naming file and key.

    Attributes:
        path: The file as the user named it.
        key: Dotted key of the problem (``tls_server_config.cert_file``), or None when the
            problem is the whole file (unreadable, not YAML).
        message: What is wrong, without file and key.
    """

    def __init__(self, message: str, *, path: str | os.PathLike[str], key: str | None) -> None:
        self.path = os.fspath(path)
        self.key = key
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.key}: " if self.key else ""
        return f"web-config {self.path}: {where}{self.message}"


def _problem(message: str, *, key: str | None = None) -> PydanticCustomError:
    """A schema error in our own words; ``key`` names the field a model check is about.

    The message travels in the context, not the template, so braces in it stay literal.
    """
    context: dict[str, str] = {"message": message}
    if key is not None:
        context["key"] = key
    return PydanticCustomError("webconfig", "{message}", context)


def _existing_file(value: Path, info: ValidationInfo) -> Path:
    """Resolve a path against the config file's directory and require a readable file.

    The toolkit resolves relative paths the same way, so a file that works for
    node_exporter next to its certificates works here too. The error quotes the path as
    written, which is what the user can find in their file.
    """
    base = (info.context or {}).get("base_dir")
    path = value if value.is_absolute() or base is None else Path(base) / value
    if not path.exists():
        raise _problem(f"file not found: {value}")
    if not path.is_file():
        raise _problem(f"not a regular file: {value}")
    if not os.access(path, os.R_OK):
        raise _problem(f"file not readable (permissions): {value}")
    return path


# Paths come from YAML as strings: the one place the strict models accept a conversion.
FilePath = Annotated[Path, Field(strict=False), AfterValidator(_existing_file)]


def _check_user(name: str) -> str:
    """Basic auth sends ``user:password``, so a user name cannot hold a colon (RFC 7617)."""
    if not name:
        raise _problem("an empty user name cannot log in")
    if ":" in name:
        raise _problem(f"user name {name!r} contains ':', which basic auth cannot carry")
    return name


def _check_bcrypt(value: str) -> str:
    """Accept only bcrypt hashes; the value itself is never echoed (it is a secret)."""
    match = _BCRYPT.match(value)
    if match is None:
        raise _problem(
            "not a bcrypt hash (expected $2a$, $2b$ or $2y$, a cost and 53 characters; "
            "make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n')"
        )
    cost = int(match.group("cost"))
    if not 4 <= cost <= 31:
        raise _problem(f"bcrypt cost {cost} is outside 4..31")
    return value


UserName = Annotated[StrictStr, AfterValidator(_check_user)]
BcryptHash = Annotated[StrictStr, AfterValidator(_check_bcrypt)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class TLSServerConfig(_Strict):
    """``tls_server_config``: serve HTTPS, optionally requiring client certificates.

    Python's TLS stack (OpenSSL through :mod:`ssl`) verifies every client certificate it
    accepts, so the toolkit's two "ask but do not verify" modes (``RequestClientCert``,
    ``RequireAnyClientCert``) cannot be honoured and are refused; the toolkit's own docs
    call them insecure. The verifying modes need ``client_ca_file``: migscope never falls
    back to the system's public CAs, which would let any publicly issued certificate in.
    """

    cert_file: FilePath
    key_file: FilePath
    client_auth_type: ClientAuthType = "NoClientCert"
    client_ca_file: FilePath | None = None
    min_version: TLSVersionName = "TLS12"
    max_version: TLSVersionName = "TLS13"

    @model_validator(mode="after")
    def _check_combination(self) -> TLSServerConfig:
        mode = self.client_auth_type
        if mode in ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert"):
            raise _problem(
                f"{mode} is not supported: Python's TLS verifies every client certificate "
                "it accepts; use RequireAndVerifyClientCert (or VerifyClientCertIfGiven) "
                "with client_ca_file",
                key="client_auth_type",
            )
        if mode != "NoClientCert" and self.client_ca_file is None:
            raise _problem(
                f"{mode} needs client_ca_file (the CA that signs the scrapers' certificates)",
                key="client_auth_type",
            )
        if mode == "NoClientCert" and self.client_ca_file is not None:
            raise _problem(
                "client_ca_file is set but client_auth_type is NoClientCert, so no client "
                "certificate would be checked; set client_auth_type: RequireAndVerifyClientCert",
                key="client_ca_file",
            )
        if _TLS_VERSIONS[self.min_version] > _TLS_VERSIONS[self.max_version]:
            raise _problem(
                f"min_version {self.min_version} is above max_version {self.max_version}",
                key="min_version",
            )
        return self


class HTTPServerConfig(_Strict):
    """``http_server_config``: extra response headers (and the toolkit's ``http2`` switch).

    ``http2`` is accepted for compatibility with files shared with Go exporters and has no
    effect: migscope serves HTTP/1.1 only.
    """

    http2: StrictBool = True
    headers: dict[StrictStr, StrictStr] = Field(default_factory=dict)

    @field_validator("headers")
    @classmethod
    def _check_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        """Only the toolkit's hardening headers, with their enumerated values where fixed."""
        for name, value in headers.items():
            allowed = ALLOWED_HEADERS.get(name)
            if allowed is None:
                raise _problem(
                    f"header {name!r} cannot be configured (allowed: "
                    f"{', '.join(sorted(ALLOWED_HEADERS))})"
                )
            if _HEADER_VALUE_FORBIDDEN.search(value):
                raise _problem(f"header {name!r} has a line break or NUL in its value")
            if allowed and value not in allowed:
                raise _problem(
                    f"header {name!r} must be one of {', '.join(allowed)}, got {value!r}"
                )
        return headers


class WebConfig(_Strict):
    """A whole web-config file. Every part is optional: an empty file serves plain HTTP.

    Build one with :func:`load_web_config`, which also resolves relative paths and proves
    that the certificate and key load. Constructing it directly (in code) skips neither
    check: paths must exist, and :meth:`ssl_context` loads them.
    """

    tls_server_config: TLSServerConfig | None = None
    http_server_config: HTTPServerConfig = Field(default_factory=HTTPServerConfig)
    basic_auth_users: dict[UserName, BcryptHash] = Field(default_factory=dict)

    _source: str = PrivateAttr(default="<in code>")
    _ssl_context: ssl.SSLContext | None = PrivateAttr(default=None)

    @property
    def headers(self) -> Mapping[str, str]:
        """Extra response headers, applied to every response (401 and 404 included)."""
        return self.http_server_config.headers

    @property
    def users(self) -> Mapping[str, str]:
        """Basic-auth user → bcrypt hash; empty means no authentication."""
        return self.basic_auth_users

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server-side TLS context, or None for plain HTTP.

        Built once (certificate, key and client CA read from disk) and reused; raises
        :class:`WebConfigError` when the files do not load.
        """
        if self.tls_server_config is None:
            return None
        if self._ssl_context is None:
            self._ssl_context = _build_ssl_context(self.tls_server_config, source=self._source)
        return self._ssl_context


def _build_ssl_context(tls: TLSServerConfig, *, source: str) -> ssl.SSLContext:
    """Translate ``tls_server_config`` into an OpenSSL server context, loading every file."""

    def fail(key: str, message: str) -> WebConfigError:
        return WebConfigError(message, path=source, key=f"tls_server_config.{key}")

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    old = {"TLS10", "TLS11"} & {tls.min_version, tls.max_version}
    with warnings.catch_warnings():
        # Python deprecates TLS 1.0/1.1 as settings; the file asked for it, so we warn once
        # in the log instead of raising a DeprecationWarning at the user.
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = _TLS_VERSIONS[tls.min_version]
        context.maximum_version = _TLS_VERSIONS[tls.max_version]
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
    except _EncryptedKey:
        raise fail("key_file", "the key is encrypted; migscope needs an unencrypted key") from None
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


class _EncryptedKey(Exception):
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
    base_dir = Path(source).resolve().parent
    try:
        config = WebConfig.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        key, message = _describe(exc.errors(include_url=False))
        more = exc.error_count() - 1
        if more:
            message += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise WebConfigError(message, path=source, key=key) from None
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


_KIND = {
    "string_type": "a string",
    "bool_type": "true or false",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _describe(errors: list[ErrorDetails]) -> tuple[str, str]:
    """Turn pydantic's first error into ``(dotted key, message)`` in the file's terms."""
    error = errors[0]
    loc = [str(part) for part in error["loc"]]
    ctx = error.get("ctx") or {}
    kind = error["type"]
    dict_key = bool(loc) and loc[-1] == "[key]"
    if dict_key:
        del loc[-2:]  # pydantic marks a bad mapping key as (..., key, "[key]"); name it instead
    if kind == "webconfig":
        if "key" in ctx:
            loc.append(str(ctx["key"]))
        message = str(ctx["message"])
    elif dict_key and kind in _KIND:
        message = (
            f"user name {error['input']!r} must be a string, got {_type_name(error['input'])} "
            "(quote it: YAML reads on, yes, no, 1 as other types)"
        )
    elif kind == "missing":
        message = "required key is missing"
    elif kind == "extra_forbidden":
        message = "unknown key"
    elif kind == "literal_error":
        message = f"must be one of {ctx.get('expected', '')}, got {error['input']!r}"
    elif kind in _KIND:
        message = f"must be {_KIND[kind]}, got {_type_name(error['input'])}"
    else:
        message = error["msg"]
    return ".".join(loc) or "(top level)", message


def _type_name(value: object) -> str:
    if value is None:
        return "nothing (null)"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        list: "a list",
        dict: "a mapping",
        str: "a string",
    }.get(type(value), type(value).__name__)
