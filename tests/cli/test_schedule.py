"""``migscope schedule``: config errors, cron meaning, real runs, no overlap, coalescing,
misfire grace, clean shutdown, time limits, ``latest`` and the webhook.

Scheduler tests start the installed console script as a process and read its JSON log; the
runs are real children (``migscope analyze --simulate``, ``sh``), the webhook a real HTTP
server on loopback.
"""

from __future__ import annotations

import http.server
import io
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from migscope.cli.main import cli
from migscope.scheduler import (
    JsonLog,
    Runner,
    ScheduleError,
    cron_trigger,
    parse_schedule,
    update_latest,
    zone,
)

MIGSCOPE = str(Path(sys.executable).with_name("migscope"))
Event = dict[str, Any]


# ------------------------------------------------------------------------------------------
# helpers


def write(tmp_path: Path, text: str, name: str = "schedule.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["schedule", *args])
    return result.exit_code, result.stdout, result.stderr


def parse_log(text: str) -> list[Event]:
    """Every stderr line is one JSON object; anything else fails the test."""
    events = [json.loads(line) for line in text.splitlines() if line.strip()]
    for event in events:
        assert {"ts", "level", "event"} <= set(event), event
    return events


def ts(event: Event) -> float:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def named(events: list[Event], name: str, job: str | None = None) -> list[Event]:
    return [e for e in events if e["event"] == name and (job is None or e.get("job") == job)]


class Scheduler:
    """``migscope schedule`` as a process; its stderr (the JSON log) goes to a file."""

    def __init__(self, config: str, tmp_path: Path, *args: str) -> None:
        self.log_path = tmp_path / "scheduler.log"
        self._log = self.log_path.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [MIGSCOPE, "schedule", "--config", config, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )

    def events(self) -> list[Event]:
        return parse_log(self.log_path.read_text(encoding="utf-8"))

    def wait_for(self, done: Callable[[list[Event]], bool], timeout: float = 20.0) -> list[Event]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self.events()
            if done(events):
                return events
            assert self.proc.poll() is None, f"scheduler exited: {self.log_path.read_text()}"
            time.sleep(0.05)
        raise AssertionError(f"timed out; log:\n{self.log_path.read_text()}")

    def stop(self, *signals: signal.Signals, timeout: float = 15.0) -> tuple[int, float]:
        """Send the signals; the exit status and the seconds it took to exit."""
        started = time.monotonic()
        for sig in signals or (signal.SIGTERM,):
            self.proc.send_signal(sig)
            time.sleep(0.3)
        code = self.proc.wait(timeout=timeout)
        return code, time.monotonic() - started

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Scheduler]]:
    started: list[Scheduler] = []

    def run(config: str, *args: str) -> Scheduler:
        scheduler = Scheduler(config, tmp_path, *args)
        started.append(scheduler)
        return scheduler

    yield run
    for scheduler in started:
        scheduler.close()


class Hook:
    """A webhook receiver on loopback that records every request and answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[tuple[dict[str, str], Any]] = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                hook.requests.append((dict(self.headers), json.loads(body)))
                self.send_response(hook.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook()
    yield server
    server.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def q(value: object) -> str:
    """A YAML flow value (JSON is YAML)."""
    return json.dumps(value)


def seconds_from_now(*delays: float) -> list[int]:
    """Seconds of the minute ``delays`` from now: a cron second field that fires seldom."""
    now = time.time()
    return sorted({int(now + delay) % 60 for delay in delays})


# ------------------------------------------------------------------------------------------
# the file and the cron lines


GOOD = """\
timezone: Europe/Berlin
misfire_grace_seconds: 600
jobs:
  - name: weekly-report
    kind: report
    cron: "0 6 * * 1"
    args: ["--prometheus", "http://prometheus:9090", "--window", "7d"]
    out_dir: /var/lib/migscope/reports
    webhook: https://hooks.example.com/x
  - name: weekend-apply
    kind: apply
    cron: "0 2 * * 6"
    args: ["--plan", "/var/lib/migscope/reports/latest/report.json", "--apply"]
  - name: every-other-day
    kind: command
    cron: "30 3 * * */2"
    command: ["/bin/true"]
