"""``--out DIR`` is replaced whole or not at all, through no planted link, with private modes.

Issue 20: a run that failed half-way (the disk full) left a truncated ``report.json`` beside
the previous run's Markdown, HTML, CSV and plan. The disk is filled for real here: the run is
a child process under ``RLIMIT_FSIZE`` (``ulimit -f``), so its writes fail with ``EFBIG`` as
they would with ``ENOSPC``. One fault is injected instead of produced: a rename that fails in
the middle of the swap (the tests run as root, so no permission makes it fail, and
``ENOSPC`` on a directory entry needs a full filesystem of its own).
"""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from migscope.analyzer._analysis import run
from migscope.analyzer._intake.simulation import SimulationSource
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._report import FILE_NAMES, validate_report, write_reports
from migscope.analyzer._result import AnalysisResult
from migscope.cli.main import cli

MIGSCOPE = Path(sys.executable).with_name("migscope")
ANALYZE = ["analyze", "--simulate", "h200-node", "-q"]
OURS = set(FILE_NAMES.values())


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry of ``folder``: a file's bytes, a link's target, ``dir`` for a directory."""
    out: dict[str, bytes | str] = {}
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink():
            out[entry.name] = f"-> {os.readlink(entry)}"
        elif entry.is_dir():
            out[entry.name] = "dir"
        else:
            out[entry.name] = entry.read_bytes()
    return out


def _analyze(out: Path, *extra: str) -> None:
    result = CliRunner().invoke(cli, [*ANALYZE, "--window", "1d", "--out", str(out), *extra])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def result() -> AnalysisResult:
    return run(SimulationSource(["h200-node"]), AnalyzeOptions(window_s=86400.0))


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    """Set the process umask for one test, and put the old one back."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


def _with_file_size_limit(limit: int) -> Callable[[], None]:
    def limit_writes() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_writes


def test_a_run_that_fills_the_disk_leaves_the_previous_report_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    _analyze(out)
    (out / "README.txt").write_text("kept by the team, not by migscope\n", encoding="utf-8")
    before = _snapshot(out)
    assert set(before) >= OURS
    proc = subprocess.run(
        [str(MIGSCOPE), *ANALYZE, "--window", "2d", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=_with_file_size_limit(30 * 1024),  # ``ulimit -f 30``: report.json is 56 KiB
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == f"migscope: error: {out}: cannot write reports: File too large\n"
    assert _snapshot(out) == before  # byte for byte, and nothing left behind
    validate_report(json.loads((out / "report.json").read_text()))


def test_a_swap_that_fails_midway_puts_every_file_back(
    tmp_path: Path, result: AnalysisResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "reports"
    write_reports(result, out, formats=("json", "md"))  # no csv or html yet: new names
    before = _snapshot(out)
    real_replace = os.replace
    swapped: list[str] = []

    def failing_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst).parent == out:  # a file taking its place in DIR (not a rollback's)
            swapped.append(Path(dst).name)
            if Path(dst).name == FILE_NAMES["html"]:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left on device"):
        write_reports(result, out)
    monkeypatch.undo()
    assert swapped[:4] == ["report.json", "report.md", "slices.csv", "report.html"]
    assert _snapshot(out) == before


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_a_link_planted_in_out_is_replaced_never_followed(tmp_path: Path, dangling: bool) -> None:
    out = tmp_path / "reports"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "victim.txt"
    if not dangling:
        victim.write_text("not migscope's to write\n", encoding="utf-8")
    for name in ("report.json", "node-plan.json"):
        (out / name).symlink_to(victim)
    _analyze(out)
    if dangling:
        assert not victim.exists()
        assert not victim.is_symlink()
    else:
        assert victim.read_text(encoding="utf-8") == "not migscope's to write\n"
    assert sorted(elsewhere.iterdir()) == ([] if dangling else [victim])
    for name in ("report.json", "node-plan.json"):
        assert not (out / name).is_symlink()
        json.loads((out / name).read_text())
    validate_report(json.loads((out / "report.json").read_text()))


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o640), (0o077, 0o600), (0o000, 0o640)])
def test_report_files_are_0640_less_the_umask(
    tmp_path: Path,
    result: AnalysisResult,
    umask: Callable[[int], None],
    mask: int,
    mode: int,
) -> None:
    """Reports name pods and namespaces: never readable by every user of the machine."""
    out = tmp_path / "reports"
    out.mkdir()
    for name in OURS:  # an earlier run's files, world-readable: the new ones are not
        (out / name).write_text("old\n", encoding="utf-8")
        (out / name).chmod(0o644)
    umask(mask)
    written = write_reports(result, out)
    assert set(written) == set(FILE_NAMES)
    for path in written.values():
        assert path.stat().st_mode & 0o777 == mode, path.name


def test_a_new_run_leaves_exactly_its_own_files_and_the_others_alone(
    tmp_path: Path, result: AnalysisResult
) -> None:
    out = tmp_path / "reports"
    write_reports(result, out)
    (out / "README.txt").write_text("the team's\n", encoding="utf-8")
    (out / "archive").mkdir()
    written = write_reports(result, out, formats=("json",))
    assert set(written) == {"json", "mig-parted", "plan", "requests"}
    names = {p.name for p in out.iterdir()}
    # report.md, slices.csv, report.html were the earlier run's: gone with it.
    mine = {"report.json", "mig-parted-config.yaml", "node-plan.json", "request-changes.yaml"}
    assert names == mine | {
        "README.txt",
        "archive",
    }
    assert (out / "README.txt").read_text(encoding="utf-8") == "the team's\n"


def test_a_directory_at_a_report_name_is_refused_and_nothing_changes(
    tmp_path: Path, result: AnalysisResult
) -> None:
    out = tmp_path / "reports"
    write_reports(result, out, formats=("json",))
    (out / "report.md").mkdir()
    (out / "report.md" / "mine.txt").write_text("x", encoding="utf-8")
    before = _snapshot(out)
    with pytest.raises(OSError, match=r"report\.md is not a file"):
        write_reports(result, out)
    assert _snapshot(out) == before
    assert (out / "report.md" / "mine.txt").read_text(encoding="utf-8") == "x"


def test_demo_writes_through_the_same_swap(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n", encoding="utf-8")
    (out / "report.html").symlink_to(victim)
    result = CliRunner().invoke(cli, ["demo", "--out", str(out), "--window", "1d"])
    assert result.exit_code == 0, result.output
    assert victim.read_text(encoding="utf-8") == "keep\n"
    assert {p.name for p in out.iterdir()} == OURS
    mask = os.umask(0o022)
    os.umask(mask)
    assert {p.stat().st_mode & 0o777 for p in out.iterdir()} == {0o640 & ~mask}
