"""``--dcgm-compat`` writes what dcgm-exporter writes, checked against dcgm-exporter's own files.

The references are not ours: dcgm-exporter's default collectors file
(``tests/fixtures/dcgm/dcgm-exporter-default-counters.csv``, NVIDIA/dcgm-exporter d5e5f51), a
complete current scrape of a non-MIG NVIDIA L4
(``tests/fixtures/real/dcgm-exporter/cncf-kops-l4-default-counters.txt``) and 2022 scrapes of a
MIG A100 (``tests/fixtures/dcgm/``). For the same hardware and readings, migscope's lines must
be those lines: family order, HELP, TYPE, label names in order, label values and the printed
values, except where a test names a documented difference.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from migscope.cli.main import cli
from migscope.core._metrics import DCGM_COMPAT
from migscope.exporter._dcgm_compat import (
    DEFAULT_COUNTERS,
    CounterRow,
    CountersError,
    DcgmExposition,
    load_counters,
    parse_counters,
)
from migscope.exporter._runtime import render_once
from migscope.exporter._settings import load_settings
from migscope.exporter._snapshot import Activity, GpuReading, MigReading, Snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DEFAULT_FILE = FIXTURES / "dcgm" / "dcgm-exporter-default-counters.csv"
L4_SCRAPE = FIXTURES / "real" / "dcgm-exporter" / "cncf-kops-l4-default-counters.txt"
A100_3GI = FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-3gi-active.txt"
A100_NO_GI = FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-mig-enabled-no-gi.txt"
MIB = 1024 * 1024

requires_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (Debian package 'prometheus'; make test installs it as root)",
)


@dataclass(frozen=True)
class Line:
    """One sample line of an exposition, labels in the order written."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: str

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.labels)

    def get(self, label: str) -> str | None:
        return dict(self.labels).get(label)


_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)\{(.*)\} (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def sample_lines(text: str) -> list[Line]:
    out = []
    for raw in text.splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        match = _SAMPLE.match(raw)
        assert match, raw
        out.append(Line(match[1], tuple(_LABEL.findall(match[2])), match[3]))
    return out


def families(text: str) -> list[str]:
    """Family names in the order their ``# TYPE`` lines come."""
    return [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]


def meta(text: str) -> dict[str, tuple[str, str]]:
    """Per family: its HELP and TYPE text."""
    helps = {
        line.split(" ", 3)[2]: line.split(" ", 3)[3]
        for line in text.splitlines()
        if line.startswith("# HELP ")
    }
    types = {
        line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE ")
    }
    return {name: (helps[name], types[name]) for name in types}


@dataclass(frozen=True)
class Holder:
    namespace: str
    pod: str
    container: str
    resource_name: str = "nvidia.com/gpu"


# --- the collectors file -----------------------------------------------------------------------


def test_the_defaults_are_dcgm_exporters_default_file() -> None:
    """Every field migscope can fill is emitted by default exactly when dcgm-exporter's default
    file enables it, with that file's type and HELP; commented-out ones stay off."""
    rows = parse_counters(DEFAULT_FILE.read_text(), str(DEFAULT_FILE))
    ours = {spec.name for spec in DCGM_COMPAT}
    # (file order does not matter: dcgm-exporter writes families in field-id order)
    assert sorted(r for r in rows if r.name in ours) == sorted(DEFAULT_COUNTERS)
    assert len(rows) == 26  # the file's active rows, read as dcgm-exporter reads them
    assert "DCGM_FI_DEV_DEC_UTIL" in {r.name for r in rows}  # "DCGM_FI_DEV_DEC_UTIL ," trimmed
    # The real L4 scrape is this file at work: every series row but the two its GPU left blank.
    series_rows = {r.name for r in rows if r.type != "label"}
    blank = {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"}
    assert set(families(L4_SCRAPE.read_text())) == series_rows - blank
    commented = {
        m[1]: (m[2], m[3])
        for m in re.finditer(r"^# (DCGM_FI_\w+),\s*(\w+),\s*(.*)$", DEFAULT_FILE.read_text(), re.M)
    }
    for spec in DCGM_COMPAT:
        if not spec.default:
            assert commented[spec.name] == (spec.type, spec.help), spec.name
    assert load_counters(None) == DEFAULT_COUNTERS


def test_the_field_order_is_dcgm_field_ids_as_in_a_real_scrape() -> None:
    """dcgm-exporter writes families sorted by DCGM field id; the real L4 scrape shows it."""
    order = [name for name in families(L4_SCRAPE.read_text()) if name.startswith("DCGM_FI")]
    ours = sorted((s for s in DCGM_COMPAT if s.type != "label"), key=lambda s: s.field_id)
    in_scrape = [s.name for s in ours if s.name in order]
    assert in_scrape == [name for name in order if name in in_scrape]
    assert len(in_scrape) == 8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("DCGM_FI_DEV_FB_USED, gauge\n", r"f\.csv:1: expected 3 fields"),
        ("# c\n\nDCGM_FI_DEV_FB_USED, gauges, x\n", r"f\.csv:3: unknown type 'gauges'"),
        (
            "DCGM_FI_DEV_FB_USED, gauge, a\nDCGM_FI_DEV_FB_USED, gauge, b\n",
            r"f\.csv:2: DCGM_FI_DEV_FB_USED is listed twice",
        ),
        ("DCGM_FI_DEV_FB_USED, histogram, x\n", r"f\.csv:1: DCGM_FI_DEV_FB_USED as a histogram"),
    ],
)
def test_a_bad_collectors_file_is_one_line_naming_file_and_line(text: str, message: str) -> None:
    with pytest.raises(CountersError, match=message) as caught:
        parse_counters(text, "f.csv")
    assert "\n" not in str(caught.value)


