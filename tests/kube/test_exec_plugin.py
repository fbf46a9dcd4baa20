"""A kubeconfig's exec credential plugin: its stderr is never shown, and it has a time limit.

Issue 20, items 2 and 3. The official client's ``ExecProvider`` (kubernetes 37,
``kubernetes/config/exec_provider.py``) runs the plugin with ``subprocess`` and no time limit;
it passes the plugin's stderr straight to ours when our stdout is a terminal, and when the
plugin fails the loader logs ``exec: process returned N. <its stderr>`` at ERROR through the
root logger, which Python prints on stderr: a plugin that printed a token (debug output) had
it shown. A plugin that hangs hung ``migscope apply`` and ``analyze --pending-pods on`` with
no output. :mod:`migscope.kube._credentials` now runs the plugin itself, with stdin closed, stderr
discarded and the command's time limit, and reports a failure as one line naming the plugin.

The plugins are real scripts written in ``tmp_path``; the API is
:class:`support.kubeapi.KubeApiServer`, which accepts only the plugin's token; the commands
are the installed ``migscope`` run as processes, once with its stdout on a pseudo-terminal
(where the client passed the plugin's stderr through).
"""

from __future__ import annotations

import errno
import inspect
import json
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from applier.cluster import running_cluster
from applier.test_apply_cli import _report
from support.kubeapi import KubeApiServer

from migscope.kube import ApiError, Kube, KubeConfigError, api_client
from migscope.kube._credentials import DEFAULT_EXEC_TIMEOUT_S

MIGSCOPE = str(Path(sys.executable).with_name("migscope"))
TOKEN = "plugin-T0ken-4e1f"
EXEC_API = "client.authentication.k8s.io/v1"


def plugin(tmp_path: Path, mode: str = "answer", *, expires: str = "") -> Path:
    """A credential plugin that shows its token on stderr, as a debug print would.

    ``mode``: ``answer`` (an ExecCredential with the token, exit 0), ``fail`` (the same, exit
    1), ``hang`` (never answers: a shell waiting on a child that sleeps, as a login flow
    waiting for a browser would), ``once`` (answers the first time, hangs after).
    """
    status = {"token": TOKEN, **({"expirationTimestamp": expires} if expires else {})}
    credential = {"apiVersion": EXEC_API, "kind": "ExecCredential", "status": status}
    hang = [f'sleep 3600 & echo "$!" >> "{tmp_path}/plugin.pids"', "wait"]
    lines = [
        "#!/bin/sh",
        f'echo "$$" >> "{tmp_path}/plugin.pids"',
        f'printf "%s" "$KUBERNETES_EXEC_INFO" > "{tmp_path}/exec-info.json"',
        f'echo "debug: issued token {TOKEN}" >&2',
    ]
    if mode == "hang":
        lines += hang
    if mode == "once":
        lines += [f'if [ -e "{tmp_path}/used" ]; then', *hang, "fi", f'touch "{tmp_path}/used"']
    lines += [f"echo '{json.dumps(credential)}'", f"exit {1 if mode == 'fail' else 0}"]
    script = tmp_path / "get-token"
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return script


def kubeconfig(tmp_path: Path, server: str, command: Path, interactive: str = "Never") -> str:
    path = tmp_path / "kubeconfig"
    user = {
        "exec": {"apiVersion": EXEC_API, "command": str(command), "interactiveMode": interactive}
    }
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "ci-bot", "user": user}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "ci-bot"}}],
                "current-context": "c",
            }
        )
    )
    return str(path)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def plugin_pids(tmp_path: Path) -> list[int]:
    return [int(line) for line in (tmp_path / "plugin.pids").read_text().split()]


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    with KubeApiServer(token=TOKEN) as api:
        yield api


