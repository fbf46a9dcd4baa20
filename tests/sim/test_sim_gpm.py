"""GPM semantics (Hopper+ per-GI activity, ``reference/nvml-dcgm.md`` §2), one test each."""

from __future__ import annotations

import math

import pynvml
import pytest
from simhelpers import gpm_metrics, mig_devices, started

GRAPHICS, SM, DRAM = (
    pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL,
    pynvml.NVML_GPM_METRIC_SM_UTIL,
    pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
)

TWO_SLICES = {
    "model": "H100-80GB",
    "mig": True,
    "instances": [
        {
            "profile": "4g.40gb",
            "start": 0,
            "workload": {"pattern": "constant", "level": 0.8, "mix": {"sm": 0.5, "dram": 0.25}},
        },
        {
            "profile": "3g.40gb",
            "start": 4,
            "workload": {"pattern": "periodic", "period": "10s", "duty": 0.3},
        },
    ],
}


def test_support_hopper_yes_ampere_no() -> None:
    """``isSupportedDevice`` is 1 on Hopper, 0 on Ampere; Ampere sampling is NOT_SUPPORTED
    ("Hopper or newer only", §2)."""
    _, nvml = started({"model": "H100-80GB"}, {"model": "A100-80GB"})
    hopper, ampere = (nvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    assert nvml.nvmlGpmQueryDeviceSupport(hopper).isSupportedDevice == 1
    assert nvml.nvmlGpmQueryDeviceSupport(ampere).isSupportedDevice == 0
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlGpmSampleGet(ampere, nvml.nvmlGpmSampleAlloc())


def test_mig_sample_needs_mig_and_a_known_gi() -> None:
    """``nvmlGpmMigSampleGet``: INVALID_ARGUMENT with MIG off (measured on the H200, §2),
    NOT_FOUND for a GI id the GPU does not have."""
    _, nvml = started({"model": "H200"}, TWO_SLICES)
    plain, mig_gpu = (nvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlGpmMigSampleGet(plain, 0, nvml.nvmlGpmSampleAlloc())
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlGpmMigSampleGet(mig_gpu, 13, nvml.nvmlGpmSampleAlloc())


def test_metrics_are_percent_averages_over_the_interval() -> None:
    """Metrics are percentages over the interval between the samples (§2), relative to the
    instance: a 4g at constant 0.8 with an SM factor of 0.5 reads 80 % / 40 % / 20 %; a
    30 % duty square wave reads 30 % over whole periods."""
    sim, nvml = started(TWO_SLICES)
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    sim.clock.advance(100)
    first = {gi: nvml.nvmlGpmMigSampleGet(gpu, gi, nvml.nvmlGpmSampleAlloc()) for gi in (1, 2)}
    sim.clock.advance(20)  # two whole periods of the square wave
    second = {gi: nvml.nvmlGpmMigSampleGet(gpu, gi, nvml.nvmlGpmSampleAlloc()) for gi in (1, 2)}
    big = gpm_metrics(nvml, first[1], second[1], [GRAPHICS, SM, DRAM])
    assert [(m, r) for m, r, _ in big] == [(GRAPHICS, 0), (SM, 0), (DRAM, 0)]
    assert [v for _, _, v in big] == pytest.approx([80.0, 40.0, 20.0])
    small = gpm_metrics(nvml, first[2], second[2], [GRAPHICS])
    assert small[0][2] == pytest.approx(30.0)


def test_device_sample_in_mig_mode_weights_instances_by_slices() -> None:
    """A GPU-level sample of a MIG GPU sums instance activity weighted by compute slices:
    4/7 × 80 % + 3/7 × 30 %."""
    sim, nvml = started(TWO_SLICES)
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    s1 = nvml.nvmlGpmSampleGet(gpu, nvml.nvmlGpmSampleAlloc())
    sim.clock.advance(30)
    s2 = nvml.nvmlGpmSampleGet(gpu, nvml.nvmlGpmSampleAlloc())
    (graphics,) = gpm_metrics(nvml, s1, s2, [GRAPHICS])
    assert graphics[2] == pytest.approx(100 * (4 / 7 * 0.8 + 3 / 7 * 0.3))


def test_mig_handle_sample_equals_gi_sample_values() -> None:
    """``nvmlGpmSampleGet(migHandle)`` and ``nvmlGpmMigSampleGet(parent, gi)`` measure the
    same single-CI instance; mixing the two kinds in one MetricsGet is refused."""
    sim, nvml = started(TWO_SLICES)
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    mig = mig_devices(nvml, gpu)[0]
    a1 = nvml.nvmlGpmSampleGet(mig, nvml.nvmlGpmSampleAlloc())
    b1 = nvml.nvmlGpmMigSampleGet(gpu, 1, nvml.nvmlGpmSampleAlloc())
    sim.clock.advance(5)
    a2 = nvml.nvmlGpmSampleGet(mig, nvml.nvmlGpmSampleAlloc())
    b2 = nvml.nvmlGpmMigSampleGet(gpu, 1, nvml.nvmlGpmSampleAlloc())
    assert gpm_metrics(nvml, a1, a2, [GRAPHICS]) == gpm_metrics(nvml, b1, b2, [GRAPHICS])
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        gpm_metrics(nvml, a1, b2, [GRAPHICS])


def test_samples_from_different_gis_are_invalid() -> None:
    """Samples of two different GPU instances cannot be combined: INVALID_ARGUMENT."""
    sim, nvml = started(TWO_SLICES)
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    s1 = nvml.nvmlGpmMigSampleGet(gpu, 1, nvml.nvmlGpmSampleAlloc())
    sim.clock.advance(1)
    s2 = nvml.nvmlGpmMigSampleGet(gpu, 2, nvml.nvmlGpmSampleAlloc())
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        gpm_metrics(nvml, s1, s2, [GRAPHICS])


def test_samples_closer_than_the_refresh_tick() -> None:
    """Counters refresh every 100 ms (nvml.h: samples should be more than 100 ms apart):
    two samples in one tick give 0.0 with SUCCESS, and NaN for DRAM_BW_UTIL, as the H200 did
    for samples 20 ms apart (``h200_nvml_probe.json`` ``gpm_device_20ms``)."""
    sim, nvml = started(TWO_SLICES)
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    sim.clock.advance(10.01)
    s1 = nvml.nvmlGpmMigSampleGet(gpu, 1, nvml.nvmlGpmSampleAlloc())
    sim.clock.advance(0.05)
    s2 = nvml.nvmlGpmMigSampleGet(gpu, 1, nvml.nvmlGpmSampleAlloc())
    (graphics, dram) = gpm_metrics(nvml, s1, s2, [GRAPHICS, DRAM])
    assert graphics == (GRAPHICS, 0, 0.0)
    assert dram[:2] == (DRAM, 0)
    assert math.isnan(dram[2])
    sim.clock.advance(0.1)
    s3 = nvml.nvmlGpmMigSampleGet(gpu, 1, nvml.nvmlGpmSampleAlloc())
    assert gpm_metrics(nvml, s1, s3, [GRAPHICS])[0][2] == pytest.approx(80.0)


def test_sample_buffer_errors() -> None:
    """Unfilled samples: per-metric UNINITIALIZED; an unknown metric id: per-metric
    INVALID_ARGUMENT; a freed sample or wrong version: call-level errors (all measured,
    ``h200_semantics_1.txt``)."""
    sim, nvml = started(TWO_SLICES)
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    fresh1, fresh2 = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
    assert gpm_metrics(nvml, fresh1, fresh2, [GRAPHICS, 999]) == [
        (GRAPHICS, pynvml.NVML_ERROR_UNINITIALIZED, 0.0),
        (999, pynvml.NVML_ERROR_INVALID_ARGUMENT, 0.0),
    ]
    nvml.nvmlGpmMigSampleGet(gpu, 1, fresh1)
    sim.clock.advance(1)
    nvml.nvmlGpmMigSampleGet(gpu, 1, fresh2)
    mg = nvml.c_nvmlGpmMetricsGet_t()
    mg.version, mg.numMetrics, mg.sample1, mg.sample2 = 2, 1, fresh1, fresh2
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        nvml.nvmlGpmMetricsGet(mg)
    nvml.nvmlGpmSampleFree(fresh2)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        gpm_metrics(nvml, fresh1, fresh2, [GRAPHICS])
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlGpmSampleFree(fresh2)


def test_pcie_is_board_level_only() -> None:
    """PCIe throughput (MiB/s) comes with whole-GPU samples; on GI samples it is
    NOT_SUPPORTED (our choice; dcgm-exporter has no PCIe series per GI, ``samples.md`` §1)."""
    sim, nvml = started({"model": "H200"}, TWO_SLICES)
    plain, mig_gpu = (nvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    tx = pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC
    d1 = nvml.nvmlGpmSampleGet(plain, nvml.nvmlGpmSampleAlloc())
    g1 = nvml.nvmlGpmMigSampleGet(mig_gpu, 1, nvml.nvmlGpmSampleAlloc())
    sim.clock.advance(1)
    d2 = nvml.nvmlGpmSampleGet(plain, nvml.nvmlGpmSampleAlloc())
    g2 = nvml.nvmlGpmMigSampleGet(mig_gpu, 1, nvml.nvmlGpmSampleAlloc())
    assert gpm_metrics(nvml, d1, d2, [tx]) == [(tx, 0, 2.0)]
    assert gpm_metrics(nvml, g1, g2, [tx])[0][1] == pynvml.NVML_ERROR_NOT_SUPPORTED
