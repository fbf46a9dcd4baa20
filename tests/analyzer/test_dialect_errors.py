"""dcgm-exporter input that is real but not the textbook shape: read it, or say exactly why not.

Each case is derived from the real A100 captures in ``tests/fixtures/dcgm/`` by the edit a
real fleet makes:

- **GPU_I_ID only on other fields.** The profiling fields are missing on some GPU instances
  (dcgm-exporter #507), the framebuffer fields on H100 GIs (#380, #512), or the collectors
  file has neither; the clocks, temperatures and power are still there per instance. The
  slices must be found (from ``FB_FREE``, or from the clocks with no samples at all, which
  makes them ``unknown`` and pins their GPU) instead of "MIG is disabled".
- **Profiles the catalogue does not know** (``7g.79gb`` on an A100 80GB with R535) and the
  names it knows as aliases (``1g.24gb`` on GB200): the slice and its samples are kept.
- **Relabelled scrapes**: metric names lower-cased by ``metric_relabel_configs`` are read;
  a prefix is not guessed at, and the error names the families that were found; a dropped
  ``UUID`` label does not lose the slice.

Every case runs through the file reader (``read_openmetrics``, what ``--source`` uses) and,
as an hour of history, through a real Prometheus and a real VictoriaMetrics
(``remote_slice_stats``), which must agree with the embedded statistics.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.prometheus import (
    HistorySeries,
    ManagedServer,
    PrometheusServer,
    requires_prometheus,
    to_openmetrics,
)
from support.victoria import VictoriaServer, requires_victoria

from migscope.analyzer._intake.base import local_stats
from migscope.analyzer._intake.dialect import (
    MIB,
    NoMigSeriesError,
    closest_names,
    indexes,
    iter_slice_series,
    keeps,
)
from migscope.analyzer._intake.file import read_openmetrics
from migscope.analyzer._intake.openmetrics import parse_exposition
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.stats_local import RangeSemantics, SliceSeries, slice_stats
from migscope.analyzer._intake.stats_promql import remote_slice_stats
from migscope.analyzer._judge.classify import Status
from migscope.analyzer._model import SliceStats
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import render

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
CAPTURE = (FIXTURES / "dcgm-mig-a100-40gb-4gi-active.txt").read_text()  # GIs 5, 7, 8, 9
NO_GI = (FIXTURES / "dcgm-mig-a100-40gb-mig-enabled-no-gi.txt").read_text()
T = float((1_760_000_000 // 3600) * 3600)
HOUR = [T - 3600 + 60 * k for k in range(61)]

# ---------------------------------------------------------------------------------------------
# Editing a capture the way a fleet's configuration would

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?(\s.*)$")
_META = re.compile(r"^(# (?:HELP|TYPE) )([A-Za-z_:][A-Za-z0-9_:]*)(.*)$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')

Labels = dict[str, str]


def derive(
    text: str,
    *,
    name: Callable[[str], str] = lambda n: n,
    keep: Callable[[str, Labels], bool] = lambda n, labels: True,
    labels: Callable[[str, Labels], Labels] = lambda n, labels: labels,
) -> str:
    """The capture with names renamed, sample lines dropped and labels edited (by family)."""
    out = []
    for line in text.splitlines():
        if meta := _META.match(line):
            out.append(meta.group(1) + name(meta.group(2)) + meta.group(3))
            continue
        sample = _SAMPLE.match(line)
        if line.startswith("#") or sample is None:
            out.append(line)
            continue
        family, body, rest = sample.group(1), sample.group(2) or "", sample.group(3)
        found = dict(_LABEL.findall(body))
        if not keep(family, found):
            continue
        edited = labels(family, found)
        body = "{" + ",".join(f'{k}="{v}"' for k, v in edited.items()) + "}" if edited else ""
        out.append(name(family) + body + rest)
    return "\n".join(out)


def on_node(text: str, node: str) -> str:
    return derive(text, labels=lambda n, ls: {**ls, "Hostname": node} if "Hostname" in ls else ls)


def without(*families: str, gi: str | None = None) -> Callable[[str, Labels], bool]:
    """Drop the families (prefixes), or only their series of GPU instance ``gi``."""

    def keep(family: str, labels: Labels) -> bool:
        hit = family.upper().startswith(families)
        return not hit or (gi is not None and labels.get("GPU_I_ID") != gi)

    return keep


def no_gi_on(*families: str) -> Callable[[str, Labels], Labels]:
    """Take GPU_I_ID and GPU_I_PROFILE off the families' series."""

    def edit(family: str, labels: Labels) -> Labels:
        if family.upper().startswith(families):
            return {k: v for k, v in labels.items() if k not in ("GPU_I_ID", "GPU_I_PROFILE")}
        return labels

    return edit


