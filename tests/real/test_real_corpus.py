"""Every real public capture in tests/fixtures/real/ runs through migscope.

The files are verbatim copies of what other people's GPUs and exporters printed (provenance in
each file's ``# `` header and in tests/fixtures/real/README.md). Three kinds:

- dcgm-exporter scrapes go through ``migscope analyze --source FILE -o json``. A single scrape
  is a snapshot: it must give a report (or one clear line of error, never a traceback), every
  slice that has samples must be classified, and no change may be recommended from it.
- nvidia-smi outputs are parsed with ``migscope.core._nvidia_smi`` and compared field by field
  with the catalogue.
- mig-parted configs are parsed and checked with ``migscope.core._migparted``.

Where real data and migscope disagree the test is marked ``xfail`` with the exact difference in
its reason; nothing in the catalogue is adjusted here (issue 13 owns the catalogue). The marks
are strict: when the catalogue is fixed the test passes, pytest reports it, and the mark goes.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from migscope.analyzer._intake.openmetrics import parse_exposition
from migscope.analyzer._report import validate_report
from migscope.cli.main import cli
from migscope.core._catalogue import find_model, model_for_name, model_for_pci
from migscope.core._drivers import DriverVersion
from migscope.core._gpu_models.gpu_model import CatalogueError, GpuModel
from migscope.core._layout import is_valid
from migscope.core._migparted import check_config, parse_config, read_config_sources
from migscope.core._nvidia_smi import (
    ListedDevice,
    ListedGpuInstance,
    ListedPlacements,
    ListedProfile,
    parse_lgi,
    parse_lgip,
    parse_lgipp,
    parse_list,
)
from migscope.core._profile_table import identify_model, tables_from_nvidia_smi

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = FIXTURES / "real"
HEADER_FIELDS = ("source", "what", "gpu", "driver", "date", "licence", "edits")
# A header line like these would be exposition metadata, not a comment, to a scrape's parser.
_EXPOSITION_METADATA = ("# HELP ", "# TYPE ", "# UNIT ", "# EOF")


def _xfail(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=reason)


# ---------------------------------------------------------------------------------------------
# Manifest: every file under tests/fixtures/real/ is listed here, with what it must give.


@dataclass(frozen=True)
class Scrape:
    """A dcgm-exporter capture and what ``migscope analyze`` must make of it."""

    path: Path
    model: str | None = None  # catalogue key the slices belong to
    error: str | None = None  # regex of the one-line error expected instead of a report
    marks: dict[str, str] = field(default_factory=dict)  # test name -> xfail reason

    @property
    def id(self) -> str:
        return self.path.name


SCRAPES = [
    Scrape(
        REAL / "dcgm-exporter" / "nvidia-docs-a100-1g.5gb-gi13.txt",
        model="A100-40GB",
        marks={
            "test_scrape_slices_name_a_catalogued_model": (
                "migscope resolves a dcgm-exporter GPU only from its modelName label; this "
                "real capture (dcgm-exporter 2.x, NVIDIA docs) has none, so slice GI 13 "
                "reports model null although its profile 1g.5gb exists only on A100-40GB"
            ),
        },
    ),
    Scrape(REAL / "dcgm-exporter" / "johng-a800-sxm4-80gb-3x2g.20gb-excerpt.txt", "A100-80GB"),
    Scrape(
        REAL / "dcgm-exporter" / "johng-a800-sxm4-80gb-vgpu-error-values.txt",
        error=("johng-a800-sxm4-80gb-vgpu-error-values.txt:12: not valid Prometheus text format"),
    ),
    Scrape(
        REAL / "dcgm-exporter" / "princeton-a100-80gb-pcie-1g.10gb-single-series.txt",
        "A100-80GB",
    ),
    Scrape(
        REAL / "dcgm-exporter" / "cncf-kops-l4-default-counters.txt",
        # an L4 has no MIG: a complete scrape, but no GPU instance to analyse
        error=r"none has a GPU_I_ID label",
    ),
    # Real captures already in the repository (run-ai/fake-gpu-operator), referenced, not copied.
    Scrape(FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-3gi-active.txt", "A100-40GB"),
    Scrape(FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-4gi-active.txt", "A100-40GB"),
    Scrape(
        FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-mig-enabled-no-gi.txt",
        # the wording changed while issue 10 was being fixed; either says what is missing
        error=r"no MIG series found|none has a GPU_I_ID label",
    ),
]


@dataclass(frozen=True)
class SmiOutput:
    """An nvidia-smi output and the catalogue model it comes from (None: not catalogued)."""

    path: Path
    model: str | None
    driver: int | None = None  # driver branch, when the source states it
    marks: dict[str, str] = field(default_factory=dict)  # test name -> xfail reason

    @property
    def id(self) -> str:
        return self.path.name


SMI = REAL / "nvidia-smi"
SMI_OUTPUTS = [
    SmiOutput(SMI / "nvidia-docs-a100-pcie-40gb-lgi-7x1g.5gb.txt", "A100-40GB", 460),
    SmiOutput(SMI / "opennebula-h100-nvl-lgip.txt", "H100-NVL-94GB"),
    SmiOutput(SMI / "opennebula-h100-nvl-lgi-L.txt", "H100-NVL-94GB"),
    # driver 560.35.03 reports 10.75/21.62/46.38/93.12 GiB, the catalogue's R560 memory facts
    SmiOutput(SMI / "azure-h100-nvl-lgip-driver560.txt", "H100-NVL-94GB", 560),
    SmiOutput(SMI / "azure-h100-nvl-lgipp-driver560.txt", "H100-NVL-94GB", 560),
    SmiOutput(SMI / "johng-h20-L-3gpus-mig.txt", "H20-96GB", 570),
    SmiOutput(SMI / "johng-h20-lgip-8gpus.txt", "H20-96GB"),
    # RTX PRO 6000: the driver places on a 12-unit grid ({0,3,6,9}:3, {0,6}:6, {0}:12), three
    # units per memory slice (GpuModel.placement_unit), which the comparisons convert.
    SmiOutput(SMI / "kubesimplify-rtx-pro-6000-lgip.txt", "RTX-PRO-6000-96GB", 610),
    SmiOutput(SMI / "kubesimplify-rtx-pro-6000-lgipp.txt", "RTX-PRO-6000-96GB", 610),
    SmiOutput(SMI / "kubesimplify-rtx-pro-6000-lgi-mixed.txt", "RTX-PRO-6000-96GB", 610),
    SmiOutput(SMI / "kubesimplify-rtx-pro-6000-lgi-4x1g.24gb.txt", "RTX-PRO-6000-96GB", 610),
    SmiOutput(SMI / "kubesimplify-rtx-pro-6000-L.txt", "RTX-PRO-6000-96GB", 610),
    # R580 prints 7g.40gb at 39.38 GiB (R460: 39.50): the catalogue's per-driver memory facts
    SmiOutput(SMI / "ssup2-a100-sxm4-40gb-lgip-driver580.txt", "A100-40GB", 580),
]


@dataclass(frozen=True)
class MigPartedFile:
    """A real mig-parted config, bare or inside Kubernetes manifests (ConfigMap data)."""

    path: Path
    marks: dict[str, str] = field(default_factory=dict)  # test name -> xfail reason

    @property
    def id(self) -> str:
        return self.path.name


MIG_PARTED = REAL / "mig-parted"
MIG_PARTED_FILES = [
    MigPartedFile(MIG_PARTED / "mig-parted-examples-config.txt"),
    MigPartedFile(MIG_PARTED / "mig-parted-dgx-station-80gb-config.txt"),
    # the unfiltered all-1g.10gb ('1g.10gb': 7) fits the 80GB models its name points to, not
    # A100-40GB (where 1g.10gb is the 2-slice profile): said per model, no error (issue 25)
    MigPartedFile(MIG_PARTED / "mig-manager-example-hopper-blackwell.txt"),
    # all-balanced entry 9 filters 0x232910DE (H20): catalogued as H20-96GB since issue 13
    MigPartedFile(MIG_PARTED / "gpu-operator-default-mig-parted-config.txt"),
    MigPartedFile(MIG_PARTED / "mmahdisetak-custom-mig-config-pcie-nvl.txt"),
]


def _params(items: Iterable[Any], test: str) -> list[Any]:
    """``pytest.param`` per manifest entry, with the entry's xfail mark for ``test``."""
    out = []
    for item in items:
        reason = item.marks.get(test)
        marks = [_xfail(reason)] if reason else []
        out.append(pytest.param(item, id=item.id, marks=marks))
    return out