def test_a_collectors_file_is_read_as_dcgm_exporter_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "custom.csv"
    path.write_text(
        "# my counters\n"
        "DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).\n"
        'DCGM_FI_PROF_SM_ACTIVE , gauge ,"Ratio, with a comma."\n'
        "DCGM_FI_DEV_FB_USED, counter, used\n"
        "DCGM_FI_DEV_SM_CLOCK_OTHER, histogram, not ours: skipped\n"
    )
    rows = load_counters(path)
    assert rows == (
        CounterRow("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
        CounterRow("DCGM_FI_PROF_SM_ACTIVE", "gauge", "Ratio, with a comma."),
        CounterRow("DCGM_FI_DEV_FB_USED", "counter", "used"),
    )
    exposition = DcgmExposition(rows, hostname="h")
    assert exposition.unsupported == ("DCGM_FI_DEV_SM_CLOCK",)
    text = exposition.text(SNAP_L4, {})
    assert families(text) == ["DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_SM_ACTIVE"]
    assert meta(text)["DCGM_FI_DEV_FB_USED"] == ("used", "counter")
    assert meta(text)["DCGM_FI_PROF_SM_ACTIVE"] == ("Ratio, with a comma.", "gauge")
    # no DCGM_FI_DRIVER_VERSION label row in this file: no such label (as the Helm chart's)
    assert all(line.get("DCGM_FI_DRIVER_VERSION") is None for line in sample_lines(text))
    with pytest.raises(CountersError, match=r"missing\.csv: cannot read"):
        load_counters(tmp_path / "missing.csv")


def test_a_collectors_file_may_name_fields_by_dcgms_new_names() -> None:
    """DCGM 4.6+ renamed fields (``dcgm_fields.h`` keeps the old names as aliases) and
    dcgm-exporter 4.9's files use the new names: the same field, written under the file's name."""
    rows = parse_counters(
        "DCGM_FI_DEV_BOARD_POWER_WATTS, gauge, Board power (in W).\n"
        "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO, gauge, GR engine utilization ratio.\n"
        "DCGM_FI_SYSTEM_DRIVER_VERSION, label, Driver Version\n",
        "new.csv",
    )
    exposition = DcgmExposition(rows, hostname="h")
    assert exposition.unsupported == ()
    text = exposition.text(SNAP_L4, {})
    assert families(text) == ["DCGM_FI_DEV_BOARD_POWER_WATTS", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"]
    lines = sample_lines(text)
    assert [line.value for line in lines] == ["16.365000", "0.000000"]
    assert {line.labels[-1] for line in lines} == {("DCGM_FI_SYSTEM_DRIVER_VERSION", "580.105.08")}


def test_an_unreadable_collectors_file_stops_the_command_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            *("exporter", "--backend", "sim", "--once", "--dcgm-compat"),
            *("--dcgm-counters", str(tmp_path / "nope.csv")),
        ],
    )
    assert result.exit_code == 1
    assert re.fullmatch(
        r"migscope: error: dcgm counters \S+nope\.csv: cannot read: .+\n", result.stderr
    )


