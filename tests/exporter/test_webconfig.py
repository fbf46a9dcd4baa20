"""Web-config files: what loads, and every refusal as one line naming file and key."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import textwrap
from pathlib import Path

import bcrypt
import pytest

from migscope.exporter._http import WebConfigError, load_web_config

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"  # Debian package: openssl
HASH = bcrypt.hashpw(b"secret", bcrypt.gensalt(rounds=4)).decode()


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """server.crt/server.key (self-signed), other.key (a different key), enc.key (encrypted)."""
    d = tmp_path_factory.mktemp("certs")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")
    _openssl(
        "req", "-x509", *ec, "-nodes", "-keyout", "server.key", "-out", "server.crt",
        "-days", "2", "-subj", "/CN=localhost", cwd=d,
    )  # fmt: skip
    _openssl(
        "req", "-x509", *ec, "-nodes", "-keyout", "other.key", "-out", "other.crt",
        "-days", "2", "-subj", "/CN=other", cwd=d,
    )  # fmt: skip
    _openssl("pkey", "-in", "server.key", "-out", "enc.key", "-aes256", "-passout", "pass:x", cwd=d)
    (d / "notpem.txt").write_text("not a certificate\n")
    return d


def write(directory: Path, text: str, name: str = "web.yml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def tls_dir(tmp_path: Path, certs: Path) -> Path:
    for name in ("server.crt", "server.key", "other.key", "enc.key", "notpem.txt"):
        (tmp_path / name).write_bytes((certs / name).read_bytes())
    return tmp_path


def test_empty_file_means_plain_http_without_auth(tmp_path: Path) -> None:
    config = load_web_config(write(tmp_path, ""))
    assert config.tls_server_config is None
    assert config.ssl_context() is None
    assert dict(config.users) == {}
    assert dict(config.headers) == {}


def test_full_file_loads_with_paths_relative_to_the_file(tmp_path: Path, certs: Path) -> None:
    tls_dir(tmp_path, certs)
    (tmp_path / "ca.crt").write_bytes((certs / "server.crt").read_bytes())
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    path = write(
        tmp_path,
        f"""\
        tls_server_config:
          cert_file: server.crt
          key_file: server.key
          client_auth_type: RequireAndVerifyClientCert
          client_ca_file: ca.crt
          min_version: TLS13
        http_server_config:
          http2: false
          headers:
            X-Frame-Options: sameorigin
            Strict-Transport-Security: max-age=31536000
        basic_auth_users:
          alice: {HASH}
          "on": {HASH}
        """,
    )
    config = load_web_config(path)
    assert config.tls_server_config is not None
    assert config.tls_server_config.cert_file == tmp_path / "server.crt"
    context = config.ssl_context()
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert context.maximum_version == ssl.TLSVersion.TLSv1_3
    assert len(context.get_ca_certs()) == 1
    assert set(config.users) == {"alice", "on"}
    assert config.headers["X-Frame-Options"] == "sameorigin"


def test_verify_client_cert_if_given_maps_to_optional(tmp_path: Path, certs: Path) -> None:
    tls_dir(tmp_path, certs)
    path = write(
        tmp_path,
        """\
        tls_server_config:
          cert_file: server.crt
          key_file: server.key
          client_auth_type: VerifyClientCertIfGiven
          client_ca_file: server.crt
        """,
    )
    context = load_web_config(path).ssl_context()
    assert context is not None
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2  # the toolkit's default


TLS = """\
tls_server_config:
  cert_file: server.crt
  key_file: server.key