def retag(model: str, profiles: dict[str, tuple[str, str]]) -> Callable[[str, Labels], Labels]:
    """Another GPU model, and GPU instances re-numbered/re-profiled: ``{old id: (id, profile)}``."""

    def edit(family: str, labels: Labels) -> Labels:
        out = {**labels, "modelName": model} if "modelName" in labels else dict(labels)
        if labels.get("GPU_I_ID") in profiles:
            out["GPU_I_ID"], out["GPU_I_PROFILE"] = profiles[labels["GPU_I_ID"]]
        return out

    return edit


FB_AND_PROF = ("DCGM_FI_PROF_", "DCGM_FI_DEV_FB_")
VARIANTS: dict[str, str] = {
    "full": CAPTURE,
    # The profiling fields absent, FB_USED too: FB_FREE and the clocks carry GPU_I_ID.
    "fb-free-only": derive(CAPTURE, keep=without("DCGM_FI_PROF_", "DCGM_FI_DEV_FB_USED")),
    # GR_ENGINE_ACTIVE only per GPU (no GPU_I_ID), no framebuffer fields at all.
    "clocks-only": derive(
        CAPTURE,
        keep=without("DCGM_FI_DEV_FB_"),
        labels=no_gi_on("DCGM_FI_PROF_"),
    ),
    # dcgm-exporter #507 and #380 on one instance: GI 7 has neither profiling nor FB fields.
    "gi7-bare": derive(CAPTURE, keep=without(*FB_AND_PROF, gi="7")),
    # An A100 80GB on R535 reports its full-GPU profile as 7g.79gb (#713), not 7g.80gb.
    "a100-80-7g79": derive(
        CAPTURE,
        keep=lambda n, ls: ls.get("GPU_I_ID") == "5",
        labels=retag("NVIDIA A100-SXM4-80GB", {"5": ("0", "7g.79gb")}),
    ),
    # GB200 drivers name the 1g profile 1g.24gb; the catalogue has it as an alias of 1g.23gb.
    "gb200": derive(
        CAPTURE,
        labels=retag(
            "NVIDIA GB200",
            {g: (g, "1g.24gb") for g in ("7", "8", "9")} | {"5": ("5", "2g.47gb")},
        ),
    ),
    # metric_relabel_configs: labeldrop UUID (as some dashboards' docs suggest).
    "no-uuid": derive(CAPTURE, labels=lambda n, ls: {k: v for k, v in ls.items() if k != "UUID"}),
    # metric_relabel_configs lower-casing every name.
    "lower": derive(CAPTURE, name=str.lower),
}


def write(tmp_path: Path, text: str) -> Path:
    """The text as a saved scrape whose time (the file's, as for a real one) is ``T``."""
    path = tmp_path / "scrape.txt"
    path.write_text(text)
    os.utime(path, (T, T))
    return path


def read(tmp_path: Path, text: str) -> tuple[list[SliceSeries], tuple[str, ...]]:
    source = read_openmetrics(write(tmp_path, text))
    return list(source.series), source.notes


def by_gi(slices: list[SliceSeries]) -> dict[int, SliceSeries]:
    return {s.info.key.gpu_instance_id: s for s in slices}


def analysed(slices: list[SliceSeries]) -> dict[int, Status]:
    window = (T - 60, T)
    result = analyze(
        local_stats(slices, window, 60), window=window, options=AnalyzeOptions(step_s=60)
    )
    return {r.stats.info.key.gpu_instance_id: r.status for r in result.slices}


# ---------------------------------------------------------------------------------------------
# B.1: GPU_I_ID on other fields


