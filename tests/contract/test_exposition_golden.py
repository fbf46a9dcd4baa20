"""The exporter's complete ``/metrics`` for a fixed simulated node, pinned in a golden file.

In the style of node_exporter's ``collector/fixtures/e2e-output.txt``: the whole exposition of
``migscope-exporter --once --backend sim --scenario h200-node`` (an empty environment, no
``NODE_NAME``) is committed as ``tests/fixtures/golden/exporter-sim-h200.prom``, and any change
to it (a renamed label, a reordered family, a new HELP text, a different value) fails here
with a unified diff. Regenerate it, after checking that the change is meant, with::

    MIGSCOPE_UPDATE_GOLDEN=1 .venv/bin/pytest tests/contract

The run is deterministic without help: the simulator's clock is manual (``--once`` samples at
t=0 and t=1 s of the scenario's own time) and its seed is the scenario's. Only what measures
the machine running the test is normalised (:func:`normalise`): the real seconds each
collector took, the real Unix time of its last success, and the migscope and Python versions
of ``migscope_exporter_build_info``. Their values become ``NaN`` and ``<normalised>`` so that
the file still parses.

The second half feeds the golden file to the analyzer's reader, so that an exporter change
the analyzer can no longer read fails here too, next to the diff that caused it.

``tests/fixtures/golden/exporter-sim-h200-dcgm.prom`` pins, the same way, the dcgm-exporter
series ``--dcgm-compat`` adds to that exposition (with ``NODE_NAME`` set to the simulated
node's name, as the DaemonSet sets it): what a dcgm-exporter dashboard would read. The same
command regenerates it.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest

from migscope.analyzer._intake.dialect import DEFAULT_NODE, MIB, indexes, iter_slice_series, keeps
from migscope.analyzer._intake.file import read_openmetrics
from migscope.analyzer._intake.openmetrics import read_exposition
from migscope.analyzer._intake.stats_local import SliceSeries
from migscope.core._metrics import metric
from migscope.exporter._runtime import render_once
from migscope.exporter._settings import load_settings
from migscope.sim import SimNode, Simulation, resolve_scenario

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden" / "exporter-sim-h200.prom"
GOLDEN_DCGM = ROOT / "tests" / "fixtures" / "golden" / "exporter-sim-h200-dcgm.prom"
SCENARIO = "h200-node"
REGENERATE = "MIGSCOPE_UPDATE_GOLDEN=1 .venv/bin/pytest tests/contract"
MAX_DIFF_LINES = 200

# Values that measure the machine, not the exporter's contract.
_TIMINGS = re.compile(
    rf"^((?:{metric('collector_duration_seconds').name}"
    rf"|{metric('collector_last_success_timestamp_seconds').name})\{{[^}}]*\}}) \S+$",
    re.MULTILINE,
)
_BUILD_INFO = re.compile(rf"^{metric('exporter_build_info').name}\{{.*$", re.MULTILINE)
_VERSIONS = re.compile(r'\b(version|python_version)="[^"]*"')


def normalise(exposition: str) -> str:
    """``exposition`` with the machine's timings and versions replaced by fixed text."""
    text = _TIMINGS.sub(r"\1 NaN", exposition)
    return _BUILD_INFO.sub(lambda m: _VERSIONS.sub(r'\1="<normalised>"', m.group(0)), text)


def render() -> str:
    """One ``--once`` exposition of the scenario, as the command renders it, normalised."""
    settings = load_settings(
        environ={},
        overrides={"backend": "sim", "scenario": SCENARIO, "hostname": ""},
    )
    return normalise(render_once(settings).decode("utf-8"))


def render_dcgm() -> str:
    """The dcgm-exporter series of ``--once --dcgm-compat`` on the scenario's first node."""
    settings = load_settings(
        environ={},
        overrides={
            "backend": "sim",
            "scenario": SCENARIO,
            "hostname": _scenario_node().name,
            "dcgm_compat": True,
        },
    )
    text = render_once(settings).decode("utf-8")
    return text[text.index("# HELP DCGM_") :]


@pytest.fixture(scope="module")
def exposition() -> str:
    return render()


