"""``migscope analyze --prometheus`` through tenants, extra headers, TLS and auth, for real.

What is proved against real servers:

- the tenant (``--tenant`` → ``X-Scope-OrgID``) and every extra header (``--header``,
  ``--header-file``) arrive on every request the analysis sends: a
  :class:`~support.prometheus.FaultProxy` in front of a real Prometheus records them, and the
  report comes out of that Prometheus's data;
- a real Prometheus that requires a client certificate signed by a CA made here (openssl)
  accepts ``--ca-file --client-cert --client-key`` and basic auth from
  ``--basic-auth-user``/``--basic-auth-password-file``, and refuses a run without the
  certificate, with a certificate from another CA, or with a wrong password, each as one
  line;
- a header value never shows in a message or in any file the run writes.

Every flag mistake (a missing file, a malformed header, contradicting flags) is one line
naming the flag and the file and never quoting a header's value.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from support.prometheus import FaultProxy, HistorySeries, PrometheusServer, requires_prometheus

from migscope.analyzer._intake.backfill import iter_history
from migscope.analyzer._intake.simulation import load_fleet, simulate_slices
from migscope.cli._server_access import MAX_SECRET_FILE_BYTES, read_access
from migscope.cli.main import cli
from migscope.sim import resolve_scenario

DAY = 86400.0
SECRET = "k3y-9f2c-DO-NOT-LEAK"  # an API key in a header: must never be printed or written


def analyze(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["analyze", *args])
    return result.exit_code, result.stdout, result.stderr


def one_line_error(code: int, out: str, err: str) -> str:
    """The error of a run that must fail with exactly one line."""
    assert code == 1, (out, err)
    assert out == ""
    assert err.startswith("migscope: error: "), err
    assert err.count("\n") == 1, err
    return err


# --------------------------------------------------------------------------------------------
# Flag mistakes: one line, the flag and the file named, no value quoted


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    made = {
        "headers": "# the gateway's key\nX-Api-Key: " + SECRET + "\n\nX-Team: gpu\n",
        "bad_line": "X-Team: gpu\nAuthorization " + SECRET + "\n",
        "comments_only": "# nothing yet\n\n",
        "password2": "first\nsecond\n",
        "password": "s3cret\n",
    }
    out = {name: str(tmp_path / name) for name in made}
    for name, text in made.items():
        Path(out[name]).write_text(text)
    latin1 = tmp_path / "latin1"
    latin1.write_bytes(b"X-Name: caf\xe9\n")
    out["latin1"] = str(latin1)
    big = tmp_path / "big"
    big.write_text("X-Pad: " + "a" * MAX_SECRET_FILE_BYTES + "\n")
    out["big"] = str(big)
    out["missing"] = str(tmp_path / "missing")
    return out


# (flags, text the one error line must contain); {name} is a path from the fixture above.
FLAG_MISTAKES = [
    (["--header", f"Bearer {SECRET}"], "bad --header: expected 'Name: value'"),
    (["--header", f"X Api Key: {SECRET}"], "bad --header: expected 'Name: value'"),
    (["--header", "X-Api-Key:   "], "bad --header X-Api-Key: the value is empty"),
    (["--header", "X-Api-Key: a\x01b"], "X-Api-Key: the value contains a control"),
    (["--header", "X-A: 1", "--header", "x-a: 2"], "header x-a is given twice"),
    (["--header", "Accept-Encoding: br"], "header Accept-Encoding is set by migscope itself"),
    (["--header", "Host: other"], "header Host is set by migscope itself"),
    (["--tenant", "a", "--header", "X-Scope-OrgID: b"], "give the tenant once"),
    (["--tenant", "  "], "--tenant is empty"),
    (["--tenant", "a\nb"], "bad --tenant: it contains a newline"),
    (
        ["--header", f"Authorization: Basic {SECRET}", "--bearer-token-file", "{password}"],
        "an Authorization header and --bearer-token-file: give one of them",
    ),
    (["--header-file", "{missing}"], "cannot read --header-file {missing}: No such file"),
    (["--header-file", "{bad_line}"], "bad --header-file {bad_line} line 2: expected"),
    (["--header-file", "{comments_only}"], "--header-file {comments_only}: no 'Name: value'"),
    (["--header-file", "{latin1}"], "--header-file {latin1}: not UTF-8 text"),
    (["--header-file", "{big}"], "--header-file {big}: larger than 64 KiB"),
    (["--header-file", "{headers}", "--header", "X-Team: ml"], "header X-Team is given twice"),
    (["--ca-file", "{missing}"], "cannot read --ca-file {missing}: No such file"),
    (["--ca-file", "{password}"], "--ca-file {password}: not a PEM CA bundle"),
    (["--client-key", "{password}"], "--client-key goes with --client-cert"),
    (["--client-cert", "{missing}"], "cannot read --client-cert {missing}: No such file"),
    (
        ["--client-cert", "{password}", "--client-key", "{password}"],
        "--client-cert {password} and --client-key {password}: not a PEM certificate",
    ),
    (
        ["--insecure-skip-verify", "--ca-file", "{password}"],
        "--insecure-skip-verify makes --ca-file pointless",
    ),
    (["--basic-auth-user", "bob"], "--basic-auth-user and --basic-auth-password-file go together"),
    (
        ["--basic-auth-user", "bob:x", "--basic-auth-password-file", "{password}"],
        "bad --basic-auth-user: it must be non-empty and hold no colon",
    ),
    (
        ["--basic-auth-user", "bob", "--basic-auth-password-file", "{password2}"],
        "--basic-auth-password-file {password2}: it must hold the password alone on one line",
    ),
    (
        [
            "--basic-auth-user",
            "bob",
            "--basic-auth-password-file",
            "{password}",
            "--bearer-token-file",
            "{password}",
        ],
        "give one of --bearer-token-file and --basic-auth-user",
    ),
]


@pytest.mark.parametrize(("flags", "message"), FLAG_MISTAKES)
def test_flag_mistakes_are_one_line_without_the_value(
    files: dict[str, str], flags: list[str], message: str
) -> None:
    argv = [f.format(**files) for f in flags]
    # A closed port: every one of these must be refused before anything is sent.
    err = one_line_error(*analyze("--prometheus", "http://127.0.0.1:1", *argv))
    assert message.format(**files) in err
    assert SECRET not in err


def test_server_flags_need_a_server(files: dict[str, str]) -> None:
    err = one_line_error(
        *analyze("--simulate", "h200-node", "--tenant", "a", "--header-file", files["headers"])
    )
    assert "--tenant, --header-file: only with --prometheus URL" in err
    assert SECRET not in err


def test_a_user_in_the_url_and_a_basic_auth_flag_conflict(files: dict[str, str]) -> None:
    err = one_line_error(
        *analyze(
            "--prometheus",
            "http://alice:pw@127.0.0.1:1",
            "--basic-auth-user",
            "bob",
            "--basic-auth-password-file",
            files["password"],
        )
    )
    assert "the --prometheus URL holds a user" in err
    assert "pw" not in err.replace("password", "")


def test_header_file_tenant_and_headers_become_the_clients_headers(files: dict[str, str]) -> None:
    access = read_access(
        tenant=" team-a|team-b ",
        header=["X-Trace:  on "],
        header_file=[files["headers"]],
    )
    assert dict(access.headers) == {
        "X-Scope-OrgID": "team-a|team-b",
        "X-Trace": "on",
        "X-Api-Key": SECRET,
        "X-Team": "gpu",
    }
    assert access.flags == ("--tenant", "--header", "--header-file")
    assert SECRET not in repr(access)  # a debugger or a log record never shows it
    password = read_access(basic_auth_user="bob", basic_auth_password_file=files["password"])
    assert password.basic_auth == ("bob", "s3cret")
    assert "s3cret" not in repr(password)


# --------------------------------------------------------------------------------------------
# Headers reach a real server


def _recent_history(tmp: Path) -> list[HistorySeries]:
    """The last day of ``h200-node``, moved so that it ends a minute ago (``--window 1d``).

    Samples are lists, not iterators: two servers of this module are backfilled from them.
    """
    tree = yaml.safe_load(Path(resolve_scenario("h200-node")).read_text())
    start = (int(time.time()) // 60) * 60 - DAY - 60
    tree["start"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
    path = tmp / "recent.yaml"
    path.write_text(yaml.safe_dump(tree))
    slices = simulate_slices(load_fleet([path]), window_s=DAY, step_s=60.0)
    return [
        HistorySeries(name, labels, list(zip((ms / 1000.0).tolist(), values.tolist(), strict=True)))
        for name, labels, ms, values in iter_history(slices)
    ]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> list[HistorySeries]:
    return _recent_history(tmp_path_factory.mktemp("recent"))


@requires_prometheus
def test_tenant_and_headers_arrive_on_every_request(
    history: list[HistorySeries], files: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with PrometheusServer(history) as prom, FaultProxy(prom.url) as proxy:
        code, stdout, err = analyze(
            "--prometheus", proxy.url, "--window", "1d", "--pending-pods", "off",
            "--tenant", "gpu-team", "--header", "X-Trace: on",
            "--header-file", files["headers"], "--out", str(out), "--progress-interval", "0",
        )  # fmt: skip
        requests = list(proxy.requests)
    assert code == 0, err
    assert len(requests) >= 3  # discovery, statistics, GPUs: a real analysis, not one probe
    for request in requests:
        assert request.headers["x-scope-orgid"] == "gpu-team"
        assert request.headers["x-trace"] == "on"
        assert request.headers["x-api-key"] == SECRET
        assert request.headers["x-team"] == "gpu"
        assert "authorization" not in request.headers
    report = json.loads((out / "report.json").read_text())
    assert {"idle", "unallocated", "oversized"} <= {s["status"] for s in report["slices"]}
    assert report["provenance"]["source"] == {"kind": "prometheus", "url": proxy.url}
    # The key is in no message, no progress line and no file the run wrote.
    for text in (stdout, err, *(p.read_text() for p in out.iterdir())):
        assert SECRET not in text
        assert "gpu-team" not in text  # the tenant is a header value too


# --------------------------------------------------------------------------------------------
# Mutual TLS and basic auth on a real Prometheus


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


_EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")


def _make_ca(d: Path, name: str) -> None:
    _openssl(
        "req", "-x509", *_EC, "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt",
        "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=d,
    )  # fmt: skip


def _make_leaf(d: Path, name: str, ca: str, usage: str, san: str = "") -> None:
    ext = d / f"{name}.ext"
    ext.write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        f"extendedKeyUsage={usage}\n" + (f"subjectAltName={san}\n" if san else "")
    )
    _openssl(
        "req", *_EC, "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
        "-subj", f"/CN={name}", cwd=d,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", str(ext),
        cwd=d,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed (Debian package 'openssl')")
    d = tmp_path_factory.mktemp("pki")
    _make_ca(d, "ca")
    _make_ca(d, "rogue-ca")
    _make_leaf(d, "server", "ca", "serverAuth", "IP:127.0.0.1")
    _make_leaf(d, "client", "ca", "clientAuth")
    _make_leaf(d, "rogue-client", "rogue-ca", "clientAuth")
    (d / "client-bundle.pem").write_text(
        (d / "client.crt").read_text() + (d / "client.key").read_text()
    )
    _openssl(
        "pkey", "-in", "client.key", "-out", "client-encrypted.key", "-aes256",
        "-passout", "pass:x", cwd=d,
    )  # fmt: skip
    return d


def _web_config(pki: Path, client_auth: str, hashed: str) -> str:
    return (
        "tls_server_config:\n"
        f"  cert_file: {pki / 'server.crt'}\n  key_file: {pki / 'server.key'}\n"
        f"  client_auth_type: {client_auth}\n  client_ca_file: {pki / 'ca.crt'}\n"
        f"basic_auth_users:\n  alice: {hashed}\n"
    )


@pytest.fixture(scope="module")
def mtls_prometheus(pki: Path, history: list[HistorySeries]) -> Iterator[PrometheusServer]:
    """A Prometheus that wants a certificate from ``ca`` and alice's password on every request.

    It starts with ``VerifyClientCertIfGiven`` (its readiness probe has no certificate), then
    its web config is rewritten to ``RequireAndVerifyClientCert``: Prometheus reads the web
    config file on every connection, and the test below checks that it now refuses a run
    without a certificate.
    """
    bcrypt = pytest.importorskip("bcrypt", reason="bcrypt comes with migscope[exporter]")
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("prometheus/promtool not installed (Debian package 'prometheus')")
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    config = _web_config(pki, "VerifyClientCertIfGiven", hashed)
    with PrometheusServer(history, web_config=config) as prom:
        (prom.root / "web.yml").write_text(_web_config(pki, "RequireAndVerifyClientCert", hashed))
        yield prom


def _mtls_run(prom: PrometheusServer, pki: Path, *flags: str) -> tuple[int, str, str]:
    password = pki / "alice.password"
    password.write_text("s3cret\n")
    return analyze(
        "--prometheus", prom.url, "--window", "1d", "--pending-pods", "off", "-o", "json",
        "--ca-file", str(pki / "ca.crt"),
        "--basic-auth-user", "alice", "--basic-auth-password-file", str(password), *flags,
    )  # fmt: skip


def test_a_server_requiring_a_client_certificate_accepts_ours(
    mtls_prometheus: PrometheusServer, pki: Path
) -> None:
    prom = mtls_prometheus
    assert prom.url.startswith("https://")
    for flags in (
        ("--client-cert", str(pki / "client.crt"), "--client-key", str(pki / "client.key")),
        ("--client-cert", str(pki / "client-bundle.pem")),  # certificate and key in one file
    ):
        code, out, err = _mtls_run(prom, pki, *flags)
        assert code == 0, err
        report = json.loads(out)
        assert {"idle", "unallocated", "oversized"} <= {s["status"] for s in report["slices"]}
        assert report["provenance"]["source"]["url"] == prom.url
        assert "s3cret" not in out + err


def test_a_server_requiring_a_client_certificate_refuses_others(
    mtls_prometheus: PrometheusServer, pki: Path
) -> None:
    prom = mtls_prometheus
    without = one_line_error(*_mtls_run(prom, pki))
    assert f"TLS with {prom.url}/api/v1/" in without
    assert "--client-cert" in without  # the advice fits the failure: a certificate is wanted
    rogue = one_line_error(
        *_mtls_run(
            prom, pki,
            "--client-cert", str(pki / "rogue-client.crt"),
            "--client-key", str(pki / "rogue-client.key"),
        )
    )  # fmt: skip
    assert f"TLS with {prom.url}/api/v1/" in rogue
    assert "--client-cert" in rogue
    encrypted = one_line_error(
        *_mtls_run(
            prom, pki,
            "--client-cert", str(pki / "client.crt"),
            "--client-key", str(pki / "client-encrypted.key"),
        )
    )  # fmt: skip
    assert "the private key is encrypted" in encrypted
    wrong_password = pki / "wrong.password"
    wrong_password.write_text("guess\n")
    code, out, err = analyze(
        "--prometheus", prom.url, "--window", "1d", "--pending-pods", "off",
        "--ca-file", str(pki / "ca.crt"),
        "--client-cert", str(pki / "client.crt"), "--client-key", str(pki / "client.key"),
        "--basic-auth-user", "alice", "--basic-auth-password-file", str(wrong_password),
    )  # fmt: skip
    assert "not authorised" in one_line_error(code, out, err)
    assert "guess" not in err


def test_an_unknown_server_ca_says_to_give_the_ca_file(
    mtls_prometheus: PrometheusServer, pki: Path
) -> None:
    err = one_line_error(
        *analyze(
            "--prometheus", mtls_prometheus.url, "--window", "1d", "--pending-pods", "off",
            "--client-cert", str(pki / "client.crt"), "--client-key", str(pki / "client.key"),
        )
    )  # fmt: skip
    assert "certificate verify failed" in err
    assert "--ca-file" in err
