"""The scheduler never writes a credential from a job's command line (issue 20, item 1).

A fault run found ``migscope schedule`` printing the Prometheus password: its ``run_started``
line logged the child's whole argv, ``http://alice:S3cretPW@prom:9090/?api_key=...``
included, while ``migscope analyze`` alone leaks nothing. Everything the scheduler emits
(the JSON log, the run's result, the webhook's body) now goes through
:mod:`migscope.core._redaction`. These tests run the real scheduler (the installed
``migscope schedule --once`` as a process, and :class:`Runner` in-process for the run
record) with the exact URL of the report, a ``--header 'Authorization: Bearer ...'``, and a
``command`` child that prints the URL on both streams and fails with it.
"""

from __future__ import annotations

import http.server
import io
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from migscope.scheduler import JsonLog, Runner, parse_schedule

MIGSCOPE = str(Path(sys.executable).with_name("migscope"))

PASSWORD = "S3cretPW"
API_KEY = "K3yV4lue"
BEARER = "hdrT0ken9"
URL = f"http://alice:{PASSWORD}@prom:9090/?api_key={API_KEY}"
SECRETS = (PASSWORD, API_KEY, BEARER)


class Hook:
    """A webhook receiver on loopback that records every body it gets."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                hook.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook()
    yield server
    server.server.shutdown()
    server.server.server_close()


def schedule(tmp_path: Path, webhook: str) -> str:
    report_args = ["--prometheus", URL, "--header", f"Authorization: Bearer {BEARER}"]
    report_args += ["--timeout", "2", "--window", "1h"]
    script = f'echo "querying {URL}"; echo "cannot reach {URL}" >&2; exit 2'
    return json.dumps(
        {
            "jobs": [
                {
                    "name": "weekly-report",
                    "kind": "report",
                    "cron": "0 6 * * 1",
                    "args": report_args,
                    "out_dir": str(tmp_path / "reports"),
                    "webhook": webhook,
                },
                {
                    "name": "leaky",
                    "kind": "command",
                    "cron": "0 6 * * 1",
                    "command": ["sh", "-c", script, "--password", PASSWORD],
                    "webhook": webhook,
                },
            ]
        }
    )


def assert_no_secret(where: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} in {where}:\n{text}"


def everything_under(path: Path) -> str:
    return "\n".join(
        f"{p}: {p.read_text(errors='replace')}" for p in sorted(path.rglob("*")) if p.is_file()
    )


@pytest.mark.parametrize("job", ["weekly-report", "leaky"])
def test_once_logs_posts_and_writes_no_credential(tmp_path: Path, hook: Hook, job: str) -> None:
    config = tmp_path / "schedule.yaml"
    config.write_text(schedule(tmp_path, hook.url), encoding="utf-8")
    result = subprocess.run(
        [MIGSCOPE, "schedule", "--config", str(config), "--once", job],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode != 0  # prom:9090 does not exist; the script exits 2
    events = [json.loads(line) for line in result.stderr.splitlines()]
    assert_no_secret("the scheduler's log", result.stderr)
    assert_no_secret("stdout", result.stdout)
    assert len(hook.bodies) == 1
    assert_no_secret("the webhook body", hook.bodies[0].decode())
    if (tmp_path / "reports").exists():
        assert_no_secret("the run directory", everything_under(tmp_path / "reports"))

    started = next(e for e in events if e["event"] == "run_started")
    argv = started["argv"]
    if job == "weekly-report":
        # What was run is still readable: the host, the parameter's name, the header's name.
        assert "http://***@prom:9090/?api_key=***" in argv
        assert argv[argv.index("--header") + 1] == "Authorization: ***"
    else:
        assert argv[-2:] == ["--password", "***"]
        outputs = [e["line"] for e in events if e["event"] == "output"]
        assert "querying http://***@prom:9090/?api_key=***" in outputs
        finished = next(e for e in events if e["event"] == "run_finished")
        assert finished["error"] == "cannot reach http://***@prom:9090/?api_key=***"
        body = json.loads(hook.bodies[0])
        assert body["error"] == finished["error"]
        assert body["summary"] == ["querying http://***@prom:9090/?api_key=***"]


def test_the_run_record_holds_no_credential(tmp_path: Path, hook: Hook) -> None:
    # Runner in-process: its RunResult (what --once exits with, what the webhook carries).
    config = parse_schedule(schedule(tmp_path, hook.url), source="schedule.yaml")
    log = io.StringIO()
    result = Runner(config, JsonLog(log)).run("leaky")
    assert result.status == "failed"
    assert_no_secret("the run record", repr(result))
    assert_no_secret("the webhook payload", json.dumps(result.payload()))
    assert_no_secret("the log", log.getvalue())