# ---------------------------------------------------------------------------------------------
# The corpus itself


def test_every_real_file_is_in_the_manifest() -> None:
    """No file is skipped silently: each one under real/ has a manifest entry, and vice versa."""
    paths = [e.path for e in SCRAPES] + [e.path for e in SMI_OUTPUTS]
    paths += [e.path for e in MIG_PARTED_FILES]
    assert set(REAL.rglob("*.txt")) == {p for p in paths if REAL in p.parents}
    for path in paths:
        assert path.is_file(), path


@pytest.mark.parametrize("path", sorted(REAL.rglob("*.txt")), ids=lambda p: p.name)
def test_every_real_file_names_its_provenance(path: Path) -> None:
    """Each file opens with ``# field: ...`` lines giving source, GPU, driver, date, licence."""
    header = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("# ") or line.startswith(_EXPOSITION_METADATA):
            break
        header.append(line)
    fields = {m.group(1) for line in header if (m := re.match(r"# (\w[\w-]*): ", line))}
    assert set(HEADER_FIELDS) <= fields, f"{path.name}: header lacks {set(HEADER_FIELDS) - fields}"
    assert re.search(r"https?://", header[0]), f"{path.name}: first line must be the source URL"


def test_readme_lists_every_file() -> None:
    readme = (REAL / "README.md").read_text(encoding="utf-8")
    for path in REAL.rglob("*.txt"):
        assert path.name in readme, f"README.md does not list {path.name}"