def migscope(*args: str, limit_s: float) -> tuple[int, str, str, float]:
    """Run ``migscope ARGS``; exit status, stdout, stderr, seconds. Fails past ``limit_s``."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [MIGSCOPE, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"migscope {' '.join(args)} still running after {limit_s} s; stderr: {err}")
    return proc.returncode, out, err, time.monotonic() - started


# ------------------------------------------------------------------------------------------
# item 2: the plugin's stderr reaches no output and no log


def test_the_plugins_token_is_used_and_its_stderr_goes_nowhere(
    tmp_path: Path, server: KubeApiServer, capfd: pytest.CaptureFixture[str]
) -> None:
    config = kubeconfig(tmp_path, server.url, plugin(tmp_path))
    with api_client(config) as api:
        nodes = Kube(api).list_nodes()  # the server takes only the plugin's token
    assert nodes == []
    out, err = capfd.readouterr()
    assert TOKEN not in out + err
    info = json.loads((tmp_path / "exec-info.json").read_text())
    assert info == {
        "apiVersion": EXEC_API,
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }


def test_a_client_certificate_from_the_plugin_is_used(tmp_path: Path) -> None:
    script = plugin(tmp_path)
    pem = {"clientCertificateData": "CERT-PEM", "clientKeyData": "KEY-PEM"}
    script.write_text(script.read_text().replace(json.dumps({"token": TOKEN}), json.dumps(pem)))
    with api_client(kubeconfig(tmp_path, "https://127.0.0.1:9", script)) as api:
        cert, key = api.configuration.cert_file, api.configuration.key_file
    assert Path(cert).read_text() == "CERT-PEM"
    assert Path(key).read_text() == "KEY-PEM"


def test_a_plugin_that_needs_a_terminal_is_refused_without_running(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path, "http://127.0.0.1:9", plugin(tmp_path), interactive="Always")
    with pytest.raises(KubeConfigError, match="needs a terminal"):
        api_client(config)
    assert not (tmp_path / "plugin.pids").exists()


def test_a_failing_plugin_is_one_line_without_its_stderr(tmp_path: Path) -> None:
    # Before: "exec: process returned 1. debug: issued token ..." logged at ERROR on stderr,
    # then the command went on without credentials.
    command = plugin(tmp_path, "fail")
    config = kubeconfig(tmp_path, "http://127.0.0.1:9", command)
    code, out, err, _ = migscope(
        "apply", "--plan", _report(tmp_path), "--kubeconfig", config, limit_s=60
    )
    assert TOKEN not in out + err
    assert code == 1
    assert err.count("\n") == 1, err
    assert err.startswith(f"migscope: error: {config}: user ci-bot: exec plugin {command} ")
    assert "exit status 1" in err
    assert "stderr is not shown" in err


def test_in_a_terminal_the_plugins_stderr_is_not_passed_through(tmp_path: Path) -> None:
    # With stdout on a terminal the client handed the plugin our stderr (and stdin).
    with running_cluster(token=TOKEN) as cluster:
        config = kubeconfig(tmp_path, cluster.api.url, plugin(tmp_path))
        primary, secondary = pty.openpty()
        with (tmp_path / "stderr").open("w") as stderr:
            proc = subprocess.Popen(
                [MIGSCOPE, "apply", "--plan", _report(tmp_path), "--kubeconfig", config],
                stdin=secondary,
                stdout=secondary,
                stderr=stderr,
            )
        os.close(secondary)
        shown = b""
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError as exc:  # EIO: the terminal's other side closed
                if exc.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            shown += chunk
        code = proc.wait(timeout=60)
        os.close(primary)
    err = (tmp_path / "stderr").read_text()
    terminal = shown.decode(errors="replace")
    assert code == 0, terminal + err
    assert "dry run" in terminal  # it read the cluster with the plugin's token
    assert TOKEN not in terminal + err


# ------------------------------------------------------------------------------------------
# item 3: a plugin that hangs is stopped at the command's time limit


def test_a_hanging_plugin_is_killed_with_its_children_at_the_limit(tmp_path: Path) -> None:
    command = plugin(tmp_path, "hang")
    started = time.monotonic()
    with pytest.raises(KubeConfigError) as caught:
        api_client(kubeconfig(tmp_path, "http://127.0.0.1:9", command), exec_timeout_s=1.0)
    assert time.monotonic() - started < 20
    assert f"exec plugin {command} did not answer within 1 s" in str(caught.value)
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in plugin_pids(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in plugin_pids(tmp_path))  # the sleeping child too


def test_apply_gives_the_plugin_the_time_of_one_request() -> None:
    request_timeout = inspect.signature(Kube).parameters["timeout_s"].default
    assert request_timeout == DEFAULT_EXEC_TIMEOUT_S == 30


@pytest.mark.parametrize(
    ("command", "limit_s"),
    [
        (
            [
                "analyze",
                "--simulate",
                "h200-node",
                "--window",
                "1h",
                "--pending-pods",
                "on",
                "--timeout",
                "5",
            ],
            5,
        ),
        (["apply", "--plan", "PLAN"], 30),  # apply's request timeout
    ],
    ids=["analyze-pending-pods", "apply-dry-run"],
)
def test_a_hanging_plugin_ends_the_command_with_one_line(
    tmp_path: Path, command: list[str], limit_s: int
) -> None:
    plugin_path = plugin(tmp_path, "hang")
    config = kubeconfig(tmp_path, "http://127.0.0.1:9", plugin_path)
    args = [_report(tmp_path) if a == "PLAN" else a for a in command]
    code, out, err, took = migscope(*args, "--kubeconfig", config, limit_s=limit_s + 20)
    assert code == 1
    assert took < limit_s + 20
    assert err.count("\n") == 1, err
    assert err.startswith("migscope: error: ")
    assert f"exec plugin {plugin_path} did not answer within {limit_s} s" in err
    assert TOKEN not in out + err


def test_a_refresh_that_hangs_is_an_api_error_within_the_limit(
    tmp_path: Path, server: KubeApiServer
) -> None:
    # A token about to expire is refreshed before a request (the client's hook runs the
    # plugin again): that run has the same limit, and its failure is the request's error.
    soon = (datetime.now(timezone.utc) + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    script = plugin(tmp_path, "once", expires=soon)
    with api_client(kubeconfig(tmp_path, server.url, script), exec_timeout_s=1.0) as api:
        started = time.monotonic()
        with pytest.raises(ApiError, match=r"exec plugin .* did not answer within 1 s"):
            Kube(api).list_nodes()
        assert time.monotonic() - started < 20
    assert len(plugin_pids(tmp_path)) == 3  # it ran twice: the second time it hung
