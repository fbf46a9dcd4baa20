"""The web-config file's schema: strict pydantic models of the exporter-toolkit format.

What a valid file is (keys, types, allowed headers, bcrypt hashes, which
client-auth modes Python's TLS can honour and which combinations make sense) is one
question, answered here in the file's own words through :func:`problem`; reading the file
and wording pydantic's errors is :mod:`.loader`'s and :mod:`.messages`' job.
"""

from __future__ import annotations

import os
import re
import ssl
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
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from migscope.core import format_duration
from migscope.exporter._http.auth import MAX_BCRYPT_COST
from migscope.exporter._http.webconfig.tls import TLS_VERSIONS, build_ssl_context

TLSVersionName = Literal["TLS10", "TLS11", "TLS12", "TLS13"]
ClientAuthType = Literal[
    "NoClientCert",
    "RequestClientCert",
    "RequireAnyClientCert",
    "RequireClientCert",  # the toolkit's older spelling of RequireAnyClientCert
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
]

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

CUSTOM_TYPE = "webconfig"
"""The pydantic error type of :func:`problem`: messages already in the file's terms."""

_BCRYPT = re.compile(r"^\$2[abxy]\$(?P<cost>\d\d)\$[./A-Za-z0-9]{53}$")
_HEADER_VALUE_FORBIDDEN = re.compile(r"[\r\n\x00]")


def problem(message: str, *, key: str | None = None) -> PydanticCustomError:
    """A schema error in our own words; ``key`` names the field a model check is about.

    The message travels in the context, not the template, so braces in it stay literal.
    """
    context: dict[str, str] = {"message": message}
    if key is not None:
        context["key"] = key
    return PydanticCustomError(CUSTOM_TYPE, "{message}", context)


def _existing_file(value: Path, info: ValidationInfo) -> Path:
    """Resolve a path against the config file's directory and require a readable file.

    The toolkit resolves relative paths the same way, so a file that works for
    node_exporter next to its certificates works here too. The error quotes the path as
    written, which is what the user can find in their file.
    """
    base = (info.context or {}).get("base_dir")
    path = value if value.is_absolute() or base is None else Path(base) / value
    if not path.exists():
        raise problem(f"file not found: {value}")
    if not path.is_file():
        raise problem(f"not a regular file: {value}")
    if not os.access(path, os.R_OK):
        raise problem(f"file not readable (permissions): {value}")
    return path


# Paths come from YAML as strings: the one place the strict models accept a conversion.
FilePath = Annotated[Path, Field(strict=False), AfterValidator(_existing_file)]


def _check_user(name: str) -> str:
    """Basic auth sends ``user:password``, so a user name cannot hold a colon (RFC 7617)."""
    if not name:
        raise problem("an empty user name cannot log in")
    if ":" in name:
        raise problem(f"user name {name!r} contains ':', which basic auth cannot carry")
    return name


def _check_bcrypt(value: str) -> str:
    """Accept only bcrypt hashes; the value itself is never echoed (it is a secret)."""
    match = _BCRYPT.match(value)
    if match is None:
        raise problem(
            "not a bcrypt hash (expected $2a$, $2b$ or $2y$, a cost and 53 characters; "
            "make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n')"
        )
    cost = int(match.group("cost"))
    if cost < 4:
        raise problem(f"bcrypt cost {cost} is outside 4..{MAX_BCRYPT_COST}")
    if cost > MAX_BCRYPT_COST:
        # Each step doubles a check's time (~80 ms at cost 10): at cost 31 one check takes
        # days, and the exporter would never open its port (it makes a dummy hash of the
        # same cost at start).
        seconds = 0.08 * 2 ** (cost - 10)
        raise problem(
            f"bcrypt cost {cost} is above {MAX_BCRYPT_COST}, the most migscope accepts (one "
            f"check would take about {format_duration(seconds)}); make the hash with cost 10 "
            "to 12"
        )
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
            raise problem(
                f"{mode} is not supported: Python's TLS verifies every client certificate "
                "it accepts; use RequireAndVerifyClientCert (or VerifyClientCertIfGiven) "
                "with client_ca_file",
                key="client_auth_type",
            )
        if mode != "NoClientCert" and self.client_ca_file is None:
            raise problem(
                f"{mode} needs client_ca_file (the CA that signs the scrapers' certificates)",
                key="client_auth_type",
            )
        if mode == "NoClientCert" and self.client_ca_file is not None:
            raise problem(
                "client_ca_file is set but client_auth_type is NoClientCert, so no client "
                "certificate would be checked; set client_auth_type: RequireAndVerifyClientCert",
                key="client_ca_file",
            )
        if TLS_VERSIONS[self.min_version] > TLS_VERSIONS[self.max_version]:
            raise problem(
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
                raise problem(
                    f"header {name!r} cannot be configured (allowed: "
                    f"{', '.join(sorted(ALLOWED_HEADERS))})"
                )
            if _HEADER_VALUE_FORBIDDEN.search(value):
                raise problem(f"header {name!r} has a line break or NUL in its value")
            if allowed and value not in allowed:
                raise problem(f"header {name!r} must be one of {', '.join(allowed)}, got {value!r}")
        return headers


class WebConfig(_Strict):
    """A whole web-config file. Every part is optional: an empty file serves plain HTTP.

    Build one with :func:`~migscope.exporter._http.webconfig.load_web_config`, which also
    resolves relative paths and proves that the certificate and key load. Constructing it
    directly (in code) skips neither check: paths must exist, and :meth:`ssl_context` loads
    them.
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
        :class:`~migscope.exporter._http.webconfig.WebConfigError` when the files do not load.
        """
        if self.tls_server_config is None:
            return None
        if self._ssl_context is None:
            self._ssl_context = build_ssl_context(self.tls_server_config, source=self._source)
        return self._ssl_context