"""

# (file text, expected key, expected fragment of the message)
BAD_FILES = {
    "unknown top-level key": ("tls_config:\n  cert_file: x\n", "tls_config", "unknown key"),
    "unknown TLS key": (
        TLS + "  cert_fle: server.crt\n",
        "tls_server_config.cert_fle",
        "unknown key",
    ),
    "missing cert file": (
        "tls_server_config:\n  cert_file: nothere.crt\n  key_file: server.key\n",
        "tls_server_config.cert_file",
        "file not found: nothere.crt",
    ),
    "missing key_file key": (
        "tls_server_config:\n  cert_file: server.crt\n",
        "tls_server_config.key_file",
        "required key is missing",
    ),
    "empty TLS section": ("tls_server_config: {}\n", "tls_server_config.cert_file", "missing"),
    "cert is not PEM": (
        "tls_server_config:\n  cert_file: notpem.txt\n  key_file: server.key\n",
        "tls_server_config.cert_file",
        "cannot load certificate",
    ),
    "key does not match cert": (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: other.key\n",
        "tls_server_config.cert_file",
        "KEY_VALUES_MISMATCH",
    ),
    "encrypted key": (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: enc.key\n",
        "tls_server_config.key_file",
        "encrypted",
    ),
    "directory as cert": (
        "tls_server_config:\n  cert_file: .\n  key_file: server.key\n",
        "tls_server_config.cert_file",
        "not a regular file",
    ),
    "bad TLS version": (
        TLS + "  min_version: TLS14\n",
        "tls_server_config.min_version",
        "must be one of 'TLS10', 'TLS11', 'TLS12' or 'TLS13', got 'TLS14'",
    ),
    "min above max": (
        TLS + "  min_version: TLS13\n  max_version: TLS12\n",
        "tls_server_config.min_version",
        "above max_version",
    ),
    "unknown client auth type": (
        TLS + "  client_auth_type: Always\n",
        "tls_server_config.client_auth_type",
        "must be one of",
    ),
    "request client cert": (
        TLS + "  client_auth_type: RequestClientCert\n  client_ca_file: server.crt\n",
        "tls_server_config.client_auth_type",
        "RequestClientCert is not supported",
    ),
    "require any client cert": (
        TLS + "  client_auth_type: RequireAnyClientCert\n",
        "tls_server_config.client_auth_type",
        "RequireAnyClientCert is not supported",
    ),
    "verify without CA": (
        TLS + "  client_auth_type: RequireAndVerifyClientCert\n",
        "tls_server_config.client_auth_type",
        "needs client_ca_file",
    ),
    "CA without client auth": (
        TLS + "  client_ca_file: server.crt\n",
        "tls_server_config.client_ca_file",
        "NoClientCert",
    ),
    "CA file without certificates": (
        TLS + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: notpem.txt\n",
        "tls_server_config.client_ca_file",
        "cannot load CA certificates",
    ),
    "inline cert": (TLS + "  cert: '-----BEGIN'\n", "tls_server_config.cert", "inline PEM"),
    "cipher suites": (
        TLS + "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
        "tls_server_config.cipher_suites",
        "not supported",
    ),
    "client allowed SANs": (
        TLS + "  client_allowed_sans: [prometheus]\n",
        "tls_server_config.client_allowed_sans",
        "not supported",
    ),
    "rate limit": ("rate_limit:\n  interval: 1s\n  burst: 20\n", "rate_limit", "not supported"),
    "bad hash": (
        "basic_auth_users:\n  alice: secret\n",
        "basic_auth_users.alice",
        "not a bcrypt hash",
    ),
    "hash with cost 3": (
        "basic_auth_users:\n  alice: " + HASH.replace("$04$", "$03$") + "\n",
        "basic_auth_users.alice",
        "cost 3",
    ),
    "hash as a number": (
        "basic_auth_users:\n  alice: 12345\n",
        "basic_auth_users.alice",
        "must be a string, got a number",
    ),
    "user with colon": (
        f"basic_auth_users:\n  'a:b': {HASH}\n",
        "basic_auth_users",
        "contains ':'",
    ),
    "user that YAML reads as a boolean": (
        f"basic_auth_users:\n  on: {HASH}\n",
        "basic_auth_users",
        "must be a string, got a boolean",
    ),
    "duplicate user": (
        f"basic_auth_users:\n  alice: {HASH}\n  alice: {HASH}\n",
        None,
        "line 3: invalid YAML: duplicate key 'alice'",
    ),
    "header not allowed": (
        "http_server_config:\n  headers:\n    Content-Type: text/html\n",
        "http_server_config.headers",
        "'Content-Type' cannot be configured",
    ),
    "header value not allowed": (
        "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
        "http_server_config.headers",
        "must be one of deny, sameorigin",
    ),
    "header with line break": (
        'http_server_config:\n  headers:\n    Content-Security-Policy: "a\\nb"\n',
        "http_server_config.headers",
        "line break",
    ),
    "http2 not a boolean": (
        "http_server_config:\n  http2: 'yes'\n",
        "http_server_config.http2",
        "must be true or false",
    ),
    "not a mapping": ("- a\n- b\n", None, "must be a mapping of keys, got list"),
    "YAML syntax": ("tls_server_config: [\n", None, "invalid YAML"),
}


@pytest.mark.parametrize(("text", "key", "fragment"), BAD_FILES.values(), ids=BAD_FILES.keys())
def test_bad_files_are_refused_in_one_line(
    tmp_path: Path, certs: Path, text: str, key: str | None, fragment: str
) -> None:
    tls_dir(tmp_path, certs)
    path = write(tmp_path, text)
    with pytest.raises(WebConfigError) as err:
        load_web_config(path)
    message = str(err.value)
    assert "\n" not in message
    prefix = f"web-config {path}: " + (f"{key}: " if key else "")
    assert message.startswith(prefix), message
    assert fragment in message
    assert err.value.key == key
    assert HASH not in message  # secrets are never echoed


def test_several_problems_report_the_first_and_count_the_rest(tmp_path: Path) -> None:
    path = write(tmp_path, "basic_auth_users:\n  a: x\n  b: y\n  c: z\n")
    with pytest.raises(WebConfigError, match=r"\(and 2 more problems\)$"):
        load_web_config(path)


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(WebConfigError) as err:
        load_web_config(tmp_path / "absent.yml")
    assert str(err.value) == (
        f"web-config {tmp_path / 'absent.yml'}: cannot read: No such file or directory"
    )


def test_absolute_paths_are_used_as_written(tmp_path: Path, certs: Path) -> None:
    path = write(
        tmp_path,
        f"tls_server_config:\n  cert_file: {certs / 'server.crt'}\n"
        f"  key_file: {certs / 'server.key'}\n",
    )
    config = load_web_config(path)
    assert config.ssl_context() is not None


def test_old_tls_versions_load_with_a_log_warning_not_a_python_warning(
    tmp_path: Path, certs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tls_dir(tmp_path, certs)
    path = write(tmp_path, TLS + "  min_version: TLS10\n")
    context = load_web_config(path).ssl_context()  # filterwarnings=error would raise here
    assert context is not None
    assert context.minimum_version == ssl.TLSVersion.TLSv1
    assert any("TLS10 allowed" in r.getMessage() for r in caplog.records)
