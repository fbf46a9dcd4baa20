"""The analyzer trusts no number it reads: out-of-range values are dropped or clamped, and said.

Issue 12, items 11-13. Infinite and huge values once crashed the report at its very end
(JSON has no infinity); negative or 700 % activity, memory in use above the slice's total and
numbers that only Python reads (``1_0``, other scripts' digits) changed verdicts without a
word; and one empty answer from the server discarded the pods known to hold a slice. The rules
are :mod:`migscope.analyzer._intake.stats_local.quality`'s; the file path and the Prometheus path
apply them
alike, which is checked here on a real Prometheus and a real VictoriaMetrics, and both put one
note per kind in the report.
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from support.prometheus import (
    FaultProxy,
    HistorySeries,
    ManagedServer,
    PrometheusServer,
    Reply,
    requires_prometheus,
    to_openmetrics,
)
from support.victoria import VictoriaServer, requires_victoria

from migscope.analyzer._analysis import run
from migscope.analyzer._intake.dialect import indexes, iter_slice_series, keeps
from migscope.analyzer._intake.file import FileSource
from migscope.analyzer._intake.openmetrics import ExpositionError, parse_exposition
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.stats_local import (
    RangeSemantics,
    SliceSeries,
    TimeSeries,
    slice_stats,
)
from migscope.analyzer._intake.stats_promql import remote_slice_stats
from migscope.analyzer._model import SliceInfo, SliceKey, SliceStats
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import build_report, render
from migscope.core._spec.v1 import report_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCRAPE = FIXTURES / "migscope" / "sim-h200-node-once.txt"
GIB = float(1 << 30)
MIB = float(1 << 20)
T0 = 1_760_000_000.0
INFO = SliceInfo(SliceKey("n", 0, "GPU-0", 1), "H200-141GB", "1g.18gb")
ACTIVITY = "migscope_mig_graphics_active_ratio"
MEMORY = "migscope_mig_memory_used_bytes"


def _minutes(*values: float) -> TimeSeries:
    return TimeSeries.of(T0 + 60.0 * np.arange(1, len(values) + 1), values)


def _scrape_with(tmp_path: Path, changes: dict[str, str]) -> Path:
    """The recorded scrape with some samples' values replaced: ``{label text: new value}``."""
    lines = SCRAPE.read_text().splitlines(keepends=True)
    for needle, value in changes.items():
        hits = [i for i, line in enumerate(lines) if needle in line and not line.startswith("#")]
        assert len(hits) == 1, needle
        name_and_labels = lines[hits[0]].rsplit(" ", 1)[0]
        lines[hits[0]] = f"{name_and_labels} {value}\n"
    out = tmp_path / "scrape.txt"
    out.write_text("".join(lines))
    return out


def _needle(metric: str, gpu: int, gi: int) -> str:
    """The text that tells one slice's sample line of ``metric`` in the recorded scrape."""
    for line in SCRAPE.read_text().splitlines():
        if line.startswith(f'{metric}{{gpu="{gpu}",') and f'gpu_instance_id="{gi}"' in line:
            return line.rsplit(" ", 1)[0]
    raise AssertionError(f"no {metric} for GPU {gpu} GI {gi}")


def _every_report(result: object) -> dict[str, object]:
    """Render every format (each must succeed) and return the JSON report, parsed."""
    for fmt in ("md", "csv", "html"):
        assert render(result, fmt)  # type: ignore[arg-type]
    text = render(result, "json")  # type: ignore[arg-type]
    data = json.loads(text)
    assert isinstance(data, dict)
    return data


# ---------------------------------------------------------------------------------------------
# Item 11: infinite and huge values do not crash the report


@pytest.mark.parametrize(
    ("changes", "expect"),
    [
        ({_needle(ACTIVITY, 0, 9): "+Inf"}, f"1 sample of {ACTIVITY} was negative or infinite"),
        ({_needle(ACTIVITY, 0, 9): "-Inf"}, f"1 sample of {ACTIVITY} was negative or infinite"),
        ({_needle(MEMORY, 0, 3): "+Inf"}, f"1 sample of {MEMORY} was negative or infinite"),
        ({_needle(MEMORY, 0, 3): "1e308"}, f"1 sample of {MEMORY} above the slice's memory"),
        ({_needle(ACTIVITY, 0, 9): "1e308"}, f"1 sample of {ACTIVITY} above 1"),
        (
            {_needle("migscope_mig_energy_estimated_joules_total", 0, 3): "+Inf"},
            "migscope_mig_energy_estimated_joules_total counters hold negative or infinite",
        ),
    ],
)
def test_infinite_or_huge_values_in_a_scrape_give_a_report_and_a_note(
    tmp_path: Path, changes: dict[str, str], expect: str
) -> None:
    source = _scrape_with(tmp_path, changes)
    result = run(FileSource(source), AnalyzeOptions(window_s=3600))
    report = _every_report(result)
    notes = report["notes"]
    assert isinstance(notes, list)
    assert [n for n in notes if expect in n] == [n for n in notes if str(source) in n]
    assert len([n for n in notes if expect in n]) == 1


