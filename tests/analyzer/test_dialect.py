"""Reading exposition files and normalising both dialects into the same per-slice records.

Ground truth: real dcgm-exporter scrapes of a MIG A100-40GB (``tests/fixtures/dcgm/``, copied
verbatim with their provenance: no timestamps, one scrape, no trailing newline) and a real
migscope exposition recorded from the exporter's simulated backend
(``tests/fixtures/migscope/``). Histories with timestamps are written out in the tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from migscope.analyzer._intake.dialect import (
    DEFAULT_NODE,
    DIALECT_METRICS,
    MIB,
    Dialect,
    NoMigSeriesError,
    detect_dialect,
    gpu_uuid_of,
    indexes,
    iter_slice_series,
    keeps,
    node_of,
    pod_of,
)
from migscope.analyzer._intake.openmetrics import ExpositionError, parse_exposition, read_exposition
from migscope.analyzer._intake.stats_local import SliceSeries, slice_stats

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DCGM_3GI = FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-3gi-active.txt"
DCGM_4GI = FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-4gi-active.txt"
DCGM_NO_GI = FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-mig-enabled-no-gi.txt"
MIGSCOPE_ONCE = FIXTURES / "migscope" / "sim-h200-node-once.txt"
T = 1_760_000_000.0


def slices_of(path: Path, **kwargs: object) -> dict[int, SliceSeries]:
    series = read_exposition(path, keep=DIALECT_METRICS, default_timestamp=T)
    out: dict[int, SliceSeries] = {}
    for s in iter_slice_series(series, **kwargs):  # type: ignore[arg-type]
        out[s.info.key.gpu * 100 + s.info.key.gpu_instance_id] = s
    return out


# ---------------------------------------------------------------------------------------------
# Real dcgm-exporter captures


@pytest.mark.parametrize("path", [DCGM_3GI, DCGM_4GI, DCGM_NO_GI])
def test_fixtures_are_verbatim_single_scrapes(path: Path) -> None:
    raw = path.read_bytes()
    assert raw.startswith(b"# SOURCE: github.com/run-ai/fake-gpu-operator")
    assert not raw.endswith(b"\n")  # the capture ends mid-line, as the original does
    series = read_exposition(path, default_timestamp=T)
    assert not series.timestamped
    assert not series.openmetrics
    assert series.time_range() == (T, T)
    for group in series.series.values():
        for s in group:
            assert len(s.samples) == 1


def test_dcgm_3gi_capture_normalises_to_three_slices() -> None:
    series = read_exposition(DCGM_3GI, keep=DIALECT_METRICS, default_timestamp=T)
    assert detect_dialect(series) is Dialect.DCGM
    slices = slices_of(DCGM_3GI)
    assert sorted(slices) == [5, 7, 9]
    for s in slices.values():
        assert s.info.key.node == "nvidia-dcgm-exporter-q28k4"  # Hostname: no node label
        assert s.info.key.gpu == 0
        assert s.info.key.gpu_uuid == "GPU-7099682b-a20d-2bcc-74ab-b9060454d81e"
        assert s.info.model == "A100-40GB"  # modelName "NVIDIA A100-SXM4-40GB"
        assert s.info.mig_uuid is None
        assert s.info.placement_start is None
        assert s.energy == ()  # DCGM's energy is the whole GPU's, repeated per GI
        assert dict(s.holders) == {}  # namespace="" pod="": nobody
    assert [slices[g].info.profile for g in (5, 7, 9)] == ["2g.10gb", "1g.5gb", "1g.5gb"]
    gi9 = slices[9]
    assert gi9.activity is not None
    assert gi9.activity.values.tolist() == [0.999917]
    assert gi9.memory_used is not None
    assert gi9.memory_used.values.tolist() == [4384 * MIB]
    # FB_USED + FB_FREE: 4384 + 480 MiB, the catalogue's 1g.5gb size (4864 MiB) exactly.
    assert gi9.memory_total_bytes == 4864 * MIB
    assert slices[5].memory_total_bytes == (153 + 9702) * MIB


def test_dcgm_4gi_capture_has_gi_ids_5_7_8_9() -> None:
    slices = slices_of(DCGM_4GI)
    assert sorted(slices) == [5, 7, 8, 9]
    assert {slices[g].info.profile for g in (7, 8, 9)} == {"1g.5gb"}
    assert slices[5].info.profile == "2g.10gb"
    gi8 = slices[8]
    assert gi8.activity is not None
    assert gi8.activity.values.tolist() == [0.408493]
    assert gi8.memory_used is not None
    assert gi8.memory_used.values.tolist() == [4384 * MIB]
    stats = slice_stats(gi8, start=T - 60, end=T)
    assert stats.samples == 1
    assert stats.coverage == 1.0
    assert stats.activity_p95 == pytest.approx(0.408493)
    assert stats.allocated_fraction == 0.0


def test_dcgm_capture_without_instances_says_why_there_is_nothing() -> None:
    series = read_exposition(DCGM_NO_GI, keep=DIALECT_METRICS, default_timestamp=T)
    with pytest.raises(NoMigSeriesError, match="none has a GPU_I_ID label") as err:
        iter_slice_series(series)  # fails at once, not on the first next()
    assert str(DCGM_NO_GI) in str(err.value)


def test_default_timestamp_is_the_file_time(tmp_path: Path) -> None:
    copy = tmp_path / "scrape.txt"
    copy.write_bytes(DCGM_3GI.read_bytes())
    os.utime(copy, (T + 5, T + 5))
    assert read_exposition(copy).time_range() == (T + 5, T + 5)


# ---------------------------------------------------------------------------------------------
# migscope's own exposition


def test_migscope_exposition_normalises_every_slice() -> None:
    series = read_exposition(MIGSCOPE_ONCE, keep=DIALECT_METRICS, default_timestamp=T)
    assert detect_dialect(series) is Dialect.MIGSCOPE
    slices = slices_of(MIGSCOPE_ONCE)
    # h200-node: GPU 0 3g+2g+1g+1g, GPU 1 seven 1g, GPU 2 4g+3g, GPU 3 7g.
    assert len(slices) == 14
    assert {s.info.key.node for s in slices.values()} == {DEFAULT_NODE}  # no node label
    assert {s.info.model for s in slices.values()} == {"H200-141GB"}
    forgotten = slices[202]
    assert forgotten.info.profile == "3g.71gb"
    assert forgotten.info.placement_start == 4
    assert forgotten.info.mig_uuid == "MIG-781962a8-df6f-5eb7-8df4-32b2b7c2017f"
    assert list(forgotten.holders) == [("ml", "forgotten-job")]
    assert forgotten.memory_total_bytes == 71424 * MIB
    assert len(forgotten.energy) == 1
    assert not slices[10].holders  # GPU 0 GI 10: no pod
    assert slices[300].info.profile == "7g.141gb"
    trainer = slices[9]
    assert trainer.activity is not None
    assert trainer.activity.values.tolist() == [0.97]


def test_default_node_is_used_for_unlabelled_series() -> None:
    slices = slices_of(MIGSCOPE_ONCE, default_node="gpu-node-a")
    assert {s.info.key.node for s in slices.values()} == {"gpu-node-a"}


def test_migscope_wins_when_both_dialects_are_present() -> None:
    # An exporter run with --dcgm-compat publishes both name sets.
    text = MIGSCOPE_ONCE.read_text() + "\n" + DCGM_3GI.read_text() + "\n"
    series = parse_exposition(text, keep=DIALECT_METRICS, default_timestamp=T)
    assert detect_dialect(series) is Dialect.MIGSCOPE
    assert len(list(iter_slice_series(series))) == 14
    dcgm = list(iter_slice_series(series, dialect=Dialect.DCGM))
    assert [s.info.key.gpu_instance_id for s in dcgm] == [5, 7, 9]


# ---------------------------------------------------------------------------------------------
# Histories with timestamps


def _dcgm_line(metric: str, gi: int, value: float, t_ms: int, pod: str = "") -> str:
    ns = "ml" if pod else ""
    return (
        f'{metric}{{gpu="1",UUID="GPU-x",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",'
        f'GPU_I_PROFILE="3g.40gb",GPU_I_ID="{gi}",Hostname="node-b",container="",'
        f'namespace="{ns}",pod="{pod}"}} {value} {t_ms}\n'
    )


def test_dcgm_history_joins_series_split_by_pod_labels() -> None:
    # dcgm-exporter puts the pod in the labels: when pod "train" arrives after 5 minutes,
    # the slice continues under a new series. Ten minutes, text format, ms timestamps.
    lines = []
    for minute in range(1, 11):
        pod = "train" if minute > 5 else ""
        t_ms = int((T + 60 * minute) * 1000)
        lines.append(_dcgm_line("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2, minute / 10, t_ms, pod))
        lines.append(_dcgm_line("DCGM_FI_DEV_FB_USED", 2, 1024.0, t_ms, pod))
    series = parse_exposition("".join(lines), keep=DIALECT_METRICS)
    assert series.timestamped
    assert len(series.get("DCGM_FI_PROF_GR_ENGINE_ACTIVE")) == 2
    (slice_,) = iter_slice_series(series)
    assert slice_.info.key.node == "node-b"
    assert slice_.info.model == "H100-80GB"
    # No FB_FREE: the slice's size comes from the catalogue (3g.40gb on H100-80GB).
    assert slice_.memory_total_bytes == 40448 * MIB
    assert slice_.activity is not None
    assert len(slice_.activity) == 10
    stats = slice_stats(slice_, start=T, end=T + 600)
    assert stats.samples == 10
    assert stats.allocated_fraction == pytest.approx(0.5)
    assert [(o.namespace, o.pod) for o in stats.owners] == [("ml", "train")]
    assert stats.memory_peak_bytes == 1024 * MIB
    assert stats.activity_max == pytest.approx(1.0)


def test_openmetrics_and_text_format_give_the_same_samples() -> None:
    points = [(T + 60 * i, 0.1 * i) for i in range(1, 6)]
    labels = 'gpu="0",gpu_uuid="GPU-a",gpu_instance_id="1",mig_uuid="MIG-a",node="n1"'
    info = (
        'gpu="0",gpu_uuid="GPU-a",gpu_instance_id="1",mig_uuid="MIG-a",node="n1",'
        'profile="1g.18gb",profile_id="19",placement_start="3",placement_size="1",'
        'compute_slices="1",memory_slices="1"'
    )
    om = [f"migscope_mig_info{{{info}}} 1 {points[0][0]:.0f}\n"]
    om += [f"migscope_mig_graphics_active_ratio{{{labels}}} {v} {t:.3f}\n" for t, v in points]
    om.append("# EOF\n")
    text = [f"migscope_mig_info{{{info}}} 1 {int(points[0][0] * 1000)}\n"]
    text += [
        f"migscope_mig_graphics_active_ratio{{{labels}}} {v} {int(t * 1000)}\n" for t, v in points
    ]
    a = parse_exposition("".join(om), keep=DIALECT_METRICS)
    b = parse_exposition("".join(text), keep=DIALECT_METRICS)
    assert a.openmetrics
    assert not b.openmetrics
    (sa,) = iter_slice_series(a)
    (sb,) = iter_slice_series(b)
    assert sa.activity is not None
    assert sb.activity is not None
    assert sa.activity.timestamps_ms.tolist() == sb.activity.timestamps_ms.tolist()
    assert sa.activity.timestamps_ms[0] == int((T + 60) * 1000)
    np.testing.assert_array_equal(sa.activity.values, sb.activity.values)
    assert sa.info.key.node == "n1"
    assert sa.info.placement_start == 3
    # No migscope_gpu_info: the model is unknown, and so is the memory size.
    assert sa.info.model is None
    assert sa.memory_total_bytes is None
    assert a.time_range() == (T + 60, T + 300)


@pytest.mark.parametrize("label", ["gpu_uuid", "uuid"])
def test_the_gpu_model_is_found_under_either_uuid_label(label: str) -> None:
    """``migscope_gpu_info`` names the GPU ``gpu_uuid`` since issue 13; history an older
    exporter recorded says ``uuid``. Either way the slice gets its GPU's model and size."""
    info = (
        'gpu="0",gpu_uuid="GPU-a",gpu_instance_id="1",mig_uuid="MIG-a",profile="1g.18gb",'
        'profile_id="19",placement_start="3",placement_size="1",compute_slices="1",'
        'memory_slices="1"'
    )
    text = (
        f"migscope_mig_info{{{info}}} 1\n"
        f'migscope_gpu_info{{gpu="0",{label}="GPU-a",model="H200-141GB",name="NVIDIA H200"}} 1\n'
    )
    (slice_,) = iter_slice_series(parse_exposition(text, keep=DIALECT_METRICS))
    assert slice_.info.model == "H200-141GB"
    assert slice_.memory_total_bytes is not None
    assert gpu_uuid_of({"gpu_uuid": "GPU-new", "uuid": "GPU-old"}) == "GPU-new"
    assert gpu_uuid_of({"gpu": "0"}) == ""