def test_gpu_instances_known_from_fb_free_and_clocks_are_mig_slices(tmp_path: Path) -> None:
    slices = by_gi(read(tmp_path, VARIANTS["fb-free-only"])[0])
    assert sorted(slices) == [5, 7, 8, 9]
    assert slices[5].info.profile == "2g.10gb"
    for s in slices.values():
        assert s.activity is None  # activity unknown, not 0
        assert s.memory_used is None  # FB_FREE alone does not say what is used
        assert s.info.model == "A100-40GB"
    assert slices[8].memory_total_bytes == 4864 * MIB  # the catalogue's 1g.5gb
    assert set(analysed(list(slices.values())).values()) == {Status.UNKNOWN}


def test_gpu_instances_known_from_the_clocks_alone_are_kept_without_samples(
    tmp_path: Path,
) -> None:
    slices, notes = read(tmp_path, VARIANTS["clocks-only"])
    assert sorted(by_gi(slices)) == [5, 7, 8, 9]
    for s in slices:
        assert s.activity is None
        assert s.memory_used is None
        assert dict(s.holders) == {}
    assert [s.info.profile for s in slices] == ["2g.10gb", "1g.5gb", "1g.5gb", "1g.5gb"]
    (note,) = notes
    assert "4 GPU instance(s) appear only in DCGM_FI_DEV_SM_CLOCK" in note
    assert set(analysed(slices).values()) == {Status.UNKNOWN}


def test_an_instance_missing_from_profiling_and_framebuffer_keeps_its_place(
    tmp_path: Path,
) -> None:
    slices, notes = read(tmp_path, VARIANTS["gi7-bare"])
    found = by_gi(slices)
    assert sorted(found) == [5, 7, 8, 9]
    assert found[7].activity is None
    assert found[7].memory_used is None
    assert found[8].activity is not None
    assert found[8].activity.values.tolist() == [0.408493]
    assert "1 GPU instance(s) appear only in DCGM_FI_DEV_SM_CLOCK" in notes[0]
    assert analysed(slices)[7] is Status.UNKNOWN  # unknown pins its GPU: its place is not free


def test_no_gpu_instance_anywhere_says_so_and_names_the_families(tmp_path: Path) -> None:
    with pytest.raises(NoMigSeriesError) as err:
        read_openmetrics(write(tmp_path, NO_GI))
    message = str(err.value)
    assert "none has a GPU_I_ID label" in message
    assert "14 families: DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_GPU_TEMP" in message
    assert "MIG disabled, or enabled with no GPU instance created" in message
    assert "\n" not in message


def test_instances_whose_gpu_index_is_unreadable_are_noted(tmp_path: Path) -> None:
    text = derive(
        CAPTURE,
        labels=lambda n, ls: {**ls, "gpu": "x"} if ls.get("GPU_I_ID") == "7" else ls,
    )
    slices, notes = read(tmp_path, text)
    assert sorted(by_gi(slices)) == [5, 8, 9]
    assert "no numeric gpu or GPU_I_ID label were left out" in notes[0]
    assert "1 in DCGM_FI_DEV_FB_FREE, 1 in DCGM_FI_DEV_FB_USED" in notes[0]


# ---------------------------------------------------------------------------------------------
# B.2: profiles the catalogue does not know


def test_an_uncatalogued_profile_keeps_the_slice_and_says_why_in_markdown(
    tmp_path: Path,
) -> None:
    (slice_,) = read(tmp_path, VARIANTS["a100-80-7g79"])[0]
    assert slice_.info.profile == "7g.79gb"
    assert slice_.info.model == "A100-80GB"
    assert slice_.activity is not None
    assert slice_.activity.values.tolist() == [0.0]
    assert slice_.memory_total_bytes == (13 + 9843) * MIB  # measured: the catalogue has no size
    window = (T - 60, T)
    result = analyze(
        local_stats([slice_], window, 60), window=window, options=AnalyzeOptions(step_s=60)
    )
    assert [(r.stats.info.profile, r.current) for r in result.slices] == [("7g.79gb", True)]
    assert result.slices[0].stats.samples == 1
    markdown = render(result, "md")
    assert "7g.79gb" in markdown.split("## Notes", 1)[1]  # the reason is printed, not only JSON


def test_a_profile_alias_is_planned_like_its_catalogue_name(tmp_path: Path) -> None:
    slices = by_gi(read(tmp_path, VARIANTS["gb200"])[0])
    assert sorted(slices) == [5, 7, 8, 9]
    assert {s.info.model for s in slices.values()} == {"GB200-186GB"}
    assert slices[8].info.profile == "1g.24gb"
    window = (T - 60, T)
    result = analyze(
        local_stats(slices.values(), window, 60), window=window, options=AnalyzeOptions(step_s=60)
    )
    assert len(result.slices) == 4
    assert not [n for n in result.notes if "not in the catalogue" in n]


