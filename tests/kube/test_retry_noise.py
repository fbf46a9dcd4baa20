"""A refused connection is one line, not three urllib3 warnings first (issue 25, item 7)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import yaml


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_pending_pods_against_a_refused_connection_is_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": f"http://127.0.0.1:{_closed_port()}"}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    ran = subprocess.run(
        [
            str(Path(sys.executable).parent / "migscope"),
            "analyze",
            "--simulate",
            "h200-node",
            "--pending-pods",
            "on",
            "--kubeconfig",
            str(kubeconfig),
            "--timeout",
            "5",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 1, ran.stderr
    lines = [x for x in ran.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith("migscope: error: pending pods:")
    assert "Retrying" not in ran.stderr
