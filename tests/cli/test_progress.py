"""Progress lines: every stage on a terminal; timestamped and rate-limited in a log.

The rules are driven with an injected clock (no sleeping, nothing that depends on how loaded
the machine is); the CLI and the scheduler are then checked end to end with
``--progress-interval 0`` (every line, timestamped), which does not depend on time either.
"""

from __future__ import annotations

import itertools
import json
import re
import threading

import pytest
from click.testing import CliRunner

from migscope.cli._progress import HEARTBEAT_INTERVALS, Heartbeat, ProgressLog, stage_of
from migscope.cli.main import cli

T0 = 1_780_000_000.0  # 2026-05-28T20:26:40Z
STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[\s*\d+\.\ds\] \S.*$")


class Clock:
    """Monotonic and wall time that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return T0 + self.now - 100.0


def make(
    interval: float = 5.0, *, terminal: bool = False, status: str | None = None
) -> tuple[ProgressLog, list[str], Clock]:
    clock = Clock()
    lines: list[str] = []
    log = ProgressLog(
        lines.append,
        terminal=terminal,
        interval_s=interval,
        status=(lambda: status) if status is not None else None,
        clock=clock.monotonic,
        wall=clock.wall,
    )
    return log, lines, clock


def messages(lines: list[str]) -> list[str]:
    return [line.split("] ", 1)[1] for line in lines]


def test_a_run_shorter_than_the_interval_writes_nothing() -> None:
    log, lines, clock = make()
    for n in range(1, 40):
        clock.now += 0.1
        log(f"classified {n} slices")
        log.tick()
    clock.now += 0.5  # 4.4 s in all
    log.tick()
    log.finish()
    assert lines == []


def test_lines_are_stamped_with_utc_time_and_elapsed_seconds() -> None:
    log, lines, clock = make()
    clock.now += 12.0
    log("classified 10 slices")
    assert lines == ["2026-05-28T20:26:52Z [ 12.0s] classified 10 slices"]


def test_after_the_grace_period_the_newest_held_message_is_written() -> None:
    log, lines, clock = make()
    log("simulating h200-node: 7 days")
    clock.now += 3.0
    log("classified 10 slices")
    clock.now += 1.9
    log.tick()
    assert lines == []
    clock.now += 0.2  # 5.1 s
    log.tick()
    assert messages(lines) == ["classified 10 slices"]
    log.tick()  # written once
    assert len(lines) == 1


def test_within_a_stage_at_most_one_line_per_interval() -> None:
    log, lines, clock = make()
    stamps: list[float] = []
    for n in range(1, 1001):  # 100 s of a message every 0.1 s, ticked every second
        clock.now += 0.1
        before = len(lines)
        log(f"classified {n} slices")
        if n % 10 == 0:
            log.tick()
        stamps += [clock.now] * (len(lines) - before)
    assert 15 <= len(lines) <= 20  # 100 s / 5 s, not 1000
    assert all(b - a >= 5.0 - 1e-9 for a, b in itertools.pairwise(stamps))
    assert all(STAMPED.match(line) for line in lines)
    # Each line is the newest message at the time it was written, never a stale one.
    counts = [int(m.split()[1]) for m in messages(lines)]
    assert counts == sorted(counts)
    assert counts[-1] >= 950


def test_a_new_stage_is_written_at_once_after_the_last_word_of_the_one_before() -> None:
    log, lines, clock = make()
    clock.now += 6.0
    log("classified 10 slices")  # the first after the grace: written
    clock.now += 1.0
    log("classified 20 slices")  # held: an interval has not passed
    clock.now += 0.5
    log("planning pool H200: 4 GPUs")  # a new stage: the held count, then the stage
    clock.now += 0.5
    log("planning pool A100: 2 GPUs")  # same stage, within the interval: held
    assert messages(lines) == [
        "classified 10 slices",
        "classified 20 slices",
        "planning pool H200: 4 GPUs",
    ]
    log.finish()  # the run lasted past the grace period: its last word is written
    assert messages(lines)[-1] == "planning pool A100: 2 GPUs"


def test_a_silent_stage_gets_a_heartbeat_with_the_servers_status() -> None:
    log, lines, clock = make(status="server: 12 requests, 3.1 MiB received")
    clock.now += 6.0
    log("classified 10 slices")
    for _ in range(5 * HEARTBEAT_INTERVALS - 1):  # one tick a second, under 15 s of silence
        clock.now += 1.0
        log.tick()
    assert len(lines) == 1
    clock.now += 1.0
    log.tick()
    assert messages(lines)[1] == (
        "still working since: classified 10 slices (15 s ago); "
        "server: 12 requests, 3.1 MiB received"
    )
    for _ in range(5 * HEARTBEAT_INTERVALS):  # and again after another 15 s, not before
        clock.now += 1.0
        log.tick()
    assert len(lines) == 3


def test_a_heartbeat_before_any_message_says_only_that_it_works() -> None:
    log, lines, clock = make()
    clock.now += 5.0 * HEARTBEAT_INTERVALS
    log.tick()
    assert messages(lines) == ["still working"]


def test_a_terminal_gets_every_message_at_once_and_no_heartbeat() -> None:
    log, lines, clock = make(terminal=True)
    log("simulating h200-node: 7 days")
    clock.now += 0.25
    log("classified 10 slices")
    clock.now += 100.0
    log.tick()
    log.finish()
    assert lines == ["[  0.0s] simulating h200-node: 7 days", "[  0.2s] classified 10 slices"]


def test_interval_zero_writes_every_message_stamped_and_no_heartbeat() -> None:
    log, lines, clock = make(interval=0.0)
    for n in (10, 20, 30):
        log(f"classified {n} slices")
    clock.now += 1000.0
    log.tick()
    assert messages(lines) == [
        "classified 10 slices",
        "classified 20 slices",
        "classified 30 slices",
    ]
    assert all(STAMPED.match(line) for line in lines)


def test_a_negative_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        ProgressLog(print, terminal=False, interval_s=-1.0)


def test_the_stage_is_the_first_word() -> None:
    assert stage_of("classified 10 slices") == "classified"
    assert stage_of("planning pool H200: 4 GPUs") == "planning"
    assert stage_of("") == ""


def test_the_heartbeat_thread_ticks_and_nothing_follows_its_end() -> None:
    clock = Clock()
    written = threading.Event()
    lines: list[str] = []

    def write(line: str) -> None:
        lines.append(line)
        written.set()

    log = ProgressLog(write, terminal=False, clock=clock.monotonic, wall=clock.wall)
    log("classified 10 slices")  # held: inside the grace period
    clock.now += 6.0  # the thread, not this test, must now write it
    with Heartbeat(log, every_s=0.01):
        assert written.wait(30), "the heartbeat thread never ticked"
        log("classified 20 slices")  # held: an interval has not passed since
    assert messages(lines) == ["classified 10 slices", "classified 20 slices"]  # finish()
    clock.now += 1000.0
    count = len(lines)
    log.tick()  # the thread is gone; only an explicit tick writes now
    assert len(lines) == count + 1


# --------------------------------------------------------------------------------------------
# The command


def test_analyze_logs_timestamped_progress_on_a_non_terminal_stderr() -> None:
    result = CliRunner().invoke(
        cli,
        [
            "analyze",
            "--simulate",
            "h200-node",
            "--window",
            "1d",
            "-o",
            "json",
            "--progress-interval",
            "0",
        ],
    )
    assert result.exit_code == 0, result.stderr
    json.loads(result.stdout)  # stdout is the report alone
    lines = result.stderr.splitlines()
    assert all(STAMPED.match(line) for line in lines), lines
    said = messages(lines)
    assert said[0].startswith("simulating h200-node")
    assert "classified 14 slices" in said
    assert any(m.startswith("planning pool H200") for m in said)


def test_quiet_silences_progress_but_not_errors() -> None:
    ok = CliRunner().invoke(
        cli,
        [
            "analyze",
            "--simulate",
            "h200-node",
            "--window",
            "1d",
            "-o",
            "json",
            "-q",
            "--progress-interval",
            "0",
        ],
    )
    assert ok.exit_code == 0
    assert ok.stderr == ""
    failed = CliRunner().invoke(
        cli,
        [
            "analyze",
            "--simulate",
            "h200-node",
            "--window",
            "1d",
            "--quiet",
            "--progress-interval",
            "0",
            "--what-if",
            "no-such-config",
        ],
    )
    assert failed.exit_code == 1
    assert failed.stderr.startswith("migscope: error: no config named")
    assert failed.stderr.count("\n") == 1


def test_a_failed_run_ends_with_its_error_line_after_the_progress() -> None:
    result = CliRunner().invoke(
        cli,
        [
            "analyze",
            "--simulate",
            "h200-node",
            "--window",
            "1d",
            "--progress-interval",
            "0",
            "--what-if",
            "no-such-config",
        ],
    )  # fails after planning, with progress lines written
    assert result.exit_code == 1
    *progress, last = result.stderr.splitlines()
    assert progress
    assert all(STAMPED.match(line) for line in progress)
    assert last.startswith("migscope: error: no config named 'no-such-config'")


@pytest.mark.parametrize("value", ["-1s", "soon"])
def test_a_bad_progress_interval_is_one_line(value: str) -> None:
    result = CliRunner().invoke(
        cli, ["analyze", "--simulate", "h200-node", "--progress-interval", value]
    )
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert f"bad --progress-interval {value!r}" in result.stderr


def test_a_heartbeat_thread_stops_quietly_when_stderr_is_gone() -> None:
    clock = Clock()
    attempts = threading.Event()

    def write(line: str) -> None:
        attempts.set()
        raise BrokenPipeError(32, "Broken pipe")

    log = ProgressLog(write, terminal=False, clock=clock.monotonic, wall=clock.wall)
    clock.now += 5.0 * HEARTBEAT_INTERVALS
    beat = Heartbeat(log, every_s=0.01)
    with beat:
        assert attempts.wait(30)
        beat._thread.join(30)  # it ended on its own, without a traceback
        assert not beat._thread.is_alive()


def test_the_heartbeat_counts_what_was_asked_of_the_server() -> None:
    from support.prometheus import FaultProxy, Reply

    from migscope.analyzer._intake.file import FileSource
    from migscope.analyzer._intake.prometheus import PrometheusClient
    from migscope.analyzer._intake.prometheus_source import PrometheusSource
    from migscope.cli._analyze_inputs import server_status

    vector = '{"status": "success", "data": {"resultType": "vector", "result": []}}'
    with FaultProxy(default=Reply(200, vector)) as proxy:
        source = PrometheusSource(PrometheusClient(proxy.url, retries=0))
        status = server_status(source)
        assert status is not None
        assert status() == "server: 0 requests, 0.0 MiB received"
        source.client.query("up")
        assert status() == "server: 1 request, 0.0 MiB received"
        source.client.close()
    assert server_status(FileSource("unused.prom")) is None
