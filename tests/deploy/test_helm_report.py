"""The Helm report CronJob's report.html: a waste trend from the kept runs and Grafana links.

The chart is rendered offline (helm-python-sdk, as tests/deploy/test_helm.py does) and the
report container's own script runs twice with the real ``migscope`` (the rendered arguments,
with the simulator in place of the Prometheus URL): the second run's report carries the
first as its trend, read from the volume the CronJob keeps its runs on.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

helm = pytest.importorskip("helm_python", reason="helm-python-sdk not installed (test extra)")

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "migscope"


def _report_container(values: dict[str, Any]) -> dict[str, Any]:
    with helm.Chart.load(str(CHART)) as chart:
        raw = chart.render(values, name="migscope", namespace="monitoring", is_install=True)
    for path, text in raw.items():
        if path.endswith("report-cronjob.yaml"):
            (cronjob,) = [d for d in yaml.safe_load_all(text) if d]
            spec = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            (container,) = spec["containers"]
            return container  # type: ignore[no-any-return]
    raise AssertionError("no report CronJob")


def test_the_report_reads_the_runs_it_keeps() -> None:
    c = _report_container({})
    mount = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}["reports"]
    assert f"--previous-reports={mount}" in c["args"]
    assert {e["name"]: e["value"] for e in c["env"]}["REPORT_DIR"] == mount
    assert not [a for a in c["args"] if a.startswith("--grafana-url")]


def test_grafana_url_value_becomes_the_flag() -> None:
    c = _report_container({"report": {"grafanaUrl": "https://grafana.example/g"}})
    assert "--grafana-url=https://grafana.example/g" in c["args"]


def test_the_second_run_has_the_first_as_its_trend(tmp_path: Path) -> None:
    c = _report_container({"report": {"grafanaUrl": "https://grafana.example"}})
    reports = tmp_path / "reports"
    reports.mkdir()
    args = []
    for arg in c["args"]:
        if arg.startswith("--prometheus="):
            arg = "--simulate=h200-node"
        elif arg.startswith("--window="):
            arg = "--window=1d"
        elif arg.startswith("--previous-reports="):
            arg = f"--previous-reports={reports}"
        args.append(arg)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    migscope = bin_dir / "migscope"
    migscope.write_text(f'#!/bin/sh\nexec "{Path(sys.executable).parent}/migscope" "$@"\n')
    fake_date = bin_dir / "date"  # a new second on every call: two runs, two directories
    fake_date.write_text(
        '#!/bin/sh\nn=$(cat "$CLOCK" 2>/dev/null || echo 0); n=$((n + 1))\n'
        'echo "$n" > "$CLOCK"; printf "20260112T0600%02dZ\\n" "$n"\n'
    )
    for f in (migscope, fake_date):
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "CLOCK": str(tmp_path / "clock"),
        "REPORT_DIR": str(reports),
        "REPORT_KEEP": "12",
    }
    for _ in range(2):
        proc = subprocess.run(
            ["/bin/sh", "-c", c["command"][2], "migscope-report", *args, "-q"],
            env=env, capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
    first, second = (
        reports / name / "report.json" for name in ("20260112T060001Z", "20260112T060002Z")
    )
    earlier = json.loads(first.read_text())
    latest = json.loads((reports / "latest" / "report.json").read_text())
    assert latest == json.loads(second.read_text())
    assert "trend" not in earlier or earlier["trend"] == []
    assert [p["run"] for p in latest["trend"]] == ["20260112T060001Z"]
    assert latest["trend"][0]["wasted_gpu_hours"] == earlier["savings"]["wasted_gpu_hours"]
    page = (reports / "latest" / "report.html").read_text()
    assert 'id="trend-table"' in page
    assert 'href="https://grafana.example/d/migscope-fleet?' in page
