"""The report's next step is a command the applier takes, run exactly as printed (issue 22).

The report used to print ``migscope apply --plan node-plan.json``, and the applier skipped
every node of that file ("carries no per-slice evidence ... apply report.json instead"): the
one command the report told a user to run did nothing. Here a week of the test cluster goes
through the real pipeline into the report files, and the commands of the report's next step
run from the report's directory, as printed (the cluster from ``KUBECONFIG``), against the API
test server and the simulated MIG Manager.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.planted_slices import WEEK

from applier.cluster import running_cluster
from applier.test_apply_cli import _kubeconfig
from applier.test_contract import PLACED, _fresh, _slice
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import build_report, write_reports
from migscope.analyzer._report.next_step import next_step
from migscope.cli.main import cli
from migscope.core._spec.v1 import ReportV1, report_json


def _week() -> list:  # type: ignore[type-arg]
    """GPU 1 of gpu-a unallocated all week, the rest busy (one idle pod per GPU)."""
    return [
        _slice(
            node,
            gpu,
            gi + 1,
            placed.profile.name,
            placed.start,
            "unallocated" if (node, gpu) == ("gpu-a", 1) else ("idle" if gi == 0 else "busy"),
        )
        for node in ("gpu-a", "gpu-b")
        for gpu in (0, 1)
        for gi, placed in enumerate(PLACED)
    ]


def test_the_printed_next_step_applies_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = analyze(_week(), window=(0.0, WEEK), options=AnalyzeOptions(time_limit_s=2.0))
    data = report_json(build_report(result))
    data["provenance"] = _fresh()
    out = tmp_path / "report"
    report = ReportV1.model_validate(data)
    write_reports(result, out, formats=("json", "md"), report=report)
    step = next_step(report)
    assert step.kind == "apply"
    dry, first = step.commands
    assert (out / shlex.split(dry)[-1]).is_file()  # the file it names is the one written
    first_node = data["recommendations"][0]["node"]
    markdown = (out / "report.md").read_text()
    assert dry in markdown
    assert first in markdown
    with running_cluster() as c:
        monkeypatch.setenv("KUBECONFIG", _kubeconfig(tmp_path, c.api.url))
        monkeypatch.chdir(out)
        ran = CliRunner().invoke(cli, shlex.split(dry)[1:])
        assert ran.exit_code == 0, ran.output
        assert "would-apply" in ran.output
        assert "no per-slice evidence" not in ran.output
        ran = CliRunner().invoke(cli, shlex.split(first)[1:])
        assert ran.exit_code == 0, ran.output
        assert f"{first_node}: applied" in ran.output
        config = data["recommendations"][0]["mig_config"]
        assert c.labels(first_node)["nvidia.com/mig.config"] == config