def test_statistics_of_huge_numbers_stay_finite() -> None:
    # The largest floats: a quantile's interpolation or an increase's extrapolation overflows.
    big = np.finfo(np.float64).max
    series = SliceSeries(
        info=INFO,
        activity=_minutes(big, big, 0.5),
        memory_used=_minutes(big, big, big),
        energy=(_minutes(1.0, big),),  # extrapolated a minute past its last sample: 2x
    )
    stats = slice_stats(series, start=T0, end=T0 + 180)
    assert stats.activity_max == 1.0
    assert stats.memory_peak_bytes == big  # no total known: as read, but finite
    assert stats.energy_joules is None  # the extrapolated increase overflows
    json.dumps(stats.to_dict(), allow_nan=False)


# ---------------------------------------------------------------------------------------------
# Item 13: out-of-range data is dropped or clamped, never silently used


def test_negative_activity_is_missing_not_idle() -> None:
    # Before: p95 -0.5 < 5 %, so "idle" on compute. Now the samples are dropped: activity is
    # unknown, and only memory can speak for the slice.
    series = SliceSeries(
        info=INFO,
        activity=_minutes(-0.5, -0.5, -0.5),
        memory_used=_minutes(GIB, GIB, GIB),
        memory_total_bytes=16 * GIB,
    )
    stats = slice_stats(series, start=T0, end=T0 + 180)
    assert stats.activity_p95 is None
    assert stats.coverage == 1.0  # memory still observed every minute


def test_activity_above_one_is_clamped_and_counts() -> None:
    series = SliceSeries(info=INFO, activity=_minutes(7.0, 0.5, 1.0000001))
    stats = slice_stats(series, start=T0, end=T0 + 180)
    assert stats.activity_max == 1.0
    assert stats.activity_p50 == 1.0  # 0.5, 1, 1
    assert stats.samples == 3


def test_memory_above_the_total_is_capped_in_the_statistics() -> None:
    series = SliceSeries(
        info=INFO,
        memory_used=_minutes(GIB, 20 * GIB, 30 * GIB, -GIB, math.inf),
        memory_total_bytes=16 * GIB,
    )
    stats = slice_stats(series, start=T0, end=T0 + 300)
    assert stats.memory_peak_bytes == 16 * GIB
    assert stats.memory_p95_bytes == 16 * GIB
    assert stats.samples == 3  # the negative and the infinite sample are missing


@pytest.mark.parametrize("total", [math.inf, -GIB, 0.0, math.nan])
def test_a_total_that_is_not_a_size_is_ignored(total: float) -> None:
    series = SliceSeries(info=INFO, memory_used=_minutes(GIB), memory_total_bytes=total)
    assert slice_stats(series, start=T0, end=T0 + 60).memory_total_bytes is None


def test_an_energy_counter_with_a_bad_sample_in_the_window_gives_no_energy() -> None:
    good = _minutes(100.0, 110.0, 120.0)
    bad = _minutes(100.0, -5.0, 120.0)
    ok = SliceSeries(info=INFO, memory_used=good, energy=(good,))
    assert slice_stats(ok, start=T0, end=T0 + 180).energy_joules is not None
    broken = SliceSeries(info=INFO, memory_used=good, energy=(good, bad))
    assert slice_stats(broken, start=T0, end=T0 + 180).energy_joules is None
    # Outside the window it does not count.
    late = TimeSeries.of([T0 + 400, T0 + 460], [math.inf, 1.0])
    later = SliceSeries(info=INFO, memory_used=good, energy=(good, late))
    assert slice_stats(later, start=T0, end=T0 + 180).energy_joules is not None


