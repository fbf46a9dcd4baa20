"""RTX PRO 6000 Blackwell: NVML counts placements in thirds of a memory slice.

The real board (driver 610.43.02, tests/fixtures/real/nvidia-smi/kubesimplify-rtx-pro-6000-*)
lists 1g.24gb at ``{0,3,6,9}:3`` and, after ``-cgi`` of a 2g.48gb and two 1g.24gb, the
instances at ``0:6``, ``6:3`` and ``9:3``. The simulated NVML must answer in those units, and
the exporter must publish ``migscope_mig_info{placement_start}`` in memory slices (what the
planner and docs/metrics.md use), while the profile table keeps NVML's own numbers, as
``-lgipp`` prints them.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import pynvml

from migscope.core._nvidia_smi import parse_lgi, parse_lgipp
from migscope.exporter._backends.nvml import NvmlBackend
from migscope.exporter._sampler import Sampler
from migscope.sim import Simulation

REAL = Path(__file__).parents[1] / "fixtures" / "real" / "nvidia-smi"
SCENARIO = {
    "seed": 3,
    "nodes": [
        {
            "name": "n",
            "gpus": [
                {
                    "model": "RTX-PRO-6000-96GB",
                    "mig": True,
                    "instances": [
                        {"profile": "2g.48gb", "start": 0},
                        {"profile": "1g.24gb", "start": 2},
                        {"profile": "1g.24gb", "start": 3},
                    ],
                }
            ],
        }
    ],
}


def test_the_simulated_nvml_answers_in_the_real_boards_units() -> None:
    sim = Simulation.from_scenario(SCENARIO)
    nvml = sim.node("n").nvml
    nvml.nvmlInit()
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    real_spans = {
        (row.start, row.size)
        for row in parse_lgi((REAL / "kubesimplify-rtx-pro-6000-lgi-mixed.txt").read_text())
    }
    spans = set()
    for gi in range(16):
        try:
            handle = nvml.nvmlDeviceGetGpuInstanceById(gpu, gi)
        except pynvml.NVMLError:
            continue
        info = nvml.nvmlGpuInstanceGetInfo(handle)
        spans.add((int(info.placement.start), int(info.placement.size)))
    assert spans == real_spans == {(0, 6), (6, 3), (9, 3)}
    real_lgipp = parse_lgipp((REAL / "kubesimplify-rtx-pro-6000-lgipp.txt").read_text())
    one_g = next(row for row in real_lgipp if row.profile_id == 14)
    info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    array = (pynvml.c_nvmlGpuInstancePlacement_t * 8)()
    count = ctypes.c_uint(8)
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(gpu, info.id, array, ctypes.byref(count))
    found = sorted((array[i].start, array[i].size) for i in range(count.value))
    assert found == [(start, one_g.size) for start in one_g.starts]


def test_the_exporter_publishes_placements_in_memory_slices() -> None:
    sim = Simulation.from_scenario(SCENARIO)
    backend = NvmlBackend(sim.node("n").nvml, name="sim", clock=sim.clock.elapsed)
    snap = Sampler(backend, interval=1.0, clock=sim.clock.elapsed).run_once()
    (gpu,) = snap.gpus
    assert sorted((m.profile, m.placement_start, m.placement_size) for m in gpu.instances) == [
        ("1g.24gb", 2, 1),
        ("1g.24gb", 3, 1),
        ("2g.48gb", 0, 2),
    ]
    assert gpu.memory_slices_free == 0
    table = {p.profile: p for p in gpu.mig_profiles}
    assert (table["1g.24gb"].placements, table["1g.24gb"].placement_size) == ((0, 3, 6, 9), 3)
