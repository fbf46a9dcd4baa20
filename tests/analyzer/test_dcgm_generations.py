"""dcgm-exporter 4.9's names and units give the same slices as 4.8's, in files and on servers.

dcgm-exporter 4.9.0 renamed its default fields to DCGM 4.7's names and changed units
(framebuffer MiB -> bytes), renamed the driver label ``DCGM_FI_DRIVER_VERSION`` ->
``DCGM_FI_SYSTEM_DRIVER_VERSION`` and added ``DCGM_FI_DEV_FB_CAPACITY_BYTES``; 4.8.3 had renamed
the host label ``Hostname`` -> ``hostname``. The names and units used here are the analyzer's
table (:data:`migscope.analyzer._intake.dialect.names.DCGM_FIELDS`, with the evidence for each; the
framebuffer's used/free byte names are inferred there, not read from a 4.9 file).

No public dcgm-exporter 4.9 scrape of a MIG GPU was found (GitHub issues and code searched for
``DCGM_FI_SYSTEM_DRIVER_VERSION``, ``DCGM_FI_DEV_FB_CAPACITY_BYTES``,
``DCGM_FI_DEV_FB_USED_BYTES``, ``DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO`` with ``GPU_I_PROFILE``), so
the scrapes are written here: one A100-40GB (the GPU of the real run-ai captures in
tests/fixtures/dcgm/, same ``modelName`` and driver 520.56.06) with a busy, an idle and an
unallocated GPU instance, six hours at one sample a minute, once as dcgm-exporter 4.8.2 writes
it and once as 4.9 does, from the same readings. Both must give the same slices, statistics
and verdicts through ``migscope analyze --source``, and through a real Prometheus and a real
VictoriaMetrics; a 4.8.4 -> 4.9 rollout, where both generations hold the slices for two
hours, must count nothing twice.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from support.prometheus import (
    HistorySeries,
    ManagedServer,
    PrometheusServer,
    requires_prometheus,
    to_openmetrics,
)
from support.victoria import VictoriaServer, requires_victoria

from migscope.analyzer._intake.dialect import (
    DCGM_FIELDS,
    Dialect,
    NoMigSeriesError,
    SliceReader,
    detect_dialect,
    indexes,
    iter_slice_series,
    keeps,
)
from migscope.analyzer._intake.gpu_facts import DRIVER_LABELS
from migscope.analyzer._intake.openmetrics import parse_exposition
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.prometheus_source import PrometheusSource
from migscope.analyzer._intake.stats_local import RangeSemantics, slice_stats
from migscope.analyzer._intake.stats_promql import remote_slice_stats
from migscope.analyzer._model import SliceStats
from migscope.cli.main import cli
from migscope.core._metrics import DCGM_COMPAT

STEP = 60
END = float((int(time.time()) // 3600 - 3) * 3600)  # on the hour grid, well clear of "now"
START = END - 6 * 3600
GRID = np.arange(START - 600, END + 1, STEP, dtype=np.float64)
ROLL_FROM, ROLL_TO = START + 2 * 3600, START + 4 * 3600  # both generations in between
SKEW = -float(1 << 30)
"""4.9's used bytes minus 4.8's MiB x 2^20 in the precedence tests: far more than DCGM's
rounding (under 1 MiB), so that which generation was read shows in the peak."""
MIB = 1 << 20
MODEL = "NVIDIA A100-SXM4-40GB"
DRIVER = "520.56.06"
UUID = "GPU-473571f2-fb37-ef7e-50fe-9885b74a23cd"


def uuid_of(node: str) -> str:
    """The GPU UUID of ``node``'s GPU: the real one on ``gpu-a``, a planted one elsewhere.

    One per node: a GPU UUID is unique in a fleet, and the analyzer reports a UUID seen under
    several node names as one GPU under its newest name (issue 22, item 7).
    """
    return UUID if node == "gpu-a" else f"GPU-{sum(map(ord, node)):08x}-fb37-ef7e-50fe-9885b74a23cd"


NEW = {f.quantity: f.name for f in DCGM_FIELDS if f.writers.startswith("4.9")}
ACTIVITY_49 = NEW["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
USED_49, FREE_49 = NEW["DCGM_FI_DEV_FB_USED"], NEW["DCGM_FI_DEV_FB_FREE"]
CAPACITY_49 = NEW["DCGM_FI_DEV_FB_CAPACITY_BYTES"]


@dataclass(frozen=True)
class Reading:
    """One GPU instance's readings, whatever the exporter writes them as."""

    gi: int
    profile: str
    activity: np.ndarray  # ratio 0..1
    used_mib: np.ndarray  # whole MiB, as DCGM's MiB fields report
    total_mib: float  # FB_USED + FB_FREE
    capacity_mib: float  # FB_CAPACITY (DCGM's total, reserved memory included)
    pod: tuple[str, str] | None


