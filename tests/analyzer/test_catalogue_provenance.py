"""The report says which profile table the plan rests on (``provenance.catalogue``)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from migscope.analyzer._intake.gpu_catalogue import BUILT_IN
from migscope.cli.main import cli

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden" / "exporter-sim-h200.prom"


def test_a_report_names_the_catalogue_it_used() -> None:
    """The migscope dialect with the exporter's profile table: provenance says which won."""
    result = CliRunner().invoke(cli, ["analyze", "--source", str(GOLDEN), "-o", "json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["provenance"]["catalogue"] == {
        "H200-141GB": f"{BUILT_IN} (agrees with the own table of 8 GPU(s))"
    }