# --- the same hardware as a real scrape --------------------------------------------------------

L4_UUID = "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"
SNAP_L4 = Snapshot(
    taken_at=0.0,
    driver_version="580.105.08",
    gpus=(
        GpuReading(
            index=0,
            uuid=L4_UUID,
            name="NVIDIA L4",
            model=None,
            pci_bus_id="00000000:31:00.0",
            pci_device_id="0x27B810DE",
            mig_enabled=False,
            # the scrape's own readings: 16.365 W, 4742776 mJ, FB 0 used, 22563 free, 470
            # reserved (MiB), every ratio 0
            power_watts=16.365,
            energy_joules=4742.776,
            memory_used_bytes=0,
            memory_total_bytes=(22563 + 470) * MIB,
            memory_reserved_bytes=470 * MIB,
            activity=Activity(graphics=0.0, sm_active=0.0, sm_occupancy=0.0, tensor=0.0, dram=0.0),
        ),
    ),
)


def test_a_gpu_without_mig_is_written_line_for_line_as_the_real_l4_scrape() -> None:
    """Same GPU, same readings: the lines migscope writes are the scrape's lines."""
    real = L4_SCRAPE.read_text()
    ours = DcgmExposition(hostname="i-030791dc5a37cd257").text(SNAP_L4, {})
    real_lines = {line: i for i, line in enumerate(real.splitlines())}
    written = ours.splitlines()
    assert len(written) == 8 * 3  # HELP, TYPE and one sample for each default family
    missing = [line for line in written if line not in real_lines]
    assert missing == []
    assert [real_lines[line] for line in written] == sorted(real_lines[line] for line in written)


H200_RECORDING = Path(__file__).resolve().parents[2] / "docs" / "hardware"


def test_a_real_h200_read_through_nvml_looks_like_the_real_l4_scrape() -> None:
    """docs/hardware/h200-dcgm-compat.prom: the real NVML of a lent H200 (MIG off) rendered by
    ``--dcgm-compat``. Against dcgm-exporter's real scrape of another non-MIG GPU: the same
    HELP, TYPE and label names in the same order, family order included; and the framebuffer
    figures are NVML's bytes floored to MiB, as DCGM's are."""
    ours = (H200_RECORDING / "h200-dcgm-compat.prom").read_text()
    real = L4_SCRAPE.read_text()
    real_meta, our_meta = meta(real), meta(ours)
    assert len(our_meta) == 8
    for name, help_type in our_meta.items():
        assert help_type == real_meta[name], name
    order = families(real)
    assert [order.index(name) for name in families(ours)] == sorted(
        order.index(name) for name in families(ours)
    )
    names = {line.name: line.label_names for line in sample_lines(real)}
    lines = sample_lines(ours)
    for line in lines:
        assert line.label_names == names[line.name], line.name
        assert line.get("pci_bus_id") == "00000000:00:06.0"
        assert line.get("DCGM_FI_DRIVER_VERSION") == "580.159.04"
    readings = json.loads((H200_RECORDING / "h200-dcgm-compat.json").read_text())["readings"][0]
    fb = {line.name: int(line.value) for line in lines if line.name.startswith("DCGM_FI_DEV_FB")}
    used, reserved = readings["memory_used_bytes"], readings["memory_reserved_bytes"]
    assert fb["DCGM_FI_DEV_FB_USED"] == used // MIB
    assert fb["DCGM_FI_DEV_FB_RESERVED"] == reserved // MIB
    assert fb["DCGM_FI_DEV_FB_FREE"] == (readings["memory_total_bytes"] - used - reserved) // MIB