def test_the_file_reader_says_each_kind_once_with_its_counts(tmp_path: Path) -> None:
    changes = {
        _needle(ACTIVITY, 1, 7): "7.0",
        _needle(ACTIVITY, 1, 8): "7.0",
        _needle(ACTIVITY, 1, 10): "-0.5",
        _needle(MEMORY, 1, 11): "-1",
        _needle(MEMORY, 1, 12): "1e300",
        _needle(MEMORY, 1, 13): "1e301",
        _needle("migscope_mig_memory_total_bytes", 2, 1): "+Inf",
    }
    source = _scrape_with(tmp_path, changes)
    found = parse_exposition(source.read_text(), source="s", keep=keeps, index=indexes)
    reader = iter_slice_series(found)
    assert list(reader.notes) == [
        f"s: 1 sample of {ACTIVITY} was negative or infinite and was dropped (counted as "
        "missing) on 1 slice",
        f"s: 2 samples of {ACTIVITY} above 1 (outside [0, 1]) were clamped to 1 on 2 slices",
        f"s: 1 sample of {MEMORY} was negative or infinite and was dropped (counted as "
        "missing) on 1 slice",
        f"s: 2 samples of {MEMORY} above the slice's memory total were clamped to it (peak "
        "and p95 memory capped at the total) on 2 slices",
        "s: the memory total (migscope_mig_memory_total_bytes) of 1 slice was not a usable "
        "size (infinite, not positive or larger than the GPU) and was ignored: the "
        "catalogue's profile size is used where known",
    ]
    slices = {(s.info.key.gpu, s.info.key.gpu_instance_id): s for s in reader}
    assert slices[(2, 1)].memory_total_bytes is not None
    assert math.isfinite(slices[(2, 1)].memory_total_bytes)


def test_a_clean_scrape_has_no_data_quality_note() -> None:
    found = parse_exposition(SCRAPE.read_text(), source="s", keep=keeps, index=indexes)
    assert iter_slice_series(found).notes == ()


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ('a{x="1"} 1_0', "invalid number '1_0'"),  # float("1_0") == 10
        ('a{x="1"} ١٢', "invalid number '١٢'"),  # float("١٢") == 12
        ('a{x="1"} 1 1_000', "invalid number '1_000'"),
        ('a{x="1"} 1 NaN', "invalid timestamp 'NaN'"),
        ('a{x="1"} 1 +Inf', "invalid timestamp '+Inf'"),
        ('a{x="1"} 1 1e300', "invalid timestamp '1e300'"),  # past int64 milliseconds
    ],
)
def test_numbers_only_python_reads_are_refused_at_their_line(line: str, complaint: str) -> None:
    text = f'a{{x="0"}} 1\n{line}\na{{x="2"}} 3\n'
    with pytest.raises(ExpositionError, match=r"^f:2: not valid Prometheus text format: "):
        parse_exposition(text, source="f")
    with pytest.raises(ExpositionError, match=re.escape(complaint)):
        parse_exposition(text, source="f")
    with pytest.raises(ExpositionError, match=r"^f:3: not valid OpenMetrics: invalid "):
        parse_exposition(f"# TYPE a gauge\n{text}# EOF\n", source="f")


def test_what_the_exposition_format_takes_is_still_read() -> None:
    text = (
        'a{x="1"} +Inf\na{x="2"} -inf 5\na{x="3"} NaN\na{x="4"} .5\na{x="5"} 1E+05\n'
        'a{x="} 1_0 {"} 2\n{"a", x="7"} 3 4\n'
    )
    series = parse_exposition(text, default_timestamp=9).get("a")
    values = {s.labels["x"]: float(s.samples.values[0]) for s in series}
    assert values["1"] == math.inf
    assert values["2"] == -math.inf
    assert math.isnan(values["3"])
    assert (values["4"], values["5"], values["} 1_0 {"], values["7"]) == (0.5, 1e5, 2.0, 3.0)


# ---------------------------------------------------------------------------------------------
# Both paths: the same numbers and the same notes, on real engines