# ---------------------------------------------------------------------------------------------
# dcgm-exporter scrapes through `migscope analyze`


@dataclass(frozen=True)
class _Run:
    code: int
    stdout: str
    stderr: str
    exception: BaseException | None


@functools.cache
def _analyze(path: Path) -> _Run:
    result = CliRunner().invoke(cli, ["analyze", "--source", str(path), "-o", "json"])
    return _Run(result.exit_code, result.stdout, result.stderr, result.exception)


def _report(scrape: Scrape) -> dict[str, Any]:
    run = _analyze(scrape.path)
    assert run.code == 0, run.stderr
    data: dict[str, Any] = json.loads(run.stdout)
    return data


_SLICE_METRICS = ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED")


def _sampled_instances(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """(gpu, GPU_I_ID) of every GI with an activity or memory sample -> that series' labels."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    series_set = parse_exposition(path.read_text(encoding="utf-8"), keep=_SLICE_METRICS)
    for name in _SLICE_METRICS:
        for series in series_set.get(name):
            gi = series.labels.get("GPU_I_ID")
            if gi and len(series.samples):
                found.setdefault((series.labels.get("gpu", ""), gi), dict(series.labels))
    return found


def _slices(data: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(str(s["gpu"]), str(s["gpu_instance_id"])): s for s in data["slices"]}


@pytest.mark.parametrize("scrape", _params(SCRAPES, "test_scrape_gives_a_report_or_one_line"))
def test_scrape_gives_a_report_or_one_line(scrape: Scrape) -> None:
    """A valid report, or exactly one ``migscope: error:`` line; never a traceback."""
    run = _analyze(scrape.path)
    assert run.exception is None or isinstance(run.exception, SystemExit), repr(run.exception)
    for text in (run.stdout, run.stderr):
        assert "Traceback" not in text
        assert "internal error" not in text
    if scrape.error is None:
        assert run.code == 0, run.stderr
        validate_report(json.loads(run.stdout))
    else:
        assert run.code == 1
        assert run.stdout == ""
        assert run.stderr.count("\n") == 1, run.stderr
        assert run.stderr.startswith("migscope: error: ")
        assert re.search(scrape.error, run.stderr), run.stderr


REPORTED = [s for s in SCRAPES if s.error is None]


@pytest.mark.parametrize("scrape", _params(REPORTED, "test_scrape_reports_every_instance"))
def test_scrape_reports_every_instance(scrape: Scrape) -> None:
    """Every GPU instance with samples in the scrape is a slice of the report."""
    wanted = _sampled_instances(scrape.path)
    assert wanted, "the manifest lists this scrape as a MIG scrape"
    assert set(wanted) <= set(_slices(_report(scrape)))


@pytest.mark.parametrize("scrape", [pytest.param(s, id=s.id) for s in REPORTED])
def test_scrape_classifies_every_sampled_slice(scrape: Scrape) -> None:
    """A snapshot is enough to classify: no ``unknown`` where the scrape has samples."""
    slices = _slices(_report(scrape))
    for key in _sampled_instances(scrape.path):
        verdict = slices[key]
        assert verdict["status"] != "unknown", (key, verdict["reason"])
        assert verdict["evidence"]["samples"] >= 1, key


@pytest.mark.parametrize("scrape", [pytest.param(s, id=s.id) for s in REPORTED])
def test_scrape_recommends_nothing(scrape: Scrape) -> None:
    """One scrape is less than the policy's minimum history: no plan, no config to apply."""
    data = _report(scrape)
    assert data["recommendations"] == []
    assert data["savings"]["gpus_changed"] == 0


@pytest.mark.parametrize("scrape", _params(REPORTED, "test_scrape_never_changes_a_gpu_a_pod_holds"))
def test_scrape_never_changes_a_gpu_a_pod_holds(scrape: Scrape) -> None:
    """Whatever is planned, a GPU with a slice held by a pod (per the scrape) is not touched.

    No capture in the corpus carries a non-empty pod label yet (the public ones that do are
    pasted in GitHub issues), so today this guards the rule for the next capture added.
    """
    data = _report(scrape)
    held = {
        (s["node"], str(s["gpu"]))
        for s in data["slices"]
        if s["pod"] or s["evidence"]["allocated_fraction"] > 0
    }
    for (gpu, _gi), labels in _sampled_instances(scrape.path).items():
        if labels.get("exported_pod") or labels.get("pod"):
            node = labels.get("node") or labels.get("Hostname") or labels.get("hostname")
            held.add((node or labels.get("instance", ""), gpu))
    for rec in data["recommendations"]:
        for gpu in rec["gpus"]:
            if gpu["changed"]:
                assert (gpu["node"], str(gpu["gpu"])) not in held, gpu


@pytest.mark.parametrize("scrape", _params(REPORTED, "test_scrape_attributes_pods_as_labelled"))
def test_scrape_attributes_pods_as_labelled(scrape: Scrape) -> None:
    """A slice names the pod its series name (``exported_pod`` first); empty means none."""
    slices = _slices(_report(scrape))
    for key, labels in _sampled_instances(scrape.path).items():
        pod = labels.get("exported_pod") or labels.get("pod") or None
        assert slices[key]["pod"] == pod, key


@pytest.mark.parametrize("scrape", _params(REPORTED, "test_scrape_slices_name_a_catalogued_model"))
def test_scrape_slices_name_a_catalogued_model(scrape: Scrape) -> None:
    """Each slice is attributed to the catalogue model of its GPU, with a catalogued profile."""
    for verdict in _report(scrape)["slices"]:
        assert verdict["model"] == scrape.model, verdict["gpu_instance_id"]
        assert find_model(scrape.model or "").has_profile(verdict["profile"])


# ---------------------------------------------------------------------------------------------
# nvidia-smi outputs against the catalogue


def _gib(mib: int) -> float:
    """MiB as ``-lgip`` prints GiB: two decimals, rounded like printf("%.2f")."""
    return float(f"{mib / 1024:.2f}")


def _driver(branch: int | None) -> DriverVersion | None:
    return None if branch is None else DriverVersion((branch,))


def lgip_differences(
    model: GpuModel, rows: list[ListedProfile], driver: int | None = None
) -> list[str]:
    """Every way the ``-lgip`` rows and the catalogue (on ``driver``) disagree, one per line."""
    out = []
    for row in rows:
        if not model.has_profile(row.name):
            out.append(f"{row.name} (id {row.profile_id}): no such profile in the catalogue")
            continue
        profile = model.profile(row.name)
        if profile.name != row.name:
            out.append(f"{row.name}: catalogue names it {profile.name}")
        pairs = {
            "id": (profile.nvml_id, row.profile_id),
            "instances": (profile.max_instances, row.total),
            "SMs": (profile.sm_count, row.sm_count),
            "GiB": (_gib(profile.memory_mib_on(_driver(driver))), row.memory_gib),
            "DEC": (profile.decoders, row.decoders),
            "ENC": (profile.encoders, row.encoders),
            "CE": (profile.copy_engines, row.copy_engines),
            "JPEG": (profile.jpegs, row.jpegs),
            "OFA": (profile.ofas, row.ofas),
        }
        out.extend(
            f"{row.name} {what}: catalogue {ours}, real {theirs}"
            for what, (ours, theirs) in pairs.items()
            if ours != theirs
        )
    return out


def _in_slices(model: GpuModel, start: int, size: int) -> tuple[int, int] | None:
    """A driver's ``start:size`` in the model's memory slices, or None off its grid."""
    try:
        return model.slices_from_nvml(start, size)
    except CatalogueError:
        return None


def lgipp_differences(model: GpuModel, rows: list[ListedPlacements]) -> list[str]:
    out = []
    for row in rows:
        profile = model.profile_by_nvml_id(row.profile_id)
        if profile is None:
            out.append(f"id {row.profile_id}: no catalogued profile has this NVML id")
            continue
        spans = [_in_slices(model, start, row.size) for start in row.starts]
        starts = tuple(span[0] for span in spans if span is not None)
        sizes = {span[1] for span in spans if span is not None}
        if (
            len(starts) != len(row.starts)
            or profile.placements != starts
            or sizes != {profile.memory_slices}
        ):
            out.append(
                f"{profile.name} (id {row.profile_id}): catalogue {profile.placements}:"
                f"{profile.memory_slices} memory slices, real {row.starts}:{row.size} in units "
                f"of 1/{model.placement_unit} slice"
            )
    return out


def lgi_differences(model: GpuModel, rows: list[ListedGpuInstance]) -> list[str]:
    out = []
    for row in rows:
        if not model.has_profile(row.name):
            out.append(f"GI {row.instance_id} {row.name}: no such profile in the catalogue")
            continue
        profile = model.profile(row.name)
        if profile.nvml_id != row.profile_id:
            out.append(f"GI {row.instance_id} {row.name}: id {profile.nvml_id} vs {row.profile_id}")
        span = _in_slices(model, row.start, row.size)
        if span is None or span[0] not in profile.placements or span[1] != profile.memory_slices:
            out.append(
                f"GI {row.instance_id} {row.name} at {row.start}:{row.size}: catalogue starts "
                f"{profile.placements}, size {profile.memory_slices} (memory slices of "
                f"{model.placement_unit} driver units)"
            )
    if not out:
        keep = [(r.name, model.slices_from_nvml(r.start, r.size)[0]) for r in rows]
        check = is_valid(model, [r.name for r in rows], keep=keep)
        if not check.ok:
            out.append(f"layout as placed is invalid: {check.reason}")
    return out


def list_differences(expected: str | None, devices: list[ListedDevice]) -> list[str]:
    out = []
    for device in devices:
        model = model_for_name(device.name)
        if model is None:
            out.append(f"GPU {device.index}: {device.name!r} is not a catalogued name")
            continue
        if model.key != expected:
            out.append(f"GPU {device.index}: {device.name!r} resolves to {model.key}")
        layout = [name for name, _uuid in device.mig_devices]
        if layout and not (check := is_valid(model, layout)).ok:
            out.append(f"GPU {device.index}: {check.reason}")
    return out


def _smi(test: str, parse: Any) -> list[Any]:
    return _params([o for o in SMI_OUTPUTS if parse(o.path.read_text(encoding="utf-8"))], test)


def test_every_nvidia_smi_file_parses() -> None:
    """Each output gives rows to at least one parser (none is silently unreadable)."""
    for output in SMI_OUTPUTS:
        text = output.path.read_text(encoding="utf-8")
        assert any(p(text) for p in (parse_lgip, parse_lgipp, parse_lgi, parse_list)), output.id


@pytest.mark.parametrize("output", _smi("test_lgip_matches_catalogue", parse_lgip))
def test_lgip_matches_catalogue(output: SmiOutput) -> None:
    assert output.model is not None
    model = find_model(output.model)
    rows = parse_lgip(output.path.read_text(encoding="utf-8"))
    assert lgip_differences(model, rows, output.driver) == []
    listed = {row.name for row in rows}
    for profile in model.profiles:  # what the catalogue offers on this driver, the driver lists
        introduced = int(profile.min_driver) if profile.min_driver else 0
        if output.driver is None and introduced:
            continue
        if introduced <= (output.driver or 0):
            assert profile.name in listed, f"catalogue offers {profile.name}, driver does not"


@pytest.mark.parametrize("output", _smi("test_lgipp_matches_catalogue", parse_lgipp))
def test_lgipp_matches_catalogue(output: SmiOutput) -> None:
    assert output.model is not None
    rows = parse_lgipp(output.path.read_text(encoding="utf-8"))
    assert lgipp_differences(find_model(output.model), rows) == []


@pytest.mark.parametrize(
    "output", _smi("test_lgi_instances_sit_at_catalogued_placements", parse_lgi)
)
def test_lgi_instances_sit_at_catalogued_placements(output: SmiOutput) -> None:
    assert output.model is not None
    rows = parse_lgi(output.path.read_text(encoding="utf-8"))
    assert lgi_differences(find_model(output.model), rows) == []


@pytest.mark.parametrize("output", _smi("test_device_list_names_catalogued_models", parse_list))
def test_device_list_names_catalogued_models(output: SmiOutput) -> None:
    devices = parse_list(output.path.read_text(encoding="utf-8"))
    assert list_differences(output.model, devices) == []


def _profile_listings() -> list[Any]:
    """Every fixture with -lgip or -lgipp rows, found by reading the files (not listed).

    The manifest gives a real capture's driver, model and xfail reason; a bare ``-lgipp``
    names no profile, so its model comes from the manifest or from the ``-lgip`` beside it.
    """
    manifest = {o.path: o for o in SMI_OUTPUTS}
    found = []
    for path in sorted(FIXTURES.rglob("*.txt")):
        text = path.read_text(encoding="utf-8")
        if not (parse_lgip(text) or parse_lgipp(text)):
            continue
        entry = manifest.get(path)
        model = entry.model if entry else None
        if model is None and not parse_lgip(text):
            sibling = path.with_name(path.name.replace("lgipp", "lgip"))
            (table,) = tables_from_nvidia_smi(sibling.read_text(encoding="utf-8"), source="x")
            model = getattr(identify_model(table).model, "key", None)
        reason = entry.marks.get("test_catalog_check_exits_0") if entry else None
        found.append(
            pytest.param(
                path,
                entry.driver if entry else None,
                model,
                id=str(path.relative_to(FIXTURES)),
                marks=[_xfail(reason)] if reason else [],
            )
        )
    return found


@pytest.mark.parametrize(("path", "driver", "model"), _profile_listings())
def test_catalog_check_exits_0(path: Path, driver: int | None, model: str | None) -> None:
    """``migscope catalog check`` finds the capture's model and no identity difference."""
    lgip = bool(parse_lgip(path.read_text(encoding="utf-8")))
    args = ["catalog", "check", str(path), "-o", "json"]
    args += ["--driver", str(driver)] if driver else []
    args += ["--model", model] if model and not lgip else []
    result = CliRunner().invoke(cli, args)
    assert "Traceback" not in result.output
    assert result.exit_code == 0, result.stderr or result.stdout
    data = json.loads(result.stdout)
    assert data["ok"] is True
    for table in data["tables"]:
        if model is not None:
            assert model in table["candidates"], (table["model"], table["identified"])
        assert table["errors"] == 0


# ---------------------------------------------------------------------------------------------
# mig-parted configs


def _config_texts(path: Path) -> list[str]:
    """The mig-parted configs in a file: the file itself, or each ConfigMap's config.yaml.

    Read independently of the product (``yaml.safe_load_all``), to hold
    :func:`read_config_sources` against.
    """
    text = path.read_text(encoding="utf-8")
    docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    if docs and all("kind" in d for d in docs):
        return [
            d["data"]["config.yaml"]
            for d in docs
            if d["kind"] == "ConfigMap" and "config.yaml" in (d.get("data") or {})
        ]
    return [text]


@pytest.mark.parametrize("entry", _params(MIG_PARTED_FILES, "test_mig_parted_config_parses"))
def test_mig_parted_config_parses(entry: MigPartedFile) -> None:
    texts = _config_texts(entry.path)
    assert texts
    for text in texts:
        assert parse_config(text).mig_configs
    # the product finds the same configs in the file as it is, ConfigMap or not (issue 25)
    sources = read_config_sources(entry.path.read_text(encoding="utf-8"))
    assert [s.config for s in sources] == [parse_config(t) for t in texts]


@pytest.mark.parametrize("entry", [pytest.param(e, id=e.id) for e in MIG_PARTED_FILES])
def test_validate_config_reads_the_file_as_users_hold_it(entry: MigPartedFile) -> None:
    """``migscope validate-config FILE`` on the file itself, ConfigMap and manifest included."""
    result = CliRunner().invoke(cli, ["validate-config", str(entry.path)])
    assert result.exit_code == 0, result.output
    verdict = result.stdout.splitlines()[-1]
    assert verdict.startswith("ok: ")
    text = entry.path.read_text(encoding="utf-8")
    if "kind: ConfigMap" in text:
        assert "(ConfigMap " in verdict
        assert ", data key config.yaml)" in verdict
    data = json.loads(
        CliRunner().invoke(cli, ["validate-config", str(entry.path), "-o", "json"]).stdout
    )
    assert data["form"] == read_config_sources(text)[0].form


@pytest.mark.parametrize(
    "entry", _params(MIG_PARTED_FILES, "test_mig_parted_config_is_valid_on_the_catalogue")
)
def test_mig_parted_config_is_valid_on_the_catalogue(entry: MigPartedFile) -> None:
    """Every entry fits every catalogued model it reaches (its filters, or its profile names)."""
    for text in _config_texts(entry.path):
        check = check_config(parse_config(text))
        assert [e for r in check.configs for e in r.errors] == []
        assert check.errors == ()


@pytest.mark.parametrize(
    "entry", _params(MIG_PARTED_FILES, "test_mig_parted_device_filters_are_catalogued")
)
def test_mig_parted_device_filters_are_catalogued(entry: MigPartedFile) -> None:
    """Every PCI ID an entry enables MIG on is a catalogued model (so it was checked at all)."""
    for text in _config_texts(entry.path):
        unknown = [
            f"{name}: {pci}"
            for name, items in parse_config(text).mig_configs.items()
            for item in items
            if item.mig_enabled
            for pci in item.device_filter or ()
            if model_for_pci(pci) is None
        ]
        assert unknown == []


# ---------------------------------------------------------------------------------------------
# issue 25: real inputs, round 2


def test_gpu_names_a_config_whose_unfiltered_entry_uses_other_models_profiles() -> None:
    """The real custom-mig-config: pcie-nvl's unfiltered entry uses H100 NVL profiles.

    Before issue 25 the entry was skipped silently and the verdict read "ok: 3 configs valid
    on A100-80GB". Now pcie-nvl is not counted as valid on A100-80GB, and the verdict names it
    and why (an A100-80GB node labelled pcie-nvl would fail).
    """
    path = MIG_PARTED / "mmahdisetak-custom-mig-config-pcie-nvl.txt"
    result = CliRunner().invoke(cli, ["validate-config", str(path), "--gpu", "A100-80GB"])
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "ok: 2 configs valid on A100-80GB (ConfigMap custom-mig-config, data key config.yaml); "
        "1 for other GPU models only (pcie-nvl: no device-filter, so fails if set on it)\n"
    )
    data = json.loads(
        CliRunner()
        .invoke(cli, ["validate-config", str(path), "--gpu", "A100-80GB", "-o", "json"])
        .stdout
    )
    (nvl,) = [c for c in data["configs"] if c["name"] == "pcie-nvl"]
    assert nvl["applies"] is False
    assert nvl["not_valid_on"]["A100-80GB"].startswith(
        "entry 1 uses 3g.47gb and 2g.24gb and 1g.12gb (H100-NVL-94GB"
    )
    assert nvl["models"] == []