"""


def test_check_prints_each_jobs_next_run_with_crontab_weekdays(tmp_path: Path) -> None:
    code, out, err = invoke("--config", write(tmp_path, GOOD), "--check")
    assert (code, err) == (0, ""), err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "weekly-report",
        "weekend-apply",
        "every-other-day",
    ]
    nexts = [datetime.fromisoformat(line.rsplit("next: ", 1)[1]) for line in lines]
    # crontab counts Sunday = 0: "1" is Monday, "6" Saturday (APScheduler 3 would say Tuesday
    # and Sunday), "*/2" is Sun, Tue, Thu, Sat; the hour is Berlin's, DST included.
    assert (nexts[0].weekday(), nexts[0].hour, nexts[0].minute) == (0, 6, 0)
    assert (nexts[1].weekday(), nexts[1].hour) == (5, 2)
    assert nexts[2].isoweekday() % 7 in (0, 2, 4, 6)
    berlin = zone("Europe/Berlin")
    for when in nexts:
        assert when.utcoffset() == when.astimezone(berlin).utcoffset()
        assert timedelta(0) < when - datetime.now(timezone.utc) <= timedelta(days=7)


@pytest.mark.parametrize(
    ("expr", "now", "expected"),
    [
        # both day fields restricted: cron fires on either (the 13th or a Friday)
        ("0 0 13 * 5", "2026-02-01T00:00:00", ["2026-02-06", "2026-02-13", "2026-02-20"]),
        ("0 0 * * 0-7/2", "2026-02-01T00:00:00", ["2026-02-01", "2026-02-03", "2026-02-05"]),
        ("0 0 * * */2", "2026-02-02T00:00:00", ["2026-02-03", "2026-02-05", "2026-02-07"]),
        ("0 0 * * fri-sat", "2026-02-01T00:00:00", ["2026-02-06", "2026-02-07", "2026-02-13"]),
        ("@weekly", "2026-02-02T00:00:00", ["2026-02-08", "2026-02-15", "2026-02-22"]),
        ("0 12 1 */4 *", "2026-02-01T00:00:00", ["2026-05-01", "2026-09-01", "2027-01-01"]),
    ],
)
def test_cron_lines_fire_when_cron_would(expr: str, now: str, expected: list[str]) -> None:
    trigger = cron_trigger(expr, timezone.utc)
    moment = datetime.fromisoformat(now).replace(tzinfo=timezone.utc)
    fired: list[str] = []
    previous = None
    for _ in expected:
        moment = trigger.get_next_fire_time(previous, moment)
        fired.append(moment.date().isoformat())
        previous, moment = moment, moment + timedelta(seconds=1)
    assert fired == expected


def test_six_fields_put_seconds_first() -> None:
    trigger = cron_trigger("*/15 * * * * *", timezone.utc)
    start = datetime(2026, 2, 1, 10, 0, 1, tzinfo=timezone.utc)
    assert trigger.get_next_fire_time(None, start) == start.replace(second=15)


JOB = """\
jobs:
  - name: r
    kind: report
    cron: "0 6 * * 1"
    args: ["--simulate", "h200-node"]
    out_dir: /tmp/reports
"""


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            JOB.replace("0 6 * * 1", "0 6 * *"),
            4,
            "jobs[0].cron: bad cron line '0 6 * *': expected 5",
        ),
        (JOB.replace("0 6 * * 1", "61 6 * * 1"), 4, "jobs[0].cron: bad cron line '61 6 * * 1'"),
        (JOB.replace("0 6 * * 1", "0 6 * * 8"), 4, "day-of-week '8' is not a day"),
        (JOB + "    colour: red\n", 7, "jobs[0].colour: unknown key (allowed here: name, kind"),
        (JOB.replace("kind: report", "kind: reprot"), 3, "jobs[0].kind: must be one of report"),
        (JOB.replace('    args: ["--simulate", "h200-node"]\n', ""), 2, "jobs[0].args: required"),
        (JOB.replace("out_dir", "command: [x]\n    out_dir"), 6, "jobs[0].command: not allowed"),
        ("timezone: Mars/Olympus\n" + JOB, 1, "timezone: unknown time zone 'Mars/Olympus'"),
        (
            JOB.replace('"h200-node"]', "2]"),
            5,
            "jobs[0].args[1]: must be a string, got the number 2",
        ),
        (JOB.replace("name: r", "name: Weekly_Report"), 2, "jobs[0].name: must be lowercase"),
        (JOB + JOB.split("\n", 1)[1], 7, "jobs[1].name: duplicate job name 'r' (also jobs[0])"),
        (JOB.replace('h200-node"]', 'h200-node", "--out", "x"]'), 5, "--out is set by out_dir"),
        ("misfire_grace_seconds: 0\n" + JOB, 1, "misfire_grace_seconds: must be at least 1"),
        ("jobs: []\n", 1, "jobs: must list at least one job"),
        (JOB.replace("kind: report", "kind: [report"), 4, "YAML syntax error: expected ','"),
        (JOB + "    cron: '* * * * *'\n", 7, "jobs[0].cron: duplicate key (first at line 4)"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_line_and_key(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write(tmp_path, text)
    code, out, err = invoke("--config", path, "--check")
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"migscope: error: {path}:{line}: "), err
    assert message in err


def test_parse_errors_carry_the_line() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(JOB.replace("0 6 * * 1", "nope"), source="s.yaml")
    assert (caught.value.source, caught.value.line) == ("s.yaml", 4)


def test_unknown_job_and_conflicting_options(tmp_path: Path) -> None:
    path = write(tmp_path, JOB)
    code, _, err = invoke("--config", path, "--once", "nope")
    assert code == 1
    assert err == f"migscope: error: {path}: no job 'nope' (jobs: r)\n"
    code, _, err = invoke("--config", path, "--once", "r", "--check")
    assert code == 2
    code, _, err = invoke("--config", str(tmp_path / "missing.yaml"), "--check")
    assert (code, err) == (
        1,
        f"migscope: error: {tmp_path}/missing.yaml: No such file or directory\n",
    )


# ------------------------------------------------------------------------------------------
# report runs: real analyses, latest, webhook


def report_config(out_dir: Path, cron: str, webhook: str, extra: str = "") -> str:
    return f"""\