def _readings() -> list[Reading]:
    rng = np.random.default_rng(13)
    n = GRID.size
    busy = np.clip(0.7 + rng.normal(0, 0.05, n), 0, 1).round(4)
    busy_used = rng.integers(12_000, 18_000, n) * 1.0
    busy_used[GRID == START + 3 * 3600] = 18_500  # the peak, while both generations write
    return [
        Reading(1, "3g.20gb", busy, busy_used, 19_968, 20_096, ("ml", "train-0")),
        Reading(5, "2g.10gb", np.zeros(n), np.full(n, 2_048.0), 9_856, 9_984,
                ("ml", "notebook")),
        Reading(13, "1g.5gb", np.zeros(n), np.zeros(n), 4_864, 4_992, None),
    ]  # fmt: skip


READINGS = _readings()


def _points(values: np.ndarray, mask: np.ndarray) -> list[tuple[float, float]]:
    return [(float(t), float(v)) for t, v in zip(GRID[mask], values[mask], strict=True)]


def _labels(r: Reading, node: str, host: str, driver: str) -> dict[str, str]:
    labels = {
        "gpu": "0",
        "UUID": uuid_of(node),
        "pci_bus_id": "00000000:07:00.0",
        "device": "nvidia0",
        "modelName": MODEL,
        "GPU_I_PROFILE": r.profile,
        "GPU_I_ID": str(r.gi),
        host: node,
        driver: DRIVER,
    }
    if r.pod is not None:
        labels.update(container="main", namespace=r.pod[0], pod=r.pod[1])
    return labels


