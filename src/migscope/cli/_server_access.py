"""How ``analyze --prometheus`` reaches a server that wants more than a URL.

A fleet that outgrew one Prometheus is read through the engine it already runs, and each
wants something of its own: Mimir and Cortex a tenant header (``X-Scope-OrgID``), Thanos
with query tenancy ``THANOS-TENANT``, a gateway an API key header, a private CA, a client
certificate, basic auth (Grafana Cloud, hosted Mimir). The Prometheus client takes all of
them (:class:`~migscope.analyzer._intake.prometheus.PrometheusClient`); this module turns the
flags into its options.

Every flag names a file or a value that can be wrong in a way the
server would report late and badly (a TLS handshake error, a 401, httpx quoting a header it
refuses). Each is checked here, before the first request, and reported as one line naming
the flag and the file. A header's value is never quoted in a message, a log or the report (it
may be a credential); its name is, once it is known to be a valid name.
"""

from __future__ import annotations

import functools
import re
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import click

from migscope.cli._errors import InvalidInput
from migscope.core import MigscopeError

TENANT_HEADER = "X-Scope-OrgID"
"""The tenant header of Mimir, Cortex and Loki (``tenant-1|tenant-2`` federates in Mimir)."""

MAX_SECRET_FILE_BYTES = 64 * 1024
"""The most a header or password file may hold: a few lines, never a file named by mistake."""

# RFC 9110, section 5.1: a field name is a token.
_FIELD_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")

# Headers the client sets for the protocol itself: replacing one would break reading the
# answer (Accept-Encoding: the body reader decodes what the client asked for) or the request.
_CLIENT_OWNED = frozenset(
    {"accept", "accept-encoding", "connection", "content-length", "content-type", "host"}
    | {"transfer-encoding"}
)


