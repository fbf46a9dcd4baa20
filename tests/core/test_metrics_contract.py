"""The metric contract follows Prometheus naming rules, so promtool and users agree with it."""

from __future__ import annotations

import re

import pytest

from migscope.core._metrics import DCGM_COMPAT, METRICS, PREFIX, MetricSpec, metric, metrics_table

NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
UNIT_SUFFIX = {"bytes": "_bytes", "watts": "_watts", "seconds": "_seconds", "ratio": "_ratio"}


@pytest.mark.parametrize("spec", METRICS, ids=lambda s: s.name)
def test_names_units_and_suffixes(spec: MetricSpec) -> None:
    assert NAME.match(spec.name)
    assert spec.name.startswith(f"{PREFIX}_")
    assert all(LABEL.match(label) and not label.startswith("__") for label in spec.labels)
    assert len(set(spec.labels)) == len(spec.labels)
    assert "node" not in spec.labels, "the node is a target label added by relabelling"
    base = spec.name.removesuffix("_total")
    if spec.type == "counter":
        assert spec.name.endswith("_total")
    else:
        assert not spec.name.endswith("_total")
    if spec.type == "info":
        assert spec.name.endswith("_info")
        assert spec.unit == ""
    if spec.unit in UNIT_SUFFIX:
        assert base.endswith(UNIT_SUFFIX[spec.unit]), spec.name
    if spec.unit == "joules":
        assert spec.name.endswith("_joules_total")
    assert spec.help
    assert spec.source


def test_names_are_unique_and_findable() -> None:
    names = [spec.name for spec in METRICS]
    assert len(names) == len(set(names))
    assert metric("mig_graphics_active_ratio") is metric("migscope_mig_graphics_active_ratio")
    with pytest.raises(KeyError):
        metric("mig_utilisation")


def test_per_slice_power_is_an_estimate_never_the_board_figure() -> None:
    """dcgm-exporter repeats the GPU's power on every slice (#257); migscope must not."""
    per_slice = [s for s in METRICS if s.name.startswith(f"{PREFIX}_mig_") and "watts" in s.name]
    assert [s.name for s in per_slice] == ["migscope_mig_power_estimated_watts"]
    assert "ESTIMATED" in per_slice[0].help
    # dcgm-exporter's names for the board's power and energy are emitted once per GPU
    # (tests/exporter/test_dcgm_compat.py checks the exposition itself).
    board = [c for c in DCGM_COMPAT if "POWER" in c.name or "ENERGY" in c.name]
    assert [c.name for c in board] == [
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    ]
    assert all("once per GPU" in c.source for c in board)


def test_docs_metrics_table_is_generated_from_the_contract() -> None:
    """docs/metrics.md lists every metric exactly as the contract declares it."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    table = doc.split("<!-- metrics-table:start -->\n", 1)[1].split("<!-- metrics-table:end -->")[0]
    assert table == metrics_table(), "run scripts/gen-metrics-doc"
