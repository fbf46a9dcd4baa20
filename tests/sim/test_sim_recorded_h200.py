"""The simulated H200 answers like the real one: recorded probes replayed against it.

Every test here runs code that was run on a real NVIDIA H200 (driver 580.159.04, MIG
disabled) against a simulated H200 and compares the answers. Sources:
``tests/fixtures/h200/`` (the team's probe, ``lgip.txt``, ``lgipp.txt``) and
``tests/sim/recordings/`` (see its README).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import io
import json
import math
import re
from typing import Any

import pytest
from simhelpers import FIXTURES, RECORDINGS, ROOT, simulate, started

from migscope.sim import SimClock, SimNvml

PROBE = json.loads((FIXTURES / "h200" / "nvml_probe.json").read_text())
DEVICE = PROBE["devices"][0]


def test_probe_identity_memory_and_mode(probe_h200: SimNvml) -> None:
    """Name, PCI device id, MIG mode, max MIG count and memory total as probed."""
    nvml = probe_h200
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlSystemGetDriverVersion() == PROBE["driver"]
    assert nvml.nvmlSystemGetNVMLVersion() == PROBE["nvml_version"]
    assert nvml.nvmlDeviceGetCount() == PROBE["count"]
    assert nvml.nvmlDeviceGetName(h) == DEVICE["name"]
    pci = nvml.nvmlDeviceGetPciInfo(h)
    assert f"0x{pci.pciDeviceId:08x}" == DEVICE["pci_device_id"]
    assert pci.busId == DEVICE["pci_bus_id"]
    assert nvml.nvmlDeviceGetMigMode(h) == DEVICE["mig_mode"]
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(h) == DEVICE["max_mig"]
    assert nvml.nvmlDeviceGetMemoryInfo(h).total == DEVICE["mem_total"]
    assert nvml.nvmlDeviceGetPowerManagementLimit(h) == DEVICE["power_limit_mw"]
    assert nvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice == DEVICE["gpm_supported"]


def test_probe_every_profile_index(probe_h200: SimNvml) -> None:
    """Profile indices 0..19: each info field, or the same error, as on the real H200.

    The probe shows NOT_SUPPORTED for indices the GPU lacks (5, 6, 8, 10-16) and
    INVALID_ARGUMENT from 17 on (driver 580 knows 17 profile indices).
    """
    nvml = probe_h200
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    for recorded in DEVICE["gi_profiles"]:
        index = recorded["profile"]
        if "error" in recorded:
            with pytest.raises(nvml.NVMLError) as caught:
                nvml.nvmlDeviceGetGpuInstanceProfileInfo(h, index)
            assert str(caught.value) == recorded["error"], index
            continue
        info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(h, index)
        fields = {k: v for k, v in recorded.items() if k not in ("profile", "placements_err")}
        remaining = fields.pop("remaining")
        for name, value in fields.items():
            assert getattr(info, name) == value, (index, name)
        assert nvml.nvmlDeviceGetGpuInstanceRemainingCapacity(h, info.id) == remaining


def test_probe_placements_call_needs_four_arguments(probe_h200: SimNvml) -> None:
    """The probe's two-argument call failed with TypeError: the signature is pynvml's."""
    h = probe_h200.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(TypeError, match="missing 2 required positional arguments"):
        probe_h200.nvmlDeviceGetGpuInstancePossiblePlacements(h, 19)  # type: ignore[call-arg]


def _lgipp() -> dict[int, list[tuple[int, int]]]:
    out = {}
    for line in (FIXTURES / "h200" / "lgipp.txt").read_text().splitlines():
        m = re.match(r"GPU\s+0 Profile ID\s+(\d+) Placements?\s*: \{([\d,]+)\}:(\d+)", line)
        if m:
            size = int(m.group(3))
            out[int(m.group(1))] = [(int(s), size) for s in m.group(2).split(",")]
    return out


def test_placements_equal_lgipp(probe_h200: SimNvml) -> None:
    """``nvmlDeviceGetGpuInstancePossiblePlacements`` gives ``nvidia-smi mig -lgipp``'s."""
    nvml = probe_h200
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    expected = _lgipp()
    assert len(expected) == 7
    for profile_id, spans in expected.items():
        count = ctypes.c_uint(0)
        nvml.nvmlDeviceGetGpuInstancePossiblePlacements(h, profile_id, None, ctypes.byref(count))
        assert count.value == len(spans)
        array = (nvml.c_nvmlGpuInstancePlacement_t * count.value)()
        nvml.nvmlDeviceGetGpuInstancePossiblePlacements(h, profile_id, array, ctypes.byref(count))
        assert [(p.start, p.size) for p in array] == spans


def test_lgip_table_matches_profile_info(probe_h200: SimNvml) -> None:
    """Every ``-lgip`` row (name, id, instances, SMs) is what profile info by id says."""
    nvml = probe_h200
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    rows = re.findall(
        r"\|\s+0\s+MIG (\S+)\s+(\d+)\s+(\d+)/(\d+)\s+[\d.]+\s+No\s+(\d+)",
        (FIXTURES / "h200" / "lgip.txt").read_text(),
    )
    assert len(rows) == 7
    for name, profile_id, free, total, sms in rows:
        info = nvml.nvmlDeviceGetGpuInstanceProfileInfoById(h, int(profile_id))
        assert (info.name, info.instanceCount, info.multiprocessorCount) == (
            f"MIG {name}",
            int(total),
            int(sms),
        )
        assert nvml.nvmlDeviceGetGpuInstanceRemainingCapacity(h, int(profile_id)) == int(free)