def test_keep_filters_samples_but_not_names() -> None:
    series = read_exposition(DCGM_3GI, keep={"DCGM_FI_DEV_FB_USED"}, default_timestamp=T)
    assert set(series.series) == {"DCGM_FI_DEV_FB_USED"}
    assert "DCGM_FI_DEV_POWER_USAGE" in series.names
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total" in series.names  # a counter's sample


def test_keep_takes_a_predicate_and_index_records_label_sets_only() -> None:
    lower = DCGM_3GI.read_text().replace("DCGM_FI_DEV_FB_USED", "dcgm_fi_dev_fb_used")
    series = parse_exposition(
        lower,
        keep=lambda name: name.upper() == "DCGM_FI_DEV_FB_USED",
        index=lambda name: name == "DCGM_FI_DEV_SM_CLOCK",
        default_timestamp=T,
    )
    assert set(series.series) == {"dcgm_fi_dev_fb_used"}
    assert set(series.label_sets) == {"DCGM_FI_DEV_SM_CLOCK"}
    assert sorted(ls["GPU_I_ID"] for ls in series.label_sets["DCGM_FI_DEV_SM_CLOCK"]) == [
        "5",
        "7",
        "9",
    ]
    # The product's filters: dcgm-exporter's families kept in any case, the others indexed.
    both = parse_exposition(lower, keep=keeps, index=indexes, default_timestamp=T)
    assert set(both.series) == {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "dcgm_fi_dev_fb_used",
        "DCGM_FI_DEV_FB_FREE",
    }
    assert "DCGM_FI_DEV_SM_CLOCK" in both.label_sets
    assert [s.info.key.gpu_instance_id for s in iter_slice_series(both)] == [5, 7, 9]