@dataclass(frozen=True)
class ServerAccess:
    """What a :class:`PrometheusClient` is built with besides its URL, checked.

    Secrets (header values, the basic-auth password) are left out of ``repr`` so that a
    debugger, a log record or a traceback never shows them.

    Attributes:
        bearer_token_file: ``--bearer-token-file`` (the client re-reads it every request).
        basic_auth: ``(user, password)`` from ``--basic-auth-user`` and its password file.
        headers: Extra headers, the tenant's included.
        ca_file: ``--ca-file``.
        client_cert: ``--client-cert`` alone, or with ``--client-key``.
        verify: False with ``--insecure-skip-verify``.
        flags: The flags that were given, for "only with --prometheus".
    """

    bearer_token_file: str | None = None
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    ca_file: str | None = None
    client_cert: str | tuple[str, str] | None = None
    verify: bool = True
    flags: tuple[str, ...] = ()

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments of :class:`PrometheusClient` for this access."""
        return {
            "bearer_token_file": self.bearer_token_file,
            "basic_auth": self.basic_auth,
            "headers": dict(self.headers) or None,
            "ca_file": self.ca_file,
            "client_cert": self.client_cert,
            "verify": self.verify,
        }


# -- reading files ---------------------------------------------------------------------------


def _read_small_text(flag: str, path: str) -> str:
    """The text of a small file named by ``flag``.

    Raises:
        InvalidInput: unreadable, larger than :data:`MAX_SECRET_FILE_BYTES`, or not UTF-8
            (the decoder's message is not used: it quotes the bytes around the bad one).
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SECRET_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {flag} {path}: {exc.strerror or exc}") from exc
    if len(data) > MAX_SECRET_FILE_BYTES:
        raise InvalidInput(
            f"{flag} {path}: larger than {MAX_SECRET_FILE_BYTES // 1024} KiB; it should hold "
            "a few lines"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{flag} {path}: not UTF-8 text") from None


# -- headers ---------------------------------------------------------------------------------


def parse_header(text: str, where: str) -> tuple[str, str]:
    """``Name: value`` as ``(name, value)``; the value loses surrounding spaces.

    Args:
        text: The header as written.
        where: What to call it in a message (``--header``, ``--header-file F line 3``).

    Raises:
        InvalidInput: no colon, a name that is not an HTTP token, an empty value, or a value
            HTTP cannot carry. The value is never quoted; the name only once it is valid.
    """
    from migscope.analyzer import header_problem

    name, colon, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not colon or not _FIELD_NAME.fullmatch(name):
        raise InvalidInput(
            f"bad {where}: expected 'Name: value' (a name of letters, digits and -, then a colon)"
        )
    if not value:
        raise InvalidInput(f"bad {where} {name}: the value is empty")
    problem = header_problem(value, tab_allowed=True)
    if problem is not None:
        raise InvalidInput(f"bad {where} {name}: the value {problem}")
    return name, value


def read_header_file(path: str) -> list[tuple[str, str]]:
    """The headers of a ``--header-file``: one ``Name: value`` a line.

    Blank lines and lines starting with ``#`` are skipped, so that a file can say what it is
    for. A Kubernetes Secret key mounted as a file is the intended use.

    Raises:
        InvalidInput: unreadable, a bad line (by number), or no header in it.
    """
    text = _read_small_text("--header-file", path)
    found: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        found.append(parse_header(line, f"--header-file {path} line {number}"))
    if not found:
        raise InvalidInput(f"--header-file {path}: no 'Name: value' line in it")
    return found


def _merge_headers(
    pairs: Iterable[tuple[str, str]], *, tenant: str | None, auth_flag: str | None
) -> dict[str, str]:
    """One header map from ``--tenant``, ``--header`` and ``--header-file``, conflicts refused.

    Raises:
        InvalidInput: a name given twice (case-insensitively), a header the client sets
            itself, the tenant given twice, or ``Authorization`` next to ``auth_flag``.
    """
    headers: dict[str, str] = {}
    seen: set[str] = set()
    if tenant is not None:
        headers[TENANT_HEADER] = tenant
        seen.add(TENANT_HEADER.lower())
    for name, value in pairs:
        key = name.lower()
        if key == TENANT_HEADER.lower() and tenant is not None:
            raise InvalidInput(f"--tenant and a {TENANT_HEADER} header: give the tenant once")
        if key in seen:
            raise InvalidInput(f"header {name} is given twice")
        if key in _CLIENT_OWNED:
            raise InvalidInput(f"header {name} is set by migscope itself and cannot be replaced")
        if key == "authorization" and auth_flag is not None:
            raise InvalidInput(f"an Authorization header and {auth_flag}: give one of them")
        seen.add(key)
        headers[name] = value
    return headers


# -- TLS -------------------------------------------------------------------------------------


class _EncryptedKey(MigscopeError):
    """Raised by the password callback: the key wants a passphrase we do not have.

    Never leaves this module (it becomes an :class:`InvalidInput`); a MigscopeError all the
    same, as every exception class the product defines.
    """


def _no_passphrase() -> str:
    # Without a callback OpenSSL would prompt on the terminal, or fail obscurely in a pod.
    raise _EncryptedKey


def _ssl_reason(exc: ssl.SSLError) -> str:
    """OpenSSL's reason in words (``key values mismatch``), without its C source position."""
    if exc.reason:
        return str(exc.reason).replace("_", " ").lower()
    return re.sub(r"\s*\(_ssl\.c:\d+\)", "", str(exc.strerror or exc))


def _check_ca_file(path: str) -> None:
    """Refuse a ``--ca-file`` that is unreadable or holds no PEM certificate."""
    _readable("--ca-file", path)
    try:
        ssl.create_default_context(cafile=path)
    except ssl.SSLError as exc:
        raise InvalidInput(f"--ca-file {path}: not a PEM CA bundle ({_ssl_reason(exc)})") from exc
    except OSError as exc:
        raise InvalidInput(f"cannot read --ca-file {path}: {exc.strerror or exc}") from exc


def _check_client_cert(cert: str, key: str | None) -> None:
    """Refuse a client certificate and key that do not load together, or an encrypted key."""
    _readable("--client-cert", cert)
    if key is not None:
        _readable("--client-key", key)
    named = f"--client-cert {cert}" + (f" and --client-key {key}" if key is not None else "")
    try:
        ssl.create_default_context().load_cert_chain(cert, key, password=_no_passphrase)
    except _EncryptedKey:
        raise InvalidInput(
            f"{named}: the private key is encrypted; give an unencrypted PEM key "
            "(as in a kubernetes.io/tls Secret)"
        ) from None
    except ssl.SSLError as exc:
        need = "" if key is not None else " (a separate key goes in --client-key)"
        raise InvalidInput(
            f"{named}: not a PEM certificate with its matching private key{need} "
            f"({_ssl_reason(exc)})"
        ) from exc
    except OSError as exc:
        raise InvalidInput(f"{named}: {exc.strerror or exc}") from exc


def _readable(flag: str, path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise InvalidInput(f"cannot read {flag} {path}: {exc.strerror or exc}") from exc


# -- the flags -------------------------------------------------------------------------------


def read_access(
    *,
    bearer_token_file: str | None = None,
    basic_auth_user: str | None = None,
    basic_auth_password_file: str | None = None,
    tenant: str | None = None,
    header: Sequence[str] = (),
    header_file: Sequence[str] = (),
    ca_file: str | None = None,
    client_cert: str | None = None,
    client_key: str | None = None,
    insecure_skip_verify: bool = False,
) -> ServerAccess:
    """The :class:`ServerAccess` the flags describe, every file read and checked.

    Raises:
        InvalidInput: a file that cannot be read or used, a malformed header, or flags that
            contradict each other (one line, naming the flags and files).
    """
    given = {
        "--bearer-token-file": bearer_token_file is not None,
        "--basic-auth-user": basic_auth_user is not None,
        "--basic-auth-password-file": basic_auth_password_file is not None,
        "--tenant": tenant is not None,
        "--header": bool(header),
        "--header-file": bool(header_file),
        "--ca-file": ca_file is not None,
        "--client-cert": client_cert is not None,
        "--client-key": client_key is not None,
        "--insecure-skip-verify": insecure_skip_verify,
    }
    basic_auth = _basic_auth(basic_auth_user, basic_auth_password_file)
    if bearer_token_file is not None and basic_auth is not None:
        raise InvalidInput("give one of --bearer-token-file and --basic-auth-user")
    auth_flag = (
        "--bearer-token-file"
        if bearer_token_file is not None
        else "--basic-auth-user"
        if basic_auth is not None
        else None
    )
    if tenant is not None:
        from migscope.analyzer import header_problem

        tenant = tenant.strip()
        if not tenant:
            raise InvalidInput("--tenant is empty")
        problem = header_problem(tenant)
        if problem is not None:
            raise InvalidInput(f"bad --tenant: it {problem}")
    pairs = [parse_header(text, "--header") for text in header]
    for path in header_file:
        pairs += read_header_file(path)
    headers = _merge_headers(pairs, tenant=tenant, auth_flag=auth_flag)
    if client_key is not None and client_cert is None:
        raise InvalidInput("--client-key goes with --client-cert")
    if insecure_skip_verify and ca_file is not None:
        raise InvalidInput("--insecure-skip-verify makes --ca-file pointless: drop one of them")
    if ca_file is not None:
        _check_ca_file(ca_file)
    if client_cert is not None:
        _check_client_cert(client_cert, client_key)
    return ServerAccess(
        bearer_token_file=bearer_token_file,
        basic_auth=basic_auth,
        headers=headers,
        ca_file=ca_file,
        client_cert=(client_cert, client_key) if client_cert and client_key else client_cert,
        verify=not insecure_skip_verify,
        flags=tuple(flag for flag, on in given.items() if on),
    )


def _basic_auth(user: str | None, password_file: str | None) -> tuple[str, str] | None:
    """``(user, password)``, the password being the file's first line; or None.

    Raises:
        InvalidInput: one flag without the other, a user with a colon (RFC 7617 forbids
            it), an unreadable or empty password file.
    """
    if user is None and password_file is None:
        return None
    if user is None or password_file is None:
        raise InvalidInput("--basic-auth-user and --basic-auth-password-file go together")
    if not user or ":" in user:
        raise InvalidInput("bad --basic-auth-user: it must be non-empty and hold no colon")
    lines = _read_small_text("--basic-auth-password-file", password_file).splitlines()
    password = lines[0] if lines else ""
    if not password or any(line.strip() for line in lines[1:]):
        raise InvalidInput(
            f"--basic-auth-password-file {password_file}: it must hold the password alone "
            "on one line"
        )
    return user, password


_OPTIONS: tuple[Callable[[Any], Any], ...] = (
    click.option(
        "--bearer-token-file",
        metavar="FILE",
        help="Bearer token for --prometheus, re-read on every request.",
    ),
    click.option(
        "--basic-auth-user",
        metavar="USER",
        help="HTTP basic auth user for --prometheus (Grafana Cloud: the instance ID).",
    ),
    click.option(
        "--basic-auth-password-file",
        metavar="FILE",
        help="File holding the basic auth password (or API token) on one line.",
    ),
    click.option(
        "--tenant",
        metavar="ID",
        help=f"Tenant sent as {TENANT_HEADER} (Mimir, Cortex; 'a|b' federates in Mimir).",
    ),
    click.option(
        "--header",
        multiple=True,
        metavar="'NAME: VALUE'",
        help="Extra HTTP header on every request (repeatable; secrets: --header-file).",
    ),
    click.option(
        "--header-file",
        multiple=True,
        metavar="FILE",
        help="File of 'Name: value' lines, one header each (repeatable; # comments).",
    ),
    click.option(
        "--ca-file", metavar="FILE", help="PEM CA bundle that signed the server's certificate."
    ),
    click.option("--client-cert", metavar="FILE", help="PEM client certificate for mutual TLS."),
    click.option(
        "--client-key", metavar="FILE", help="Its PEM private key, if not in --client-cert."
    ),
    click.option(
        "--insecure-skip-verify",
        is_flag=True,
        help="Do not verify the server's certificate (testing only).",
    ),
)

_NAMES = (
    "bearer_token_file",
    "basic_auth_user",
    "basic_auth_password_file",
    "tenant",
    "header",
    "header_file",
    "ca_file",
    "client_cert",
    "client_key",
    "insecure_skip_verify",
)


def server_access_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the server access flags to a click command, which receives ``access=ServerAccess``.

    The flags are read and checked (:func:`read_access`) before the command body runs.
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        raw = {name: kwargs.pop(name) for name in _NAMES}
        command(*args, access=read_access(**raw), **kwargs)

    decorated: Callable[..., None] = wrapper
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated
