"""``migscope schedule`` parses every job's ``migscope`` arguments when it reads the file.

Issue 22, item 6: ``--check`` passed a report job with ``--promethus`` (a typo) and one with
``--window "7 days"`` (not a duration); both failed only at their first run, a week later.
Now ``--check``, start-up and ``--once`` put each ``report``/``apply`` job's ``args`` through
the real ``migscope analyze``/``apply`` parser and refuse the file with one line per bad job.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from migscope.cli.main import cli

MIGSCOPE = str(Path(sys.executable).with_name("migscope"))

GOOD = """\
timezone: Europe/Berlin
jobs:
  - name: weekly-report
    kind: report
    cron: "0 6 * * 1"
    args: ["--prometheus", "http://prometheus:9090", "--window", "7d", "--step=60s",
           "--header", "X-Scope-OrgID: team-a", "--stats", "fast"]
    out_dir: {out}
  - name: weekend-apply
    kind: apply
    cron: "0 2 * * 6"
    args: ["--plan", "{out}/latest/report.json", "--apply", "--max-nodes", "2",
           "--max-plan-age", "6d", "--maintenance-window", "sat-sun 01:00-05:00 Europe/Berlin",
           "--node-timeout=30m"]
  - name: publish
    kind: command
    cron: "30 6 * * 1"
    command: ["/usr/local/bin/upload-report", "--promethus", "7 days"]
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "schedule.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def check(path: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["schedule", "--config", path, "--check"])
    return result.exit_code, result.stdout, result.stderr


def one_job(kind: str, args: list[str], out: Path) -> str:
    extra = f"\n    out_dir: {out}" if kind == "report" else ""
    return (
        "jobs:\n"
        "  - name: the-job\n"
        f"    kind: {kind}\n"
        '    cron: "0 6 * * 1"\n'
        f"    args: {json.dumps(args)}{extra}\n"
    )


def test_a_good_file_passes(tmp_path: Path) -> None:
    code, out, err = check(write(tmp_path, GOOD.format(out=tmp_path)))
    assert (code, err) == (0, "")
    assert [line.split()[0] for line in out.splitlines()] == [
        "weekly-report",
        "weekend-apply",
        "publish",  # a command job's arguments are its program's: not checked
    ]


def test_the_issue_typo_and_duration_each_fail_in_one_line(tmp_path: Path) -> None:
    text = GOOD.format(out=tmp_path).replace(
        '["--prometheus", "http://prometheus:9090", "--window", "7d"',
        '["--promethus", "http://prometheus:9090", "--window", "7d"',
    )
    text += (
        "  - name: daily-report\n"
        "    kind: report\n"
        '    cron: "0 6 * * *"\n'
        '    args: ["--prometheus", "http://prometheus:9090", "--window", "7 days"]\n'
        f"    out_dir: {tmp_path}\n"
    )
    path = write(tmp_path, text)
    code, out, err = check(path)
    assert code == 1
    assert out == ""  # no table: the file is refused
    lines = err.splitlines()
    assert lines == [
        f"migscope: error: {path}:6: jobs[0].args[0]: job 'weekly-report': migscope analyze: "
        "No such option '--promethus'. (Did you mean one of: '--prometheus', "
        "'--prometheus-embedded'?)",
        f"migscope: error: {path}:22: jobs[3].args[2]: job 'daily-report': migscope analyze: "
        "bad --window '7 days': expected a duration such as 7d, 24h, 90m or 1d12h",
    ]


@pytest.mark.parametrize(
    ("kind", "args", "position", "wanted"),
    [
        (
            "report",
            ["--prometheus", "http://p:9090", "--window=1 week"],
            2,
            "bad --window '1 week'",
        ),
        ("report", ["--prometheus", "http://p:9090", "--window", "0d"], 2, "bad --window '0d'"),
        ("report", ["--prometheus", "http://p:9090", "--step", "a minute"], 2, "bad --step"),
        ("report", ["--prometheus", "http://p:9090", "--timeout", "-5"], 2, "bad --timeout"),
        ("report", ["--prometheus", "http://p:9090", "--stats", "quick"], 2, "'--stats'"),
        ("report", ["--prometheus", "http://p:9090", "--headroom", "lots"], 2, "bad --headroom"),
        ("report", ["--prometheus", "http://p:9090", "--headroom", "5"], 2, "write 500%"),
        ("report", ["--prometheus", "http://p:9090", "--end", "monday"], 2, "bad --end"),
        ("report", ["--prometheus", "http://p:9090", "--what-if", "n1="], 2, "bad --what-if"),
        ("report", ["--prometheus"], 0, "'--prometheus' requires an argument"),
        ("report", ["--window", "7d"], None, "give exactly one of --source"),
        ("report", ["--prometheus", "http://p:9090", "extra"], None, "unexpected extra argument"),
        ("apply", ["--apply"], None, "Missing option '--plan'"),
        ("apply", ["--plan", "r.json", "--max-nodes", "0"], 2, "'--max-nodes': 0 is not in"),
        ("apply", ["--plan", "r.json", "--node-timeout", "5 minutes"], 2, "bad --node-timeout"),
        ("apply", ["--plan", "r.json", "--max-plan-age", "24"], 2, "bad --max-plan-age '24'"),
        (
            "apply",
            ["--plan", "r.json", "--maintenance-window", "saturday 1am-5am"],
            2,
            "bad maintenance window 'saturday 1am-5am'",
        ),
        (  # the deprecated spelling of the same flag
            "apply",
            ["--plan", "r.json", "--window", "sat 01:00-05:00 europe/berlin"],
            2,
            "names are case-sensitive: did you mean 'Europe/Berlin'?",
        ),
        ("apply", ["--plan", "r.json", "-h"], 2, "-h prints the help and runs nothing"),
    ],
)
def test_each_mistake_names_the_job_and_the_argument(
    tmp_path: Path, kind: str, args: list[str], position: int | None, wanted: str
) -> None:
    path = write(tmp_path, one_job(kind, args, tmp_path))
    code, out, err = check(path)
    assert (code, out) == (1, "")
    [line] = err.splitlines()
    key = "jobs[0].args" + ("" if position is None else f"[{position}]")
    command = "analyze" if kind == "report" else "apply"
    assert line.startswith(f"migscope: error: {path}:5: {key}: job 'the-job': migscope {command}: ")
    assert wanted in line


def test_a_credential_in_a_refused_argument_is_not_printed(tmp_path: Path) -> None:
    # --prometheus takes "--window" as its URL, so the URL is an unexpected extra argument
    args = ["--prometheus", "--window", "http://alice:S3cretPW@prom:9090/?api_key=K3y"]
    code, _, err = check(write(tmp_path, one_job("report", args, tmp_path)))
    assert code == 1
    assert "unexpected extra argument" in err
    assert "S3cretPW" not in err
    assert "K3y" not in err


def run_migscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MIGSCOPE, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_scheduler_does_not_start_with_a_bad_job(tmp_path: Path) -> None:
    """Start-up checks too (a scheduler that would start would run until the timeout)."""
    text = GOOD.format(out=tmp_path).replace('"--window", "7d"', '"--window", "7 days"')
    path = write(tmp_path, text)
    for extra in ([], ["--once", "publish"]):  # --once reads the same file the same way
        proc = run_migscope("schedule", "--config", path, *extra)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.splitlines() == [
            f"migscope: error: {path}:6: jobs[0].args[2]: job 'weekly-report': "
            "migscope analyze: bad --window '7 days': expected a duration such as 7d, 24h, "
            "90m or 1d12h"
        ]
        assert "scheduler_started" not in proc.stderr
        assert "run_started" not in proc.stderr


def test_checking_writes_nothing_into_the_json_log(tmp_path: Path) -> None:
    """A deprecated flag warns on stderr when parsed; the check must not put that line (or
    anything but JSON) into the scheduler's log."""
    text = (
        "jobs:\n"
        "  - name: weekend-apply\n"
        "    kind: apply\n"
        '    cron: "0 2 * * 6"\n'
        '    args: ["--plan", "r.json", "--window", "sat 01:00-05:00", "--timeout", "5m"]\n'
        "  - name: hello\n"
        "    kind: command\n"
        '    cron: "0 2 * * 6"\n'
        '    command: ["true"]\n'
    )
    proc = run_migscope("schedule", "--config", write(tmp_path, text), "--once", "hello")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stderr.splitlines()]
    assert [e["event"] for e in events if e["event"].startswith("run_")] == [
        "run_started",
        "run_finished",
    ]