# ---------------------------------------------------------------------------------------------
# Labels


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"node": "a", "Hostname": "b", "hostname": "c", "instance": "d"}, "a"),
        ({"Hostname": "b", "hostname": "c", "instance": "d"}, "b"),
        ({"hostname": "c", "instance": "d"}, "c"),
        ({"instance": "10.0.0.1:9400"}, "10.0.0.1:9400"),
        ({"node": "", "instance": "d"}, "d"),  # empty means absent, as in Prometheus
        ({}, DEFAULT_NODE),
    ],
)
def test_node_label_precedence(labels: dict[str, str], expected: str) -> None:
    assert node_of(labels) == expected


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"namespace": "ml", "pod": "job"}, ("ml", "job")),
        ({"namespace": "", "pod": ""}, None),
        # Scraped without honor_labels: the exporter's own pod is "pod", the workload's
        # "exported_pod".
        (
            {
                "namespace": "gpu-operator",
                "pod": "nvidia-dcgm-exporter-x",
                "exported_namespace": "ml",
                "exported_pod": "job",
            },
            ("ml", "job"),
        ),
        ({"pod_namespace": "ml", "pod_name": "job"}, ("ml", "job")),  # dcgm-exporter -o
        ({"pod": "job"}, ("", "job")),
    ],
)
def test_pod_label_precedence(labels: dict[str, str], expected: tuple[str, str] | None) -> None:
    assert pod_of(labels) == expected