def test_a_mig_gpu_is_written_per_gpu_instance_as_the_real_a100_scrape() -> None:
    """The run-ai A100 scrape (dcgm-exporter of 2022): per GPU instance, the same lines but for
    what dcgm-exporter itself changed since (``pci_bus_id`` from 3.3.7; empty pod labels on an
    unheld device dropped in 3.3.5)."""
    real = sample_lines(A100_3GI.read_text())
    found = {(line.name, line.get("GPU_I_ID")): line for line in real}
    instances = []
    for gi, profile in (("7", "1g.5gb"), ("9", "1g.5gb"), ("5", "2g.10gb")):

        def value(name: str, gi: str = gi) -> float:
            return float(found[(name, gi)].value)

        used, free = int(value("DCGM_FI_DEV_FB_USED")), int(value("DCGM_FI_DEV_FB_FREE"))
        instances.append(
            MigReading(
                gpu_instance_id=int(gi),
                mig_uuid=f"MIG-{gi}",
                profile=profile,
                profile_id=None,
                placement_start=None,
                placement_size=None,
                compute_slices=1,
                memory_slices=1,
                sm_count=14,
                memory_used_bytes=used * MIB,
                memory_total_bytes=(used + free) * MIB,
                memory_reserved_bytes=0,
                activity=Activity(
                    graphics=value("DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
                    tensor=value("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
                    dram=value("DCGM_FI_PROF_DRAM_ACTIVE"),
                ),
            )
        )
    snap = Snapshot(
        taken_at=0.0,
        driver_version="520.56.06",
        gpus=(
            GpuReading(
                index=0,
                uuid="GPU-7099682b-a20d-2bcc-74ab-b9060454d81e",
                name="NVIDIA A100-SXM4-40GB",
                model="A100-40GB",
                pci_bus_id="00000000:07:00.0",
                pci_device_id="0x20B010DE",
                mig_enabled=True,
                power_watts=116.043,
                energy_joules=57585.599,
                instances=tuple(instances),
            ),
        ),
    )
    ours = DcgmExposition(hostname="nvidia-dcgm-exporter-q28k4").text(snap, {})
    real_meta = meta(A100_3GI.read_text())
    for name, (_, kind) in meta(ours).items():
        # (HELP texts changed since; the L4 test compares the current ones.)
        if name != "DCGM_FI_DEV_FB_RESERVED":  # not in that exporter's counters file
            assert kind == real_meta[name][1], name

    def then(line: Line) -> Line:
        """The real line as dcgm-exporter 3.3.7+ writes it."""
        labels = [(k, v) for k, v in line.labels if (k, v) not in {(p, "") for p in _POD}]
        at = [k for k, _ in labels].index("UUID") + 1
        labels.insert(at, ("pci_bus_id", "00000000:07:00.0"))
        return Line(line.name, tuple(labels), line.value)

    expected = {then(line) for line in real}
    per_instance = [line for line in sample_lines(ours) if line.get("GPU_I_ID")]
    reserved = [line for line in per_instance if line.name == "DCGM_FI_DEV_FB_RESERVED"]
    assert [line.value for line in reserved] == ["0", "0", "0"]  # a field of today's file
    compared = [line for line in per_instance if line not in reserved]
    assert len(compared) == 3 * 5  # GR, tensor, DRAM, FB used and free for 3 instances
    assert set(compared) <= expected
    # The documented difference: the board's power and energy once, without GPU_I_*, where
    # dcgm-exporter repeats them on every instance and sum() over-counts (#257, #353).
    board = [line for line in sample_lines(ours) if not line.get("GPU_I_ID")]
    assert [line.name for line in board] == [
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    ]
    for line in board:
        on_instance_7 = then(found[(line.name, "7")])
        dropped = {"GPU_I_PROFILE", "GPU_I_ID"}
        assert line.labels == tuple(kv for kv in on_instance_7.labels if kv[0] not in dropped)
        assert line.value == on_instance_7.value


_POD = ("container", "namespace", "pod")


def test_a_mig_gpu_without_instances_has_board_series_and_no_framebuffer() -> None:
    """As in the real scrape of a MIG-enabled A100 with no GPU instance: no FB_* at all."""
    real = meta(A100_NO_GI.read_text())
    assert not any(name.startswith("DCGM_FI_DEV_FB_") for name in real)
    gpu = SNAP_L4.gpus[0]
    snap = Snapshot(0.0, "520.56.06", (GpuReading(**{**gpu.__dict__, "mig_enabled": True}),))
    ours = meta(DcgmExposition(hostname="h").text(snap, {}))
    assert not any(name.startswith("DCGM_FI_DEV_FB_") for name in ours)
    assert set(ours) <= set(real)
    assert {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"} <= set(ours)


# --- labels ------------------------------------------------------------------------------------

SLICE = MigReading(
    gpu_instance_id=3,
    mig_uuid="MIG-held",
    profile="3g.71gb",
    profile_id=9,
    placement_start=4,
    placement_size=4,
    compute_slices=3,
    memory_slices=4,
    sm_count=60,
    memory_used_bytes=3 * 1024 * MIB,
    memory_total_bytes=71 * 1024 * MIB,
    memory_reserved_bytes=MIB,
    activity=Activity(graphics=0.25),
)
IDLE = MigReading(**{**SLICE.__dict__, "gpu_instance_id": 4, "mig_uuid": "MIG-idle"})
MIXED = Snapshot(
    taken_at=0.0,
    driver_version="580.159.04",
    gpus=(
        GpuReading(
            index=0,
            uuid="GPU-mig",
            name="NVIDIA H200",
            model="H200-141GB",
            pci_bus_id="00000000:18:00.0",
            pci_device_id="0x233510DE",
            mig_enabled=True,
            power_watts=300.0,
            instances=(SLICE, IDLE),
        ),
        SNAP_L4.gpus[0],
    ),
)
OWNERS = {
    "MIG-held": (Holder("team-a", "trainer-0", "main"),),
    L4_UUID: (Holder("team-b", "serve-0", "server"),),
}


def test_labels_come_in_dcgm_exporters_order_and_pods_only_where_a_pod_holds() -> None:
    lines = sample_lines(DcgmExposition(hostname="node-1").text(MIXED, OWNERS))
    head = ("gpu", "UUID", "pci_bus_id", "device", "modelName")
    tail = ("Hostname", "DCGM_FI_DRIVER_VERSION")
    held = [line for line in lines if line.get("GPU_I_ID") == "3"]
    idle = [line for line in lines if line.get("GPU_I_ID") == "4"]
    whole = [line for line in lines if line.get("UUID") == L4_UUID]
    assert {line.label_names for line in held} == {
        (*head, "GPU_I_PROFILE", "GPU_I_ID", *tail, *_POD)
    }
    assert {line.label_names for line in idle} == {(*head, "GPU_I_PROFILE", "GPU_I_ID", *tail)}
    assert {line.label_names for line in whole} == {(*head, *tail, *_POD)}
    assert held[0].labels[-3:] == (
        ("container", "main"),
        ("namespace", "team-a"),
        ("pod", "trainer-0"),
    )
    assert held[0].get("device") == "nvidia0"
    assert held[0].get("modelName") == "NVIDIA H200"
    fb = {line.name: line.value for line in held}
    assert fb["DCGM_FI_DEV_FB_USED"] == "3072"
    assert fb["DCGM_FI_DEV_FB_RESERVED"] == "1"
    assert fb["DCGM_FI_DEV_FB_FREE"] == str(71 * 1024 - 3072 - 1)
    assert fb["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == "0.250000"
    # the MIG GPU's board power: once, with no GPU_I_* and no pod
    power = [line for line in lines if line.name == "DCGM_FI_DEV_POWER_USAGE"]
    assert [(line.get("UUID"), line.value) for line in power] == [
        ("GPU-mig", "300.000000"),
        (L4_UUID, "16.365000"),
    ]
    assert power[0].label_names == (*head, *tail)


@pytest.mark.parametrize(
    ("host_label", "hostname", "expected"),
    [
        ("Hostname", "node-1", ("Hostname", "node-1")),
        ("hostname", "node-1", ("hostname", "node-1")),  # dcgm-exporter 4.8.3 (#655)
        ("none", "node-1", None),  # dcgm-exporter -n
        ("Hostname", "", None),  # an empty value is left out, as dcgm-exporter does
    ],
)
def test_the_host_label(host_label: str, hostname: str, expected: tuple[str, str] | None) -> None:
    exposition = DcgmExposition(hostname=hostname, host_label=host_label)  # type: ignore[arg-type]
    for line in sample_lines(exposition.text(MIXED, {})):
        hosts = [kv for kv in line.labels if kv[0].lower() == "hostname"]
        assert hosts == ([] if expected is None else [expected])
        assert line.labels[-1] == ("DCGM_FI_DRIVER_VERSION", "580.159.04")


def test_the_host_defaults_to_node_name_else_the_os_host_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    monkeypatch.delenv("NODE_NAME", raising=False)
    assert load_settings(environ={}).hostname == socket.gethostname() != ""
    monkeypatch.setenv("NODE_NAME", "gpu-node-7")
    assert load_settings(environ={}).hostname == "gpu-node-7"
    settings = load_settings(environ={"MIGSCOPE_EXPORTER_DCGM_HOST_LABEL": "hostname"})
    assert settings.dcgm_host_label == "hostname"


# --- the whole exporter ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sim_scrape() -> tuple[str, str]:
    """``--once --dcgm-compat`` of the simulated H200 node: (migscope's part, dcgm's part)."""
    settings = load_settings(
        environ={},
        overrides={
            "backend": "sim",
            "scenario": "h200-node",
            "dcgm_compat": True,
            "hostname": "gpu-node-7",
        },
    )
    text = render_once(settings).decode()
    at = text.index("# HELP DCGM_")
    return text[:at], text[at:]


def test_the_analyzer_reads_the_dcgm_part_as_a_dcgm_exporter_scrape(
    sim_scrape: tuple[str, str], tmp_path: Path
) -> None:
    """Fed to ``migscope analyze --source`` alone, the dcgm-compatible series give the same
    slices, pods, activity and memory as migscope's own series of the same scrape."""
    own, dcgm = sim_scrape

    def report(text: str, name: str) -> dict[tuple[int, int], dict[str, Any]]:
        path = tmp_path / name
        path.write_text(text)
        result = CliRunner().invoke(cli, ["analyze", "--source", str(path), "-o", "json"])
        assert result.exit_code == 0, result.stderr
        return {(s["gpu"], s["gpu_instance_id"]): s for s in json.loads(result.stdout)["slices"]}

    from_dcgm = report(dcgm, "dcgm.prom")
    from_own = report(own, "own.prom")
    assert len(from_dcgm) == 14
    assert from_dcgm.keys() == from_own.keys()
    for key, theirs in from_dcgm.items():
        mine = from_own[key]
        assert theirs["node"] == "gpu-node-7"  # from the Hostname label
        for field in ("gpu_uuid", "model", "profile", "namespace", "pod", "status"):
            assert theirs[field] == mine[field], (key, field)
        ev, own_ev = theirs["evidence"], mine["evidence"]
        assert ev["activity_p95"] == pytest.approx(own_ev["activity_p95"], abs=1e-6)
        assert ev["memory_p95_bytes"] // MIB == own_ev["memory_p95_bytes"] // MIB


@requires_promtool
def test_promtool_finds_nothing_in_the_dcgm_part_that_dcgm_exporter_does_not_have_itself(
    sim_scrape: tuple[str, str],
) -> None:
    """promtool parses it; its naming advice (camelCase labels, counters without ``_total``) is
    exactly the advice it gives dcgm-exporter's own scrape of the same families."""

    def lint(text: str) -> set[str]:
        result = subprocess.run(
            ["promtool", "check", "metrics"], input=text, capture_output=True, text=True
        )
        assert "error while linting" not in result.stdout + result.stderr
        return set((result.stdout + result.stderr).splitlines())

    _, dcgm = sim_scrape
    ours = lint(dcgm)
    real = lint(L4_SCRAPE.read_text())
    assert ours, "promtool gives dcgm-exporter's names the same advice"
    assert ours <= real