def dcgm_48(
    node: str, mask: np.ndarray | None = None, host: str = "Hostname"
) -> list[HistorySeries]:
    """As dcgm-exporter 4.8.x writes the readings (``Hostname`` up to 4.8.2, then ``hostname``)."""
    at = np.ones(GRID.size, dtype=bool) if mask is None else mask
    out: list[HistorySeries] = []
    for r in READINGS:
        labels = _labels(r, node, host, "DCGM_FI_DRIVER_VERSION")
        out += [
            HistorySeries("DCGM_FI_DEV_SM_CLOCK", labels, _points(np.full(GRID.size, 1410.0), at)),
            HistorySeries("DCGM_FI_DEV_FB_FREE", labels, _points(r.total_mib - r.used_mib, at)),
            HistorySeries("DCGM_FI_DEV_FB_USED", labels, _points(r.used_mib, at)),
            HistorySeries("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, _points(r.activity, at)),
        ]
    return out


def dcgm_49(
    node: str,
    mask: np.ndarray | None = None,
    *,
    free: bool = True,
    bytes_offset: float = 0.0,
) -> list[HistorySeries]:
    """As dcgm-exporter 4.9 writes the same readings: new names, bytes, the new labels.

    Args:
        node: The ``hostname`` label.
        mask: The grid points written (all by default).
        free: Write the framebuffer's free bytes (a collectors file may leave it out).
        bytes_offset: Added to the used bytes (DCGM's bytes are exact, its MiB rounded).
    """
    at = np.ones(GRID.size, dtype=bool) if mask is None else mask
    out: list[HistorySeries] = []
    for r in READINGS:
        labels = _labels(r, node, "hostname", "DCGM_FI_SYSTEM_DRIVER_VERSION")
        used = r.used_mib * MIB + bytes_offset
        out += [
            HistorySeries(
                "DCGM_FI_DEV_SM_CLOCK_HERTZ", labels, _points(np.full(GRID.size, 1.41e9), at)
            ),
            HistorySeries(
                CAPACITY_49, labels, _points(np.full(GRID.size, r.capacity_mib * MIB), at)
            ),
            HistorySeries(USED_49, labels, _points(used, at)),
            HistorySeries(ACTIVITY_49, labels, _points(r.activity, at)),
        ]
        if free:
            out.append(HistorySeries(FREE_49, labels, _points(r.total_mib * MIB - used, at)))
    return out


def rollout(node: str, *, bytes_offset: float = 0.0) -> list[HistorySeries]:
    """dcgm-exporter 4.8.4 until ROLL_TO, 4.9 from ROLL_FROM: both in between (``hostname``)."""
    return dcgm_48(node, GRID < ROLL_TO, host="hostname") + dcgm_49(
        node, GRID >= ROLL_FROM, bytes_offset=bytes_offset
    )


def read(history: list[HistorySeries]) -> SliceReader:
    text = to_openmetrics(history)
    return iter_slice_series(
        parse_exposition(text, keep=keeps, index=indexes, default_timestamp=END)
    )


def stats(
    history: list[HistorySeries], semantics: RangeSemantics = "prometheus3"
) -> list[SliceStats]:
    return [
        slice_stats(s, start=START, end=END, step=STEP, semantics=semantics) for s in read(history)
    ]


FIELDS = (
    "window_start",
    "window_end",
    "samples",
    "expected_samples",
    "coverage",
    "activity_p50",
    "activity_p95",
    "activity_max",
    "memory_peak_bytes",
    "memory_p95_bytes",
    "memory_total_bytes",
    "allocated_fraction",
    "energy_joules",
    "last_seen",
)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def assert_same(got: list[SliceStats], want: list[SliceStats]) -> None:
    """Field by field, hourly buckets and owners too (as test_stats_agree does)."""
    assert [s.key for s in got] == [s.key for s in want]
    for a, b in zip(got, want, strict=True):
        assert a.info == b.info
        for name in FIELDS:
            assert _close(getattr(a, name), getattr(b, name)), (
                f"{a.key} {name}: {getattr(a, name)!r} != {getattr(b, name)!r}"
            )
        assert [(o.namespace, o.pod) for o in a.owners] == [(o.namespace, o.pod) for o in b.owners]
        for x, y in zip(a.owners, b.owners, strict=True):
            assert _close(x.fraction, y.fraction)
        assert (a.hourly is None) == (b.hourly is None)
        if a.hourly is not None and b.hourly is not None:
            for u, v in zip(a.hourly.activity, b.hourly.activity, strict=True):
                assert _close(u, v), f"{a.key} hourly activity {u} != {v}"
            for u, v in zip(a.hourly.allocated, b.hourly.allocated, strict=True):
                assert _close(u, v), f"{a.key} hourly allocated {u} != {v}"


# --------------------------------------------------------------------------------------------
# The name table


COUNTERS_48 = Path(__file__).parents[1] / "fixtures" / "dcgm" / "dcgm-exporter-default-counters.csv"


def _default_counters() -> dict[str, str]:
    """The active rows of dcgm-exporter's own 4.8 default counters file: name -> HELP."""
    rows: dict[str, str] = {}
    for line in COUNTERS_48.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _type, help_ = (part.strip() for part in line.split(",", 2))
            rows[name] = help_
    return rows


def test_the_48_names_and_units_are_dcgm_exporters_own() -> None:
    rows = _default_counters()
    old = [f for f in DCGM_FIELDS if f.writers == "up to 4.8.x"]
    assert {f.quantity for f in old} == {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", *NEW} - {CAPACITY_49}
    for f in old:
        assert f.name in rows, f.name
        assert ("(in MiB)" in rows[f.name]) == (f.to_base == MIB), (f.name, rows[f.name])
        assert f.evidence == "verified"
    assert CAPACITY_49 not in rows  # new in 4.9's defaults


def test_the_49_names_agree_with_the_exporters_and_the_driver_label_list() -> None:
    aliases = {spec.name: spec.aliases for spec in DCGM_COMPAT}
    assert ACTIVITY_49 in aliases["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]  # same field, same unit
    assert "DCGM_FI_SYSTEM_DRIVER_VERSION" in aliases["DCGM_FI_DRIVER_VERSION"]
    assert {"DCGM_FI_DRIVER_VERSION", "DCGM_FI_SYSTEM_DRIVER_VERSION"} <= set(DRIVER_LABELS)
    for f in DCGM_FIELDS:  # an unverified name says so where it is cited
        assert (f.evidence == "inferred") == ("inferred" in f.source), f.name


# --------------------------------------------------------------------------------------------
# Files


def test_the_49_scrape_reads_as_dcgm_exporters() -> None:
    series = parse_exposition(to_openmetrics(dcgm_49("gpu-a")), keep=keeps, index=indexes)
    assert detect_dialect(series) is Dialect.DCGM


def test_49_and_48_give_the_same_slices_and_statistics() -> None:
    old, new = stats(dcgm_48("gpu-a")), stats(dcgm_49("gpu-a"))
    assert len(old) == len(READINGS)
    assert_same(new, old)
    busy = {s.key.gpu_instance_id: s for s in new}[1]
    # The numbers are the readings', in bytes: a MiB field misread as bytes would be 2^20 off.
    window = (GRID > START) & (GRID <= END)
    assert busy.memory_peak_bytes == READINGS[0].used_mib[window].max() * MIB
    assert busy.memory_total_bytes == READINGS[0].total_mib * MIB
    assert busy.activity_max == READINGS[0].activity[window].max()


def test_both_host_labels_name_the_node() -> None:
    for history in (dcgm_48("gpu-a"), dcgm_48("gpu-a", host="hostname"), dcgm_49("gpu-a")):
        assert {s.key.node for s in stats(history)} == {"gpu-a"}


def test_the_driver_label_of_either_generation_is_read() -> None:
    for history in (dcgm_48("gpu-a"), dcgm_49("gpu-a")):
        reader = read(history)
        assert [(g.node, g.gpu_uuid, g.model, str(g.driver)) for g in reader.gpus] == [
            ("gpu-a", UUID, "A100-40GB", DRIVER)
        ]


def test_lower_cased_49_names_are_read_too() -> None:
    lowered = [HistorySeries(h.name.lower(), h.labels, h.points) for h in dcgm_49("gpu-a")]
    assert_same(stats(lowered), stats(dcgm_48("gpu-a")))


def test_capacity_is_the_total_only_without_used_plus_free() -> None:
    with_free = {s.key.gpu_instance_id: s for s in stats(dcgm_49("gpu-a"))}
    without = {s.key.gpu_instance_id: s for s in stats(dcgm_49("gpu-a", free=False))}
    for r in READINGS:
        assert with_free[r.gi].memory_total_bytes == r.total_mib * MIB
        assert without[r.gi].memory_total_bytes == r.capacity_mib * MIB


def test_a_rollout_counts_no_sample_twice() -> None:
    both = stats(rollout("gpu-a"))
    assert_same(both, stats(dcgm_48("gpu-a", host="hostname")))
    assert all(s.samples == s.expected_samples == 360 for s in both)


def test_where_both_generations_hold_a_slice_the_bytes_are_read() -> None:
    # The busy slice's peak is written by both: read as 4.9's bytes, it is no longer the peak.
    got = {s.key.gpu_instance_id: s for s in stats(rollout("gpu-a", bytes_offset=SKEW))}
    used = READINGS[0].used_mib * MIB
    read_as = np.where(GRID >= ROLL_FROM, used + SKEW, used)
    window = (GRID > START) & (GRID <= END)
    assert got[1].memory_peak_bytes == read_as[window].max() < used[window].max()
    assert got[1].samples == 360


def test_a_49_scrape_without_gpu_instances_names_the_new_names() -> None:
    renamed = [HistorySeries("gpu_" + h.name, h.labels, h.points) for h in dcgm_49("gpu-a")]
    series = parse_exposition(to_openmetrics(renamed), keep=keeps, index=indexes)
    with pytest.raises(NoMigSeriesError) as err:
        detect_dialect(series)
    message = str(err.value)
    assert f"gpu_{USED_49}" in message  # the closest names: the renamed 4.9 families
    assert f"4.9+: {ACTIVITY_49}/{USED_49}" in message


def _cli_report(path: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        cli,
        ["analyze", *args, "--window", "6h", "--end", str(END), "--step", "1m", "-o", "json"],
    )
    assert result.exit_code == 0, (result.stderr, result.exception)
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what says where and when it was made, and how long solving took."""
    made = ("source", "created", "created_unix")
    out = dict(report)
    out["provenance"] = {k: v for k, v in report["provenance"].items() if k not in made}
    out["pools"] = [
        {**pool, "solve": {k: v for k, v in pool["solve"].items() if not k.endswith("_s")}}
        for pool in report["pools"]
    ]
    return out


def test_analyze_gives_the_same_report_for_either_generation(tmp_path: Path) -> None:
    old, new = tmp_path / "dcgm-4.8.txt", tmp_path / "dcgm-4.9.txt"
    old.write_text(to_openmetrics(dcgm_48("gpu-a")))
    new.write_text(to_openmetrics(dcgm_49("gpu-a")))
    a = _cli_report(old, "--source", str(old))
    b = _cli_report(new, "--source", str(new))
    assert _comparable(b) == _comparable(a)
    status = {s["gpu_instance_id"]: s["status"] for s in b["slices"]}
    assert status == {1: "healthy", 5: "idle", 13: "unallocated"}
    assert any(DRIVER in note for note in b["notes"])  # the driver label reached the plan


# --------------------------------------------------------------------------------------------
# Real Prometheus and VictoriaMetrics

NEW_NODE, ROLL_NODE, UPGRADE_NODE = "gpu-49", "gpu-roll", "gpu-upgrade"


def upgrade(node: str) -> list[HistorySeries]:
    """dcgm-exporter 4.8.2 (``Hostname``) until ROLL_TO, 4.9 (``hostname``) from ROLL_FROM."""
    return dcgm_48(node, GRID < ROLL_TO) + dcgm_49(node, GRID >= ROLL_FROM)


# One fleet: a node on 4.9, one rolling 4.8.4 -> 4.9, one upgrading from 4.8.2 (the host label
# changes too). The server's node label is then Hostname, with hostname for the series that
# lack it, as the file reader reads a node.
SERVER_HISTORY = dcgm_49(NEW_NODE) + rollout(ROLL_NODE, bytes_offset=SKEW) + upgrade(UPGRADE_NODE)


@dataclass
class Engine:
    client: PrometheusClient
    semantics: RangeSemantics
    url: str


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("prometheus", marks=requires_prometheus),
        pytest.param("victoria-metrics", marks=requires_victoria),
    ],
)
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    server: ManagedServer = (
        PrometheusServer(SERVER_HISTORY)
        if request.param == "prometheus"
        else VictoriaServer(SERVER_HISTORY)
    )
    semantics: RangeSemantics = (
        "prometheus2" if request.param == "prometheus" else "victoriametrics"
    )
    with server, PrometheusClient(server.url, retries=0, trust_env=False) as client:
        yield Engine(client, semantics, server.url)


def _remote(engine: Engine, node: str) -> list[SliceStats]:
    run = remote_slice_stats(engine.client, start=START, end=END, step=STEP, nodes=[node])
    assert run.dialect is Dialect.DCGM
    assert (run.node_label, run.node_fallbacks) == ("Hostname", ("hostname",))
    assert run.nodes == (node,)
    return list(run)


def test_the_server_reads_a_49_fleet_as_the_48_file(engine: Engine) -> None:
    # The 4.8.2 file names its node with ``Hostname``, the 4.9 server with ``hostname``.
    assert_same(_remote(engine, NEW_NODE), stats(dcgm_48(NEW_NODE), engine.semantics))


def test_the_server_reads_a_rollout_as_the_file_does(engine: Engine) -> None:
    got = _remote(engine, ROLL_NODE)
    assert_same(got, stats(rollout(ROLL_NODE, bytes_offset=SKEW), engine.semantics))
    plain = stats(dcgm_48(ROLL_NODE, host="hostname"), engine.semantics)
    for a, b in zip(got, plain, strict=True):  # nothing counted twice
        assert (a.samples, a.coverage, a.allocated_fraction) == (
            b.samples,
            b.coverage,
            b.allocated_fraction,
        )
        assert a.memory_total_bytes == b.memory_total_bytes


def test_the_server_reads_a_node_whose_host_label_changed_as_the_file_does(
    engine: Engine,
) -> None:
    # Read by Hostname alone, the 4.9 half would be lost: samples and coverage would halve.
    got = _remote(engine, UPGRADE_NODE)
    assert_same(got, stats(upgrade(UPGRADE_NODE), engine.semantics))
    plain = stats(dcgm_48(UPGRADE_NODE), engine.semantics)
    assert [s.samples for s in got] == [s.samples for s in plain]
    assert [s.coverage for s in got] == [s.coverage for s in plain]


def test_the_server_gives_each_gpu_the_49_driver_label(engine: Engine) -> None:
    source = PrometheusSource(engine.client)
    source.slices((START, END), STEP)
    facts = {g.node: g for g in source.gpus()}
    assert set(facts) == {NEW_NODE, ROLL_NODE, UPGRADE_NODE}
    for node, fact in facts.items():
        assert (fact.gpu_uuid, fact.model, str(fact.driver)) == (
            uuid_of(node),
            "A100-40GB",
            DRIVER,
        )


def test_analyze_through_the_server_gives_the_48_files_verdicts(
    engine: Engine, tmp_path: Path
) -> None:
    old = tmp_path / "dcgm-4.8.txt"
    old.write_text(to_openmetrics(dcgm_48(NEW_NODE)))
    want = _cli_report(old, "--source", str(old))
    got = _cli_report(old, "--prometheus", engine.url)

    def verdicts(report: dict[str, Any], node: str) -> list[tuple[Any, ...]]:
        return [
            (s["gpu_instance_id"], s["profile"], s["status"], s["suggested_profile"])
            for s in report["slices"]
            if s["node"] == node
        ]

    assert verdicts(got, NEW_NODE) == verdicts(want, NEW_NODE)
    assert len(verdicts(got, NEW_NODE)) == len(READINGS)