def test_old_dcgm_label_names_are_read() -> None:
    # dcgm-exporter -o: uuid instead of UUID, pod_name/pod_namespace instead of pod/namespace.
    line = (
        'DCGM_FI_DEV_FB_USED{gpu="0",uuid="GPU-o",modelName="NVIDIA A100-SXM4-40GB",'
        'GPU_I_PROFILE="1g.5gb",GPU_I_ID="7",pod_namespace="ml",pod_name="p"} 100\n'
    )
    (slice_,) = iter_slice_series(parse_exposition(line, default_timestamp=T))
    assert slice_.info.key.gpu_uuid == "GPU-o"
    assert list(slice_.holders) == [("ml", "p")]
    assert slice_.memory_total_bytes == 4864 * MIB  # catalogue: no FB_FREE


# ---------------------------------------------------------------------------------------------
# Errors


def test_no_mig_series_errors_say_what_was_found() -> None:
    with pytest.raises(NoMigSeriesError, match="no MIG series found"):
        detect_dialect(parse_exposition("up 1\n", default_timestamp=T))
    with pytest.raises(NoMigSeriesError, match="no samples"):
        detect_dialect(parse_exposition("", default_timestamp=T))
    with pytest.raises(NoMigSeriesError, match="migscope series found, but no migscope_mig_info"):
        detect_dialect(parse_exposition('migscope_gpu_power_watts{gpu="0"} 90\n'))


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("up 1\nthis is not a sample\n", 2, "not valid Prometheus text format"),
        ('up 1\nup{a="b} 1\n', 2, "Prometheus text format"),
        ("up 1\nup 1 2 three\n", 2, "Prometheus text format"),
        ("up 1 1\n\nup 2 2\n# EOF\n", 2, "blank line"),
        ("up 1 1\n# EOF\nup 2 2\n# EOF\n", 3, "after # EOF"),
        ("# TYPE up gauge\nup 1 1\n# TYPE up gauge\n# EOF\n", 3, "OpenMetrics"),
        ('a{x="1"} 1 1\na{x="2"} 1 1\na{x="1"} 2 2\n# EOF\n', 3, "grouping"),
    ],
)
def test_garbage_is_one_line_with_file_and_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = tmp_path / "bad.prom"
    path.write_text(text)
    with pytest.raises(ExpositionError) as err:
        read_exposition(path, default_timestamp=T)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: ")
    assert fragment in message
    assert "\n" not in message
    assert err.value.line == line