def test_probe_memory_v1_and_v2(probe_h200: SimNvml) -> None:
    """Idle H200: v1 ``used`` = reserved 644,939,776 B; v2 ``used`` 0 and ``reserved`` apart."""
    nvml = probe_h200
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    recorded = json.loads((RECORDINGS / "h200_nvml_probe.json").read_text())["devices"][0]
    v1, v2 = nvml.nvmlDeviceGetMemoryInfo(h), nvml.nvmlDeviceGetMemoryInfo(h, nvml.nvmlMemory_v2)
    assert {"total": v1.total, "free": v1.free, "used": v1.used} == recorded["memory_v1"]["ok"]
    assert {
        "version": v2.version,
        "total": v2.total,
        "reserved": v2.reserved,
        "free": v2.free,
        "used": v2.used,
    } == recorded["memory_v2"]["ok"]


# -- replaying the recording scripts ------------------------------------------------------

_LINE = re.compile(r"^(\w+) (OK|ERR) (.*)$")
# Answers that measure the live GPU (temperature, idle DRAM and PCIe noise): their shape
# (return codes, names, units) must match, their numbers cannot.
_MEASURED = {"clock_thr", "mg_ok"}


def _shape(name: str, rest: str) -> str:
    if name in _MEASURED:
        return re.sub(r"-?\d+\.\d+(e-?\d+)?|^\d+$", "#", rest)
    return rest


def _replay(number: int) -> list[str]:
    """Run recording script ``number`` unchanged, with ``N`` bound to a simulated H200."""
    text = (RECORDINGS / f"h200_semantics_{number}.py.txt").read_text()
    first, body = text.split("\n", 1)
    assert first.startswith("import pynvml as N")
    sim = simulate(
        {"model": "H200", "pci_bus_id": "00000000:00:06.0"}, clock=SimClock(realtime=True)
    )
    nvml = sim.node("node-a").nvml  # not initialised: the script calls nvmlInit itself
    out = io.StringIO()
    namespace: dict[str, Any] = {"N": nvml}
    with contextlib.redirect_stdout(out):
        exec(compile("import ctypes, time, json\n" + body, f"replay-{number}", "exec"), namespace)
    return out.getvalue().splitlines()


@pytest.mark.parametrize("number", [1, 2, 3])
def test_recorded_semantics_replay(number: int) -> None:
    """Each recorded call gives the same result class, code and value on the simulator."""
    recorded = [
        m.groups()
        for line in (RECORDINGS / f"h200_semantics_{number}.txt").read_text().splitlines()
        if (m := _LINE.match(line))
    ]
    assert len(recorded) > 10
    got = {m.group(1): m.groups() for line in _replay(number) if (m := _LINE.match(line))}
    for name, status, rest in recorded:
        assert name in got, f"{name} was not answered"
        _, got_status, got_rest = got[name]
        assert (got_status, _shape(name, got_rest)) == (status, _shape(name, rest)), name


def _probe_module() -> Any:
    spec = importlib.util.spec_from_file_location("nvml_probe", ROOT / "bench" / "nvml_probe.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _diff(got: Any, want: Any, path: str, out: list[str]) -> None:
    if isinstance(want, dict):
        for key, value in want.items():
            if key not in got:
                out.append(f"{path}/{key}: missing")
            else:
                _diff(got[key], value, f"{path}/{key}", out)
    elif isinstance(want, list):
        if len(got) != len(want):
            out.append(f"{path}: {len(got)} items, recorded {len(want)}")
        for i, (g, w) in enumerate(zip(got, want, strict=False)):
            _diff(g, w, f"{path}[{i}]", out)
    elif not (got == want or (isinstance(got, float) and math.isnan(got) and math.isnan(want))):
        out.append(f"{path}: {got!r}, recorded {want!r}")


def test_probe_script_replay() -> None:
    """``bench/nvml_probe.py`` gives the recorded H200 answers on the simulator.

    Everything but live measurements (power, energy, temperature, call latency, the idle
    DRAM noise of one GPM interval) must be equal, errors included.
    """
    module = _probe_module()
    _, nvml = started(
        {"model": "H200", "pci_bus_id": "00000000:00:06.0"}, clock=SimClock(realtime=True)
    )
    module.N = nvml
    got = json.loads(json.dumps(module.probe_device(0), default=str))
    want = json.loads((RECORDINGS / "h200_nvml_probe.json").read_text())["devices"][0]
    for measured in ("power_mw", "energy_mj", "temperature", "latency_us"):
        assert measured in got
        want.pop(measured)
    want["gpm_device_200ms"]["10"]["value"] = 0.0  # idle DRAM noise on the real GPU
    problems: list[str] = []
    _diff(got, want, "", problems)
    assert problems == []
