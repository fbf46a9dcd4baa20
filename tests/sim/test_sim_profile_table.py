"""The simulated GPU-instance profile table follows the simulated driver, as real GPUs do.

Names, ids and placements are fixed by the hardware; the memory size a profile reports
depends on the driver branch (an H100 NVL's 1g.12gb reports 10.62 GiB on some drivers and
10.75 GiB on R560, the catalogue's per-driver facts with their evidence). The simulator
answers ``nvmlDeviceGetGpuInstanceProfileInfo`` with the figure of the driver it simulates.
"""

from __future__ import annotations

import pytest

from migscope.core._catalogue import find_model
from migscope.core._drivers import DriverVersion
from migscope.sim import Simulation


def profile_memory(driver: str, model: str) -> dict[str, int]:
    sim = Simulation.from_scenario(
        {"nodes": [{"name": "n", "driver": driver, "gpus": [{"model": model, "mig": False}]}]}
    )
    nvml = sim.node("n").nvml
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    out = {}
    for p in find_model(model).profiles:
        info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, p.nvml_index)
        out[str(info.name).removeprefix("MIG ")] = int(info.memorySizeMB)
    return out


@pytest.mark.parametrize("driver", ["550.54.15", "560.35.03", "580.159.04"])
def test_memory_sizes_are_the_simulated_drivers(driver: str) -> None:
    model = find_model("H100-NVL-94GB")
    got = profile_memory(driver, model.key)
    version = DriverVersion.parse(driver)
    assert got == {p.name: p.memory_mib_on(version) for p in model.profiles}


def test_r560_reports_the_larger_h100_nvl_sizes_and_other_drivers_the_reference() -> None:
    on_560 = profile_memory("560.35.03", "H100-NVL-94GB")
    on_550 = profile_memory("550.54.15", "H100-NVL-94GB")
    assert on_560["1g.12gb"] > on_550["1g.12gb"]
    assert on_550["1g.12gb"] == find_model("H100-NVL-94GB").profile("1g.12gb").memory_mib