STEP = 60
END = float((int(time.time()) // 3600 - 3) * 3600)
START = END - 2 * 3600
GRID = np.arange(START + STEP, END + 1, STEP, dtype=np.float64)  # inside the window only
N = GRID.size


def _with(values: np.ndarray, at: dict[int, float]) -> np.ndarray:
    out = values.copy()
    for i, v in at.items():
        out[i] = v
    return out


@dataclass(frozen=True)
class Bad:
    gi: int
    activity: np.ndarray
    memory_mib: np.ndarray
    total_mib: float = 16_384.0
    energy: np.ndarray | None = None


def _planted() -> list[Bad]:
    calm = np.full(N, 0.3)
    mem = np.full(N, 2048.0)
    counter = 1000.0 + 50.0 * np.arange(N)
    return [
        # 700 % and above-1 activity clamped, negative and infinite activity dropped.
        Bad(1, _with(calm, {3: 7.0, 10: 1.5, 20: -0.5, 30: math.inf, 31: -math.inf}), mem),
        # Memory above the total at some minutes, negative and infinite memory at others.
        Bad(2, calm, _with(mem, {5: 20_000.0, 6: 30_000.0, 40: -1.0, 41: math.inf})),
        # A total that is no size: the catalogue's 1g.18gb (16 GiB) is used instead.
        Bad(3, calm, mem, total_mib=math.inf),
        # A counter with a negative sample: no energy (the others have theirs).
        Bad(4, calm, mem, energy=_with(counter, {50: -3.0})),
    ]


def _points(values: np.ndarray) -> list[tuple[float, float]]:
    return [(float(t), float(v)) for t, v in zip(GRID, values, strict=True)]


def _migscope_history(planted: list[Bad]) -> list[HistorySeries]:
    out: list[HistorySeries] = []
    for b in planted:
        base = {
            "node": "q",
            "gpu": "0",
            "gpu_uuid": "GPU-q",
            "gpu_instance_id": str(b.gi),
            "mig_uuid": f"MIG-q-{b.gi}",
        }
        counter = b.energy if b.energy is not None else 1000.0 + 40.0 * np.arange(N)
        out += [
            HistorySeries("migscope_mig_info", {**base, "profile": "1g.18gb"}, _points(np.ones(N))),
            HistorySeries(ACTIVITY, base, _points(b.activity)),
            HistorySeries(MEMORY, base, _points(b.memory_mib * MIB)),
            HistorySeries(
                "migscope_mig_memory_total_bytes", base, _points(np.full(N, b.total_mib * MIB))
            ),
            HistorySeries("migscope_mig_energy_estimated_joules_total", base, _points(counter)),
            HistorySeries(
                "migscope_mig_pod_info",
                {**base, "namespace": "ml", "pod": f"p{b.gi}", "container": "c"},
                _points(np.ones(N)),
            ),
        ]
    gpu = {"node": "q", "gpu": "0", "gpu_uuid": "GPU-q", "model": "H200-141GB"}
    out.append(HistorySeries("migscope_gpu_info", gpu, _points(np.ones(N))))
    return out


def _dcgm_history(planted: list[Bad]) -> list[HistorySeries]:
    out: list[HistorySeries] = []
    for b in planted:
        labels = {
            "Hostname": "q",
            "gpu": "0",
            "UUID": "GPU-q",
            "GPU_I_ID": str(b.gi),
            "GPU_I_PROFILE": "1g.18gb",
            "modelName": "NVIDIA H200",
            "namespace": "ml",
            "pod": f"p{b.gi}",
        }
        out += [
            HistorySeries("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, _points(b.activity)),
            HistorySeries("DCGM_FI_DEV_FB_USED", labels, _points(b.memory_mib)),
            # FB_USED + FB_FREE is the total; free goes negative where use exceeds it.
            HistorySeries("DCGM_FI_DEV_FB_FREE", labels, _points(b.total_mib - b.memory_mib)),
        ]
    return out


@dataclass
class Paths:
    dialect: str
    remote: list[SliceStats]
    remote_notes: list[str]
    embedded: list[SliceStats]
    embedded_notes: list[str]


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(("prometheus", "migscope"), marks=requires_prometheus, id="prom-mig"),
        pytest.param(("prometheus", "dcgm"), marks=requires_prometheus, id="prom-dcgm"),
        pytest.param(("victoria", "migscope"), marks=requires_victoria, id="vm-mig"),
        pytest.param(("victoria", "dcgm"), marks=requires_victoria, id="vm-dcgm"),
    ],
)
def paths(request: pytest.FixtureRequest) -> Paths:
    engine, dialect = request.param
    planted = _planted()
    history = _migscope_history(planted) if dialect == "migscope" else _dcgm_history(planted)
    semantics: RangeSemantics = "prometheus2" if engine == "prometheus" else "victoriametrics"
    found = parse_exposition(to_openmetrics(history), source="f", keep=keeps, index=indexes)
    reader = iter_slice_series(found)
    embedded = [
        slice_stats(s, start=START, end=END, step=STEP, semantics=semantics) for s in reader
    ]
    server: ManagedServer = (
        PrometheusServer(history) if engine == "prometheus" else VictoriaServer(history)
    )
    with server, PrometheusClient(server.url, retries=0, trust_env=False) as client:
        remote_run = remote_slice_stats(client, start=START, end=END, step=STEP)
        remote = list(remote_run)
        remote_notes = [n.removeprefix(f"{client.base_url}: ") for n in remote_run.notes]
    return Paths(
        dialect, remote, remote_notes, embedded, [n.removeprefix("f: ") for n in reader.notes]
    )


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


FIELDS = (
    "samples",
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


def test_both_paths_apply_the_rules_alike(paths: Paths) -> None:
    assert [s.key for s in paths.remote] == [s.key for s in paths.embedded]
    for got, want in zip(paths.remote, paths.embedded, strict=True):
        for name in FIELDS:
            a, b = getattr(got, name), getattr(want, name)
            assert _close(a, b), f"{got.key} {name}: server {a!r} != embedded {b!r}"
        assert got.hourly is not None
        assert want.hourly is not None
        for a, b in zip(got.hourly.activity, want.hourly.activity, strict=True):
            assert _close(a, b)


def test_both_paths_say_the_same_once_per_kind(paths: Paths) -> None:
    assert paths.remote_notes == paths.embedded_notes
    activity = ACTIVITY if paths.dialect == "migscope" else "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    used = MEMORY if paths.dialect == "migscope" else "DCGM_FI_DEV_FB_USED"
    expected = [
        f"3 samples of {activity} were negative or infinite and were dropped (counted as "
        "missing) on 1 slice",
        f"2 samples of {activity} above 1 (outside [0, 1]) were clamped to 1 on 1 slice",
        f"2 samples of {used} were negative or infinite and were dropped (counted as missing) "
        "on 1 slice",
        f"2 samples of {used} above the slice's memory total were clamped to it (peak and "
        "p95 memory capped at the total) on 1 slice",
    ]
    if paths.dialect == "migscope":
        expected += [
            "the memory total (migscope_mig_memory_total_bytes) of 1 slice was not a usable "
            "size (infinite, not positive or larger than the GPU) and was ignored: the "
            "catalogue's profile size is used where known",
            "migscope_mig_energy_estimated_joules_total counters hold negative or infinite "
            "samples on 1 slice: their energy is unknown over a window that holds one",
        ]
    else:  # an infinite FB_FREE makes an infinite total
        expected.insert(
            4,
            "the memory total (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) of 1 slice was not a "
            "usable size (infinite, not positive or larger than the GPU) and was ignored: the "
            "catalogue's profile size is used where known",
        )
    assert paths.remote_notes == expected


def test_the_planted_values_come_out_held_to_their_ranges(paths: Paths) -> None:
    by_gi = {s.key.gpu_instance_id: s for s in paths.remote}
    assert by_gi[1].activity_max == 1.0
    assert by_gi[1].activity_p50 == pytest.approx(0.3)
    assert by_gi[1].coverage == 1.0  # memory was sampled every minute
    assert by_gi[2].memory_peak_bytes == 16_384 * MIB == by_gi[2].memory_total_bytes
    assert by_gi[3].memory_total_bytes == 16_384 * MIB  # the catalogue's 1g.18gb
    if paths.dialect == "migscope":
        assert by_gi[4].energy_joules is None
        assert by_gi[1].energy_joules is not None
    for s in paths.remote:
        json.dumps(s.to_dict(), allow_nan=False)


@requires_prometheus
def test_infinite_values_from_prometheus_give_a_report() -> None:
    """Item 11 on the Prometheus path: ``+Inf`` and ``1e308`` from the server, end to end."""
    planted = _planted()
    planted[0] = Bad(1, _with(planted[0].activity, {5: 1e308}), planted[0].memory_mib)
    planted[1] = Bad(2, planted[1].activity, _with(planted[1].memory_mib, {7: 1e308 / MIB}))
    with (
        PrometheusServer(_migscope_history(planted)) as server,
        PrometheusClient(server.url, retries=0, trust_env=False) as client,
    ):
        stats = list(remote_slice_stats(client, start=START, end=END, step=STEP))
    result = analyze(iter(stats), window=(START, END), options=AnalyzeOptions(step_s=STEP))
    report = _every_report(result)
    assert len(report["slices"]) == 4  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Item 12: an empty answer does not discard the pods known to hold a slice

DAY_END = END
DAY_START = DAY_END - 26 * 3600
DAY = np.arange(DAY_START + STEP, DAY_END + 1, STEP, dtype=np.float64)
EMPTY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})