jobs:
  - name: hourly-report
    kind: report
    cron: {q(cron)}
    args: ["--simulate", "h200-node", "--window", "1h"]
    out_dir: {q(str(out_dir))}
    webhook: {q(webhook)}
{extra}"""


def test_once_runs_a_real_report_publishes_latest_and_posts_the_webhook(
    tmp_path: Path, hook: Hook
) -> None:
    out_dir = tmp_path / "reports"
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    extra = f"    webhook_bearer_token_file: {q(str(token))}\n"
    config = write(tmp_path, report_config(out_dir, "0 6 * * 1", hook.url, extra))
    before = datetime.now(timezone.utc)
    result = subprocess.run(
        [MIGSCOPE, "schedule", "--config", config, "--once", "hourly-report"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    events = parse_log(result.stderr)
    run_dirs = [p for p in out_dir.iterdir() if p.name != "latest"]
    assert len(run_dirs) == 1
    run_dir = run_dirs[0]
    stamp = datetime.strptime(run_dir.name, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    assert before - timedelta(seconds=1) <= stamp <= datetime.now(timezone.utc)
    report = json.loads((run_dir / "report.json").read_text())
    assert (out_dir / "latest").is_symlink()
    assert os.readlink(out_dir / "latest") == run_dir.name
    assert (out_dir / "latest" / "report.json").read_text() == (run_dir / "report.json").read_text()

    assert len(hook.requests) == 1
    headers, body = hook.requests[0]
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["Content-Type"] == "application/json"
    assert body["job"] == "hourly-report"
    assert body["kind"] == "report"
    assert body["status"] == "succeeded"
    assert body["exit_code"] == 0
    assert body["out_dir"] == str(run_dir)
    assert body["latest"] == str(out_dir / "latest")
    assert body["savings"] == report["savings"]
    assert body["error"] is None
    assert body["summary"][0].startswith(f"{len(report['slices'])} slices on ")
    assert body["summary"][1].startswith("wasted: ")
    assert not any(line.startswith(" ") for line in body["summary"])
    started = datetime.fromisoformat(body["started"].replace("Z", "+00:00"))
    finished = datetime.fromisoformat(body["finished"].replace("Z", "+00:00"))
    assert before <= started < finished
    assert body["duration_s"] == pytest.approx((finished - started).total_seconds(), abs=0.01)

    kinds = [e["event"] for e in events if e["event"] != "output"]
    assert kinds == ["run_started", "latest_updated", "run_finished", "webhook_sent"]
    assert named(events, "run_started")[0]["argv"][-2:] == ["--out", str(run_dir)]
    assert any(e["line"].startswith("wasted: ") for e in named(events, "output"))
    assert hook.url not in result.stderr  # chat webhooks carry their secret in the URL


def test_a_failed_report_does_not_move_latest_and_the_webhook_says_why(
    tmp_path: Path, hook: Hook
) -> None:
    out_dir = tmp_path / "reports"
    (out_dir / "20200101T000000Z").mkdir(parents=True)
    (out_dir / "latest").symlink_to("20200101T000000Z")
    text = report_config(out_dir, "0 6 * * 1", hook.url).replace("h200-node", "no-such-scenario")
    code, _, err = invoke("--config", write(tmp_path, text), "--once", "hourly-report")
    assert code == 1
    assert os.readlink(out_dir / "latest") == "20200101T000000Z"
    (_, body) = hook.requests[0]
    assert (body["status"], body["exit_code"], body["savings"]) == ("failed", 1, None)
    assert "no-such-scenario" in body["error"]
    finished = named(parse_log(err), "run_finished")[0]
    assert (finished["level"], finished["status"]) == ("error", "failed")


def test_scheduled_reports_run_every_second_and_latest_follows(
    tmp_path: Path, hook: Hook, start: Callable[..., Scheduler]
) -> None:
    out_dir = tmp_path / "reports"
    scheduler = start(write(tmp_path, report_config(out_dir, "* * * * * *", hook.url)))
    events = scheduler.wait_for(lambda ev: len(named(ev, "webhook_sent")) >= 2, timeout=30)
    code, _ = scheduler.stop()
    assert code == 0
    bodies = [body for _, body in hook.requests]
    assert [b["status"] for b in bodies[:2]] == ["succeeded", "succeeded"]
    first, second = (Path(b["out_dir"]) for b in bodies[:2])
    assert first != second
    assert (first / "report.json").is_file()
    assert (second / "report.json").is_file()
    latest = os.readlink(out_dir / "latest")
    assert latest in {p.name for p in out_dir.iterdir()} - {"latest"}
    assert latest >= second.name  # the newest good report, never an older one
    assert named(events, "scheduler_started")[0]["jobs"][0]["job"] == "hourly-report"


def test_update_latest_copies_where_symlinks_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [tmp_path / "20260101T000000Z", tmp_path / "20260102T000000Z"]
    for run in runs:
        run.mkdir()
        (run / "report.json").write_text(run.name)
    assert update_latest(tmp_path, runs[0]) == "symlink"

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "symlink", refuse)
    assert update_latest(tmp_path, runs[1]) == "copy"
    latest = tmp_path / "latest"
    assert latest.is_dir()
    assert not latest.is_symlink()
    assert (latest / "report.json").read_text() == runs[1].name
    assert update_latest(tmp_path, runs[0]) == "copy"  # a copied latest is replaced again
    assert (latest / "report.json").read_text() == runs[0].name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["latest", *(r.name for r in runs)])


# ------------------------------------------------------------------------------------------
# overlap, coalescing, misfire grace


def command_job(name: str, cron: str, script: str, extra: str = "") -> str:
    return f"""\
  - name: {name}
    kind: command
    cron: {q(cron)}
    command: {q(["sh", "-c", script])}
{extra}"""


def runs(events: list[Event]) -> list[tuple[str, float, float]]:
    """(job, start, finish) of every finished run, in start order."""
    open_runs: dict[str, float] = {}
    out = []
    for event in events:
        if event["event"] == "run_started":
            open_runs[event["job"]] = ts(event)
        elif event["event"] == "run_finished" and event["job"] in open_runs:
            out.append((event["job"], open_runs.pop(event["job"]), ts(event)))
    return out


def test_runs_never_overlap_and_firings_during_a_run_are_skipped(
    tmp_path: Path, start: Callable[..., Scheduler]
) -> None:
    text = (
        "jobs:\n"
        + command_job("a-slow", "* * * * * *", "sleep 1.5")
        + command_job("b-quick", "* * * * * *", "true")
    )
    scheduler = start(write(tmp_path, text), "--shutdown-grace", "0")
    events = scheduler.wait_for(
        lambda ev: (
            sum(r[0] == "a-slow" for r in runs(ev)) >= 2
            and any(r[0] == "b-quick" for r in runs(ev))
        ),
        timeout=30,
    )
    assert scheduler.stop()[0] == 0
    done = runs(events)
    for (_, _, previous_end), (job, begin, _) in itertools.pairwise(done):
        assert begin >= previous_end, f"{job} started before the previous run finished"
    skipped = named(events, "run_skipped", "a-slow")
    assert skipped, "firings while a-slow ran should be skipped"
    assert all("has not finished" in e["reason"] for e in skipped)
    slow = [r for r in done if r[0] == "a-slow"]
    assert all(end - begin >= 1.4 for _, begin, end in slow)
    # the missed firings are not made up afterwards: one run per ~1.5 s, not one per second
    assert len(slow) <= (slow[-1][2] - slow[0][1]) / 1.5 + 1


def test_missed_firings_are_coalesced_into_one_run(
    tmp_path: Path, start: Callable[..., Scheduler]
) -> None:
    scheduler = start(write(tmp_path, "jobs:\n" + command_job("tick", "* * * * * *", "true")))
    scheduler.wait_for(lambda ev: bool(named(ev, "scheduler_started")))
    scheduler.proc.send_signal(signal.SIGSTOP)  # as if the node had been suspended
    time.sleep(3.2)
    resumed = time.time()
    scheduler.proc.send_signal(signal.SIGCONT)
    events = scheduler.wait_for(lambda ev: any(b > resumed + 0.9 for _, b, _ in runs(ev)))
    assert scheduler.stop()[0] == 0
    after = [b for _, b, _ in runs(events) if resumed <= b < resumed + 0.9]
    # three firings were missed: one coalesced run (and at most the next second's), not four
    assert 1 <= len(after) <= 2, runs(events)


def test_a_run_later_than_the_misfire_grace_is_skipped(
    tmp_path: Path, start: Callable[..., Scheduler]
) -> None:
    # Fires at two seconds of the minute (the second one in case a slow start misses the first).
    seconds = seconds_from_now(2.0, 6.0)
    cron = f"{','.join(map(str, seconds))} * * * * *"
    text = "misfire_grace_seconds: 1\njobs:\n" + command_job("first", cron, "sleep 1.5")
    text += command_job("second", cron, "sleep 1.5")
    scheduler = start(write(tmp_path, text), "--shutdown-grace", "0")
    events = scheduler.wait_for(lambda ev: bool(runs(ev)) and bool(named(ev, "run_skipped")))
    assert scheduler.stop()[0] == 0
    done = runs(events)
    skipped = named(events, "run_skipped")
    assert len(done) == 1
    assert len(skipped) == 1
    # both fired together; the one that had to wait 1.5 s for the other was too late to start
    assert {done[0][0], skipped[0]["job"]} == {"first", "second"}
    assert "misfire_grace_seconds (1)" in skipped[0]["reason"]
    assert any(skipped[0]["scheduled"].endswith(f":{s:02d}.000Z") for s in seconds)


# ------------------------------------------------------------------------------------------
# shutdown and time limits


def test_sigterm_lets_the_running_child_finish_then_exits_0(
    tmp_path: Path, start: Callable[..., Scheduler]
) -> None:
    script = "echo begun; sleep 1.5; echo finished"
    scheduler = start(write(tmp_path, "jobs:\n" + command_job("job", "* * * * * *", script)))
    scheduler.wait_for(lambda ev: any(e.get("line") == "begun" for e in ev))
    code, took = scheduler.stop()
    assert code == 0
    assert took < 5
    events = scheduler.events()
    names = [e["event"] for e in events if e["event"] not in ("output", "run_skipped")]
    stop_at = names.index("scheduler_stopping")
    assert names[stop_at:] == [
        "scheduler_stopping",
        "waiting_for_runs",
        "run_finished",
        "scheduler_stopped",
    ]
    assert named(events, "scheduler_stopping")[0]["signal"] == "SIGTERM"
    finished = named(events, "run_finished")[-1]
    assert (finished["status"], finished["exit_code"]) == ("succeeded", 0)
    assert named(events, "output")[-1]["line"] == "finished"


@pytest.mark.parametrize(
    ("grace", "signals"),
    [("0.5", (signal.SIGTERM,)), ("60", (signal.SIGINT, signal.SIGTERM))],
    ids=["grace-over", "second-signal"],
)
def test_a_child_outliving_the_grace_is_terminated_with_its_children(
    tmp_path: Path,
    start: Callable[..., Scheduler],
    grace: str,
    signals: tuple[signal.Signals, ...],
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 60 & echo $! > {pid_file}; echo begun; wait"
    config = write(tmp_path, "jobs:\n" + command_job("long", "* * * * * *", script))
    scheduler = start(config, "--shutdown-grace", grace)
    scheduler.wait_for(lambda ev: any(e.get("line") == "begun" for e in ev))
    code, took = scheduler.stop(*signals)
    assert code == 0
    assert took < 5
    events = scheduler.events()
    terminating = named(events, "run_terminating")
    assert len(terminating) == 1
    expected = "second signal" if len(signals) == 2 else "shutdown grace (0.5 s) over"
    assert terminating[0]["reason"] == expected
    finished = named(events, "run_finished")[-1]
    assert (finished["status"], finished["signal"]) == ("terminated", "SIGTERM")
    assert [e["event"] for e in events][-1] == "scheduler_stopped"
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 3
    while not process_gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_gone(grandchild)


def test_a_run_past_its_timeout_gets_sigterm_then_sigkill(tmp_path: Path) -> None:
    text = "jobs:\n" + command_job(
        "stubborn", "0 0 * * *", "trap '' TERM; echo begun; sleep 30", "    timeout_seconds: 1\n"
    )
    config = parse_schedule(text)
    stream = io.StringIO()
    began = time.monotonic()
    result = Runner(config, JsonLog(stream), kill_after_s=0.5).run("stubborn")
    assert time.monotonic() - began < 5
    assert (result.status, result.exit_code, result.exit_status()) == ("timeout", -9, 124)
    names = [e["event"] for e in parse_log(stream.getvalue()) if e["event"] != "output"]
    assert names == ["run_started", "run_timeout", "run_terminating", "run_killing", "run_finished"]


def test_once_exits_with_the_childs_status(tmp_path: Path) -> None:
    text = "jobs:\n" + command_job("fails", "0 0 * * *", "echo oops >&2; exit 3")
    code, out, err = invoke("--config", write(tmp_path, text), "--once", "fails")
    assert (code, out) == (3, "")
    finished = named(parse_log(err), "run_finished")[0]
    assert (finished["exit_code"], finished["error"]) == (3, "oops")


@pytest.mark.parametrize("fails", [False, True], ids=["succeeds", "fails"])
def test_the_log_carries_a_reports_progress_and_a_failure_ends_with_its_error(
    tmp_path: Path, fails: bool
) -> None:
    # A child's stderr is a pipe, not a terminal: `analyze` writes timestamped progress
    # there (every line with --progress-interval 0, so that no timing is involved), and the
    # scheduler logs each line as it comes. A failed run's error is still its last line.
    out_dir = tmp_path / "reports"
    args = ["--simulate", "h200-node", "--window", "1d", "--progress-interval", "0"]
    args += ["--what-if", "no-such-config"] if fails else []
    text = (
        f"jobs:\n  - name: r\n    kind: report\n    cron: '0 6 * * 1'\n"
        f"    args: {q(args)}\n    out_dir: {q(str(out_dir))}\n"
    )
    code, _, err = invoke("--config", write(tmp_path, text), "--once", "r")
    assert code == (1 if fails else 0)
    events = parse_log(err)
    progress = [e["line"] for e in named(events, "output") if e["stream"] == "stderr"]
    stamped = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[\s*\d+\.\ds\] ")
    said = [stamped.sub("", line) for line in progress if stamped.match(line)]
    assert "classified 14 slices" in said
    assert any(m.startswith("planning pool H200") for m in said)
    finished = named(events, "run_finished")[0]
    if fails:
        assert progress[-1].startswith("migscope: error: no config named")
        assert finished["error"] == progress[-1]
    else:
        assert len(said) == len(progress)  # nothing but progress on stderr
        assert finished["status"] == "succeeded"


# ------------------------------------------------------------------------------------------
# webhook failures are logged, never fatal


@pytest.mark.parametrize(
    ("status", "requests", "reason"),
    [(500, 3, "HTTP 500"), (404, 1, "HTTP 404"), (None, 0, "ConnectError")],
    ids=["server-error-retried", "client-error-not-retried", "unreachable"],
)
def test_a_failing_webhook_is_logged_and_the_run_still_succeeds(
    tmp_path: Path, hook: Hook, status: int | None, requests: int, reason: str
) -> None:
    url = hook.url if status is not None else f"http://127.0.0.1:{closed_port()}/hook"
    hook.status = status or 200
    text = "jobs:\n" + command_job("ping", "0 0 * * *", "echo hello", f"    webhook: {q(url)}\n")
    code, _, err = invoke("--config", write(tmp_path, text), "--once", "ping")
    assert code == 0
    events = parse_log(err)
    failed = named(events, "webhook_failed")
    assert len(failed) == 1
    assert failed[0]["level"] == "error"
    assert failed[0]["reason"].startswith(reason)
    assert failed[0]["attempts"] == (3 if status != 404 else 1)
    assert len(hook.requests) == requests
    assert named(events, "run_finished")[0]["status"] == "succeeded"