def test_without_gpu_a_config_is_said_valid_where_it_fits_and_not_elsewhere() -> None:
    path = MIG_PARTED / "mig-manager-example-hopper-blackwell.txt"
    result = CliRunner().invoke(cli, ["validate-config", str(path)])
    assert result.exit_code == 0, result.output
    assert (
        "all-1g.10gb: valid on A100-80GB, H100-80GB, H100-PCIE-80GB; not on A100-40GB: entry 0: "
        "1g.10gb×7: at most 4 × 1g.10gb per A100-40GB GPU, asked for 7"
    ) in result.stdout.splitlines()


def test_notes_on_nvidias_default_config_are_short_and_cite_each_source_once() -> None:
    path = MIG_PARTED / "gpu-operator-default-mig-parted-config.txt"
    result = CliRunner().invoke(cli, ["validate-config", str(path)])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stdout.splitlines() if line.startswith("note: ")]
    sources = [n for n in notes if "gpu-operator#1303" in n]
    assert len(sources) == 1, sources  # the GB200 paragraph once, not four times
    assert all(len(n) < 200 for n in notes if n not in sources), notes


def test_gh200_96gb_hbm3_is_the_catalogued_gh200() -> None:
    """The NVML name on recent GH200 nodes (nvidia-smi -L in the DRA driver's demo spec)."""
    path = REAL / "dra" / "dra-driver-demo-gh200-claim-gpu-1-mig-19-4-1.yaml"
    lines = [
        line.removeprefix("#   ")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("#   ")
    ]
    devices = parse_list("\n".join(lines))
    names = {d.name for d in devices}
    assert names == {"NVIDIA GH200 96GB HBM3"}
    model = model_for_name("NVIDIA GH200 96GB HBM3")
    assert model is not None
    assert model.key == "GH200-96GB"
    assert 0x234210DE in model.pci_device_ids
    assert all(model.has_profile(profile) for d in devices for profile, _ in d.mig_devices)
    assert len([p for d in devices for p in d.mig_devices]) == 14
    result = CliRunner().invoke(cli, ["catalog", "NVIDIA GH200 96GB HBM3", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"] == "GH200-96GB"