def _day(value: float) -> list[tuple[float, float]]:
    return [(float(t), value) for t in DAY]


def _node(node: str, slices: list[tuple[int, str, float, str | None]]) -> list[HistorySeries]:
    out = [
        HistorySeries(
            "migscope_gpu_info",
            {"node": node, "gpu": "0", "gpu_uuid": f"GPU-{node}", "model": "H200-141GB"},
            _day(1),
        )
    ]
    for gi, profile, activity, pod in slices:
        base = {
            "node": node,
            "gpu": "0",
            "gpu_uuid": f"GPU-{node}",
            "gpu_instance_id": str(gi),
            "mig_uuid": f"MIG-{node}-{gi}",
        }
        out += [
            HistorySeries("migscope_mig_info", {**base, "profile": profile}, _day(1)),
            HistorySeries(ACTIVITY, base, _day(activity)),
            HistorySeries(MEMORY, base, _day(4 * GIB)),
        ]
        if pod is not None:
            labels = {**base, "namespace": "ml", "pod": pod, "container": "c"}
            out.append(HistorySeries("migscope_mig_pod_info", labels, _day(1)))
    return out


class EmptyFor(FaultProxy):
    """Forwards to Prometheus, but answers the instant queries ``empty`` picks with nothing.

    The queue of :class:`FaultProxy` answers requests in order; which query a request is
    only shows in its form, which the handler records before it asks for the answer.
    """

    def __init__(self, upstream: str, empty: Callable[[str], bool]) -> None:
        super().__init__(upstream)
        self.empty = empty
        self.emptied = 0

    def _next(self) -> Reply | None:
        request = self.requests[-1]
        instant = urllib.parse.urlsplit(request.path).path.endswith("/api/v1/query")
        if instant and self.empty(request.form().get("query", [""])[0]):
            self.emptied += 1
            return Reply(200, EMPTY)
        return super()._next()