def test_binary_and_missing_files(tmp_path: Path) -> None:
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"up 1\nup 2\n\xff\xfe\x00garbage\n")
    with pytest.raises(ExpositionError, match=r"blob\.bin:3: not UTF-8 text"):
        read_exposition(binary, default_timestamp=T)
    with pytest.raises(ExpositionError, match=r"nope\.txt: No such file"):
        read_exposition(tmp_path / "nope.txt")


# ---------------------------------------------------------------------------------------------
# Chunked parsing: bounded memory, same samples, same errors


def _history_openmetrics() -> str:
    lines = ["# HELP migscope_mig info A MIG slice.\n", "# TYPE migscope_mig info\n"]
    for gi in (1, 2):
        lines += [
            f'migscope_mig_info{{gpu="0",gpu_uuid="G",gpu_instance_id="{gi}",profile="1g.18gb"}}'
            f" 1 {T + 60 * m:.0f}\n"
            for m in range(1, 8)
        ]
    lines.append("# TYPE migscope_mig_energy_estimated_joules counter\n")
    for gi in (1, 2):
        lines += [
            f'migscope_mig_energy_estimated_joules_total{{gpu="0",gpu_uuid="G",'
            f'gpu_instance_id="{gi}"}} {10.0 * m} {T + 60 * m:.0f}\n'
            for m in range(1, 8)
        ]
    return "".join(lines) + "# EOF\n"


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 13, 10_000])
def test_chunked_parsing_gives_the_same_series(chunk: int) -> None:
    text = _history_openmetrics()
    whole = parse_exposition(text, chunk_size=10_000)
    parts = parse_exposition(text, chunk_size=chunk)
    assert parts.openmetrics
    assert parts.names == whole.names
    for name, group in whole.series.items():
        mine = {tuple(sorted(s.labels.items())): s.samples for s in parts.get(name)}
        assert len(mine) == len(group)
        for s in group:
            other = mine[tuple(sorted(s.labels.items()))]
            assert other.timestamps_ms.tolist() == s.samples.timestamps_ms.tolist()
            assert other.values.tolist() == s.samples.values.tolist()
    text_format = parse_exposition(DCGM_4GI.read_text(), default_timestamp=T, chunk_size=chunk)
    assert len(text_format.get("DCGM_FI_DEV_FB_USED")) == 4


def test_errors_in_later_chunks_keep_their_line_and_the_family_type() -> None:
    # The bad sample is on line 12, in the third chunk of five samples. It is an info sample
    # whose value is not 1: only an error because the chunk still knows "# TYPE ... info".
    text = _history_openmetrics().splitlines(keepends=True)
    assert text[11].startswith("migscope_mig_info")
    text[11] = text[11].replace("} 1 ", "} 2 ")
    with pytest.raises(ExpositionError, match=r"^x\.om:12: .*Info samples can only have value one"):
        parse_exposition("".join(text), source="x.om", chunk_size=5)


def test_openmetrics_end_rules_hold_with_chunks() -> None:
    text = _history_openmetrics() + "migscope_mig_info 1 1\n# EOF\n"
    with pytest.raises(ExpositionError, match="after # EOF"):
        parse_exposition(text, chunk_size=3)