def test_a_dropped_uuid_label_does_not_lose_the_slices(tmp_path: Path) -> None:
    slices = by_gi(read(tmp_path, VARIANTS["no-uuid"])[0])
    assert sorted(slices) == [5, 7, 8, 9]
    assert {s.info.key.gpu_uuid for s in slices.values()} == {""}
    assert slices[8].activity is not None
    assert slices[8].activity.values.tolist() == [0.408493]


# ---------------------------------------------------------------------------------------------
# B.3: relabelled names


def test_lower_case_names_read_as_the_originals(tmp_path: Path) -> None:
    lower = by_gi(read(tmp_path, VARIANTS["lower"])[0])
    original = by_gi(read(tmp_path, CAPTURE)[0])
    assert sorted(lower) == sorted(original) == [5, 7, 8, 9]
    for gi, s in lower.items():
        assert s.info == original[gi].info
        assert s.activity is not None
        assert original[gi].activity is not None
        assert s.activity.values.tolist() == original[gi].activity.values.tolist()  # type: ignore[union-attr]
        assert s.memory_total_bytes == original[gi].memory_total_bytes


def test_prefixed_names_are_named_in_the_error(tmp_path: Path) -> None:
    prefixed = derive(CAPTURE, name=lambda n: "gpu_" + n)
    with pytest.raises(NoMigSeriesError) as err:
        read_openmetrics(write(tmp_path, prefixed))
    message = str(err.value)
    assert "no MIG series found" in message
    assert "gpu_DCGM_FI_DEV_FB_USED" in message
    assert "gpu_DCGM_FI_PROF_GR_ENGINE_ACTIVE" in message
    assert "renamed by relabelling?" in message


def test_closest_names_put_containing_names_first() -> None:
    names = [
        "up",
        "node_load1",
        "x_dcgm_fi_dev_fb_used",
        "DCGM_FI_DEV_FB_USEDX",
        "migscope_mig_inf",
    ]
    assert closest_names(names) == [
        "DCGM_FI_DEV_FB_USEDX",
        "x_dcgm_fi_dev_fb_used",
        "migscope_mig_inf",
    ]
    assert closest_names(["up", "node_load1"]) == []


# ---------------------------------------------------------------------------------------------
# The same through real PromQL engines: every variant on its own node, as an hour of history


def _history(text: str, node: str, points: list[float] = HOUR) -> list[HistorySeries]:
    series = parse_exposition(on_node(text, node), default_timestamp=T)
    return [
        HistorySeries(s.name, s.labels, [(t, float(s.samples.values[0])) for t in points])
        for group in series.series.values()
        for s in group
    ]


def _combined() -> list[HistorySeries]:
    out: list[HistorySeries] = []
    for node, text in VARIANTS.items():
        out += _history(text, node)
    # A lower-casing relabel rolled out half way, the two spellings overlapping two scrapes.
    first, second = HOUR[:32], HOUR[30:]
    out += _history(CAPTURE, "mixed", first) + _history(VARIANTS["lower"], "mixed", second)
    return out


COMBINED = _combined()


def _embedded(semantics: RangeSemantics) -> list[SliceStats]:
    series = parse_exposition(to_openmetrics(COMBINED), keep=keeps, index=indexes)
    return [
        slice_stats(s, start=T - 3600, end=T, step=60, semantics=semantics)
        for s in iter_slice_series(series)
    ]


ENGINES = [
    pytest.param("prometheus", marks=requires_prometheus),
    pytest.param("victoria", marks=requires_victoria),
]


def _server(engine: str, history: list[HistorySeries]) -> ManagedServer:
    return PrometheusServer(history) if engine == "prometheus" else VictoriaServer(history)


@pytest.fixture(scope="module", params=ENGINES)
def remote(request: pytest.FixtureRequest) -> Iterator[tuple[list[SliceStats], list[str], str]]:
    semantics: RangeSemantics = (
        "prometheus2" if request.param == "prometheus" else "victoriametrics"
    )
    with (
        _server(request.param, COMBINED) as server,
        PrometheusClient(server.url, retries=0, trust_env=False) as client,
    ):
        run = remote_slice_stats(client, start=T - 3600, end=T, step=60)
        stats = list(run)
        yield stats, run.notes, semantics