@pytest.fixture(scope="module")
def fleet() -> Iterator[PrometheusServer]:
    history = _node("n1", [(1, "3g.71gb", 0.5, "train"), (2, "1g.18gb", 0.0, None)])
    history += _node("n2", [(1, "3g.71gb", 0.6, "serve"), (2, "1g.18gb", 0.0, None)])
    with PrometheusServer(history) as server:
        yield server


def _n1_usage(query: str) -> bool:
    """Node n1's queries on activity and memory: values, samples, coverage, "seen" intervals."""
    return MEMORY in query and 'node=~"(?:n1)"' in query


@requires_prometheus
def test_an_empty_coverage_answer_keeps_the_owners_and_the_gpu(
    fleet: PrometheusServer,
) -> None:
    # Those on pods (held intervals, owners) answer: the pod holding the slice is known.
    with (
        EmptyFor(fleet.url, _n1_usage) as proxy,
        PrometheusClient(proxy.url, retries=0, trust_env=False) as client,
    ):
        stats = list(
            remote_slice_stats(client, start=DAY_START, end=DAY_END, step=STEP, chunk_nodes=1)
        )
    assert proxy.emptied > 0
    by_slice = {(s.key.node, s.key.gpu_instance_id): s for s in stats}
    held = by_slice[("n1", 1)]
    assert held.samples == 0  # nothing to judge by: unknown
    assert [(o.namespace, o.pod, o.fraction) for o in held.owners] == [("ml", "train", 1.0)]
    assert held.allocated_fraction == 1.0
    assert by_slice[("n2", 1)].samples > 0

    result = analyze(iter(stats), window=(DAY_START, DAY_END), options=AnalyzeOptions(step_s=STEP))
    report = report_json(build_report(result))
    assert report["evidence"]["enough_for_a_plan"]  # n2's day of history: a plan is made
    row = next(s for s in report["slices"] if (s["node"], s["gpu_instance_id"]) == ("n1", 1))
    assert row["status"] == "unknown"
    assert (row["namespace"], row["pod"]) == ("ml", "train")
    assert row["pin"] == "verdict unknown"  # issue 10: an unknown slice pins its GPU
    # So the plan leaves n1 as it is; were its GPU re-created, ml/train would be named in
    # pods_to_move (core.disruption, checked by recommendations() itself).
    assert [rec for rec in result.recommendations() if rec["node"] == "n1"] == []
