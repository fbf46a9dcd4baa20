"""Board power of a simulated GPU: idle watts plus dynamic watts times activity.

``P(t) = idle + (max − idle) × A(t)`` where ``A`` is the GPU-wide graphics activity: the
activity of the whole-GPU workload, or on a MIG GPU the sum over instances of each
instance's activity times its share of the compute slices (a busy 1g of 7 adds 1/7). The
energy counter is ``E0 + ∫ P dt``, computed exactly from the workloads' integrals, so it is
monotonic and ``ΔE/Δt`` over any window equals the average power the exporter should see.

Only the H200 numbers are measured (``fixtures/h200/nvml_probe.json``: 78 W idle, 689 W
under a bf16 matmul, 700 W limit). The others are the board TDP from NVIDIA's datasheets
and an idle draw of roughly a tenth of it; they only need to be plausible for demos.
"""

from __future__ import annotations

from dataclasses import dataclass

from migscope.core import GpuModel


@dataclass(frozen=True)
class PowerModel:
    """Idle and maximum board power of one GPU, in watts.

    Attributes:
        idle_watts: Draw with nothing running.
        max_watts: Draw at full activity; also the power limit NVML reports.
        source: Where the numbers come from.
    """

    idle_watts: float
    max_watts: float
    source: str = "assumed"

    @property
    def dynamic_watts(self) -> float:
        """Watts added between idle and full activity."""
        return self.max_watts - self.idle_watts


_DEFAULTS: dict[str, PowerModel] = {
    "H200-141GB": PowerModel(78.0, 700.0, "measured: H200 probe, 78 W idle, 700 W limit"),
    "A30-24GB": PowerModel(30.0, 165.0),
    "A100-40GB": PowerModel(50.0, 400.0),
    "A100-80GB": PowerModel(55.0, 400.0),
    "H100-80GB": PowerModel(70.0, 700.0),
    "H100-PCIE-80GB": PowerModel(50.0, 350.0),
    "H100-NVL-94GB": PowerModel(60.0, 400.0),
    "GH200-96GB": PowerModel(80.0, 700.0),
    "GH200-144GB": PowerModel(90.0, 900.0),
    "B200-180GB": PowerModel(120.0, 1000.0),
    "GB200-186GB": PowerModel(130.0, 1200.0),
    "B300-288GB": PowerModel(130.0, 1100.0),
    "GB300-279GB": PowerModel(140.0, 1400.0),
    "RTX-PRO-6000-96GB": PowerModel(30.0, 600.0),
}


def default_power(model: GpuModel) -> PowerModel:
    """The power model of ``model``: measured for the H200, datasheet-based otherwise."""
    return _DEFAULTS.get(model.key, PowerModel(60.0, 500.0, "assumed: unknown model"))