def _diff(expected: str, actual: str, golden: Path = GOLDEN) -> str:
    lines = list(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"{golden.relative_to(ROOT)} (golden)",
            tofile="migscope-exporter --once (now)",
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        rest = len(lines) - MAX_DIFF_LINES
        lines = [*lines[:MAX_DIFF_LINES], f"... and {rest} more diff lines\n"]
    return "".join(lines)


def _check_golden(golden: Path, exposition: str) -> None:
    if os.environ.get("MIGSCOPE_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(exposition.encode("utf-8"))
        return
    expected = golden.read_text(encoding="utf-8") if golden.exists() else ""
    if exposition != expected:
        pytest.fail(
            f"The exporter's /metrics for scenario {SCENARIO} differs from "
            f"{golden.relative_to(ROOT)}.\nIf the change is intended, regenerate the file "
            f"with\n\n    {REGENERATE}\n\nand commit it with the change.\n\n"
            + _diff(expected, exposition, golden),
            pytrace=False,
        )


def test_exposition_matches_the_golden_file(exposition: str) -> None:
    _check_golden(GOLDEN, exposition)


def test_dcgm_compatible_series_match_their_golden_file() -> None:
    _check_golden(GOLDEN_DCGM, render_dcgm())


def test_normalising_keeps_the_contract_and_drops_only_the_machine() -> None:
    raw = (
        'migscope_collector_duration_seconds{collector="sim"} 0.000622\n'
        'migscope_collector_last_success_timestamp_seconds{collector="gpm"} 1.79e+09\n'
        'migscope_collector_success{collector="sim"} 1.0\n'
        'migscope_exporter_build_info{version="0.1.0",python_version="3.11.7",backend="sim"} 1.0\n'
    )
    assert normalise(raw) == (
        'migscope_collector_duration_seconds{collector="sim"} NaN\n'
        'migscope_collector_last_success_timestamp_seconds{collector="gpm"} NaN\n'
        'migscope_collector_success{collector="sim"} 1.0\n'
        'migscope_exporter_build_info{version="<normalised>",python_version="<normalised>",'
        'backend="sim"} 1.0\n'
    )


# ---------------------------------------------------------------------------------------------
# The analyzer reads the golden file as the scenario's slices


def _scenario_node() -> SimNode:
    """The node ``--once`` simulates: the scenario's first, with no ``NODE_NAME`` set."""
    simulation = Simulation.from_scenario(resolve_scenario(SCENARIO))
    return next(iter(simulation))


Expected = dict[tuple[int, str, int], tuple[str, str, int, frozenset[tuple[str, str]], float]]


def _expected(node: SimNode) -> Expected:
    """(GPU index, GPU UUID, GI id) -> (profile, MIG UUID, placement, holders, memory bytes)."""
    out: Expected = {}
    for inst in node.instances(0.0):
        owner = inst.owner
        holders = frozenset() if owner is None else frozenset({(owner.namespace, owner.pod)})
        out[(inst.gpu.index, inst.gpu.uuid, inst.gi_id)] = (
            inst.profile.name,
            inst.uuid,
            inst.start,
            holders,
            float(inst.profile.memory_mib * MIB),
        )
    return out


def _read(slices: list[SliceSeries]) -> Expected:
    out: Expected = {}
    for s in slices:
        key = s.info.key
        assert s.memory_total_bytes is not None, key
        out[(key.gpu, key.gpu_uuid, key.gpu_instance_id)] = (
            s.info.profile,
            s.info.mig_uuid or "",
            s.info.placement_start if s.info.placement_start is not None else -1,
            frozenset(s.holders),
            s.memory_total_bytes,
        )
    return out


def test_the_analyzer_reads_the_golden_file_as_the_scenario_defines_it() -> None:
    node = _scenario_node()
    expected = _expected(node)
    assert len(expected) == 14  # h200-node: 3g+2g+1g+1g, seven 1g, 4g+3g, 7g
    assert any(holders for *_, holders, _ in expected.values())
    assert any(not holders for *_, holders, _ in expected.values())

    found = read_openmetrics(GOLDEN)
    slices = list(found.series)
    assert found.notes == ()
    assert _read(slices) == expected
    # The exporter adds no node label (the node is a target label, set by the scrape), so a
    # scrape saved straight from /metrics belongs to the analyzer's default node.
    assert {s.info.key.node for s in slices} == {DEFAULT_NODE}
    models = {gpu.model.key for gpu in node.gpus}
    assert {s.info.model for s in slices} == models
    for s in slices:
        assert s.activity is not None, s.info.key
        assert len(s.activity) == 1, s.info.key
        assert s.memory_used is not None, s.info.key
        assert len(s.memory_used) == 1, s.info.key
        assert len(s.energy) == 1, s.info.key


def test_the_node_the_scrape_is_labelled_with_reaches_every_slice() -> None:
    node = _scenario_node()
    series = read_exposition(GOLDEN, keep=keeps, index=indexes)
    slices = list(iter_slice_series(series, default_node=node.name))
    assert {s.info.key.node for s in slices} == {node.name}
    assert _read(slices) == _expected(node)