def _by_node(stats: list[SliceStats]) -> dict[str, dict[int, SliceStats]]:
    out: dict[str, dict[int, SliceStats]] = {}
    for s in stats:
        out.setdefault(s.key.node, {})[s.key.gpu_instance_id] = s
    return out


def test_every_variant_reads_the_same_through_the_server(
    remote: tuple[list[SliceStats], list[str], str],
) -> None:
    stats, _, semantics = remote
    embedded = _embedded(semantics)  # type: ignore[arg-type]
    assert [(s.info, s.samples) for s in stats] == [(s.info, s.samples) for s in embedded]
    for got, want in zip(stats, embedded, strict=True):
        for name in ("coverage", "activity_p95", "activity_max", "memory_peak_bytes"):
            a, b = getattr(got, name), getattr(want, name)
            assert (a is None and b is None) or math.isclose(a, b), (got.key, name, a, b)
        assert got.memory_total_bytes == want.memory_total_bytes, got.key


def test_the_server_finds_what_the_file_reader_finds(
    remote: tuple[list[SliceStats], list[str], str],
) -> None:
    stats, notes, _ = remote
    nodes = _by_node(stats)
    full = nodes["full"]
    assert sorted(full) == [5, 7, 8, 9]
    assert full[8].activity_p95 == pytest.approx(0.408493)
    for node in ("lower", "mixed"):  # any letter case, and both while a relabel rolls out
        assert {gi: (s.activity_p95, s.memory_peak_bytes) for gi, s in nodes[node].items()} == {
            gi: (s.activity_p95, s.memory_peak_bytes) for gi, s in full.items()
        }
        assert nodes[node][8].coverage == 1.0
    fb_free = nodes["fb-free-only"]
    assert sorted(fb_free) == [5, 7, 8, 9]
    assert {s.activity_p95 for s in fb_free.values()} == {None}
    assert sorted(nodes["clocks-only"]) == [5, 7, 8, 9]
    assert {s.samples for s in nodes["clocks-only"].values()} == {0}
    bare = nodes["gi7-bare"]
    assert sorted(bare) == [5, 7, 8, 9]
    assert bare[7].samples == 0
    assert bare[8].samples == full[8].samples > 0
    (uncatalogued,) = nodes["a100-80-7g79"].values()
    assert (uncatalogued.info.profile, uncatalogued.info.model) == ("7g.79gb", "A100-80GB")
    assert uncatalogued.samples == full[5].samples
    assert nodes["gb200"][8].info.profile == "1g.24gb"
    assert {s.key.gpu_uuid for s in nodes["no-uuid"].values()} == {""}
    assert sorted(nodes["no-uuid"]) == [5, 7, 8, 9]
    assert any("5 GPU instance(s) appear only in DCGM_FI_DEV_SM_CLOCK" in n for n in notes)


@pytest.mark.parametrize("engine", ENGINES)
def test_no_gpu_instance_on_the_server_names_the_families(engine: str) -> None:
    with (
        _server(engine, _history(NO_GI, "n")) as server,
        PrometheusClient(server.url, retries=0, trust_env=False) as client,
        pytest.raises(NoMigSeriesError) as err,
    ):
        remote_slice_stats(client, start=T - 3600, end=T, step=60)
    assert "none has a GPU_I_ID label" in str(err.value)
    assert "14 families: DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_GPU_TEMP" in str(err.value)


@pytest.mark.parametrize("engine", ENGINES)
def test_prefixed_names_on_the_server_are_named_in_the_error(engine: str) -> None:
    prefixed = derive(CAPTURE, name=lambda n: "gpu_" + n)
    with (
        _server(engine, _history(prefixed, "n")) as server,
        PrometheusClient(server.url, retries=0, trust_env=False) as client,
        pytest.raises(NoMigSeriesError) as err,
    ):
        remote_slice_stats(client, start=T - 3600, end=T, step=60)
    assert "gpu_DCGM_FI_PROF_GR_ENGINE_ACTIVE" in str(err.value)
    assert "renamed by relabelling?" in str(err.value)
