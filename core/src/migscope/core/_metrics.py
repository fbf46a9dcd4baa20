"""The metric-name contract between the exporter, the analyzer, the dashboards and the rules.

Every series migscope publishes is declared here once: name, type, unit, labels, help text and
where the value comes from. The exporter builds its metric families from these specs, the
analyzer and the dashboards query these names, ``docs/metrics.md`` is generated from them
(a test fails when the two differ), and names never change once shipped.

Conventions (Prometheus naming guide): one prefix, base units (``_bytes``, ``_watts``,
``_joules_total``, ``_seconds``, ``_ratio`` in 0..1), metadata in ``_info`` series with value 1
joined in PromQL rather than copied onto every series, no node label (the node is a target
label added by relabelling), and measured whole-GPU power never repeated per slice: the
per-slice figure is a separately named *estimate* whose sum per GPU is the measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PREFIX = "migscope"

GPU_UUID = "gpu_uuid"
"""The one label that names a GPU's ``GPU-<uuid>`` on every family, whole-GPU and per-slice
alike, so that ``migscope_mig_*`` and ``migscope_gpu_*`` join ``on (gpu_uuid)`` without
relabelling. (Until issue 13 the whole-GPU families called it ``uuid``; the analyzer still
reads that name in history recorded before the change.)"""

GPU_LABELS = ("gpu", GPU_UUID)
"""Identify a physical GPU: NVML index and ``GPU-<uuid>``."""

MIG_LABELS = ("gpu", GPU_UUID, "gpu_instance_id", "mig_uuid")
"""Identify a MIG slice: its GPU (index and UUID), NVML GPU-instance id, ``MIG-<uuid>``."""

HOLDER_LABELS = ("claim", "claim_namespace", "attribution")
"""Labels of the ``*_pod_info`` series after ``resource``: the ResourceClaim of a pod holding
the device through DRA (empty for device-plugin holders, so Prometheus drops them) and how the
holder was attributed: ``device-plugin``, ``dra-device-name`` or ``dra-cdi``."""

MetricType = Literal["gauge", "counter", "info"]


@dataclass(frozen=True)
class MetricSpec:
    """One metric family of the contract.

    Attributes:
        name: Full name without type suffixes added by the client library (counters are
            declared with their ``_total`` and info metrics with their ``_info``).
        type: ``gauge``, ``counter`` or ``info`` (a gauge with value 1).
        unit: Base unit, or ``""`` for counts and info series.
        labels: Label names, in exposition order.
        help: HELP text: what it is and, where it matters, how it is computed.
        source: Where the value comes from (NVML call, DCGM field, kubelet, computation).
    """

    name: str
    type: MetricType
    unit: str
    labels: tuple[str, ...]
    help: str
    source: str


def _m(
    name: str, type_: MetricType, unit: str, labels: tuple[str, ...], help_: str, source: str
) -> MetricSpec:
    return MetricSpec(f"{PREFIX}_{name}", type_, unit, labels, help_, source)


_INTEGRAL = (
    " Integrated by the sampler from the same GPM windows as the ratio (each window's ratio x its"
    " length, added to the integral at the window's start), so rate() over any range is the exact"
    " mean over that range, whatever the scrape interval; starts at 0 when the exporter first sees"
)

_GPM = "NVML GPM (nvmlGpmMigSampleGet/nvmlGpmSampleGet + nvmlGpmMetricsGet, two samples one interval apart) or DCGM field"

METRICS: tuple[MetricSpec, ...] = (
    # --- whole GPU -------------------------------------------------------------------------
    _m(
        "gpu_info",
        "info",
        "",
        (*GPU_LABELS, "model", "name", "pci_bus_id", "pci_device_id", "driver_version", "mig_mode"),
        "A GPU on this node: catalogue model, NVML name, PCI identity, driver, MIG mode (enabled/disabled).",
        "nvmlDeviceGetName, nvmlDeviceGetPciInfo, nvmlSystemGetDriverVersion, nvmlDeviceGetMigMode",
    ),
    _m(
        "gpu_power_watts",
        "gauge",
        "watts",
        GPU_LABELS,
        "Measured board power of the whole GPU. Per-slice power does not exist in hardware; see migscope_mig_power_estimated_watts.",
        "nvmlDeviceGetPowerUsage (mW) / DCGM 155",
    ),
    _m(
        "gpu_energy_joules_total",
        "counter",
        "joules",
        GPU_LABELS,
        "Energy the whole GPU consumed since the driver loaded (read every energy interval, not every sample: it costs ~3 ms).",
        "nvmlDeviceGetTotalEnergyConsumption (mJ) / DCGM 156",
    ),
    _m(
        "gpu_memory_total_bytes",
        "gauge",
        "bytes",
        GPU_LABELS,
        "Framebuffer size of the whole GPU.",
        "nvmlDeviceGetMemoryInfo v2",
    ),
    _m(
        "gpu_memory_used_bytes",
        "gauge",
        "bytes",
        GPU_LABELS,
        "Framebuffer in use on the whole GPU, reserved memory excluded (all slices together in MIG mode).",
        "nvmlDeviceGetMemoryInfo v2",
    ),
    _m(
        "gpu_graphics_active_ratio",
        "gauge",
        "ratio",
        GPU_LABELS,
        "Fraction of time the graphics/compute engine was active, whole GPU (MIG disabled only).",
        _GPM + " 1001",
    ),
    _m(
        "gpu_graphics_active_seconds_total",
        "counter",
        "seconds",
        GPU_LABELS,
        "Seconds the graphics/compute engine was active, whole GPU (MIG disabled only): the integral over time of migscope_gpu_graphics_active_ratio."
        + _INTEGRAL
        + " the GPU, and again when MIG is switched off.",
        "integral of migscope_gpu_graphics_active_ratio (" + _GPM + ")",
    ),
    _m(
        "gpu_sm_active_ratio",
        "gauge",
        "ratio",
        GPU_LABELS,
        "Fraction of SM cycles with at least one warp resident, whole GPU (MIG disabled only).",
        _GPM + " 1002",
    ),
    _m(
        "gpu_sm_active_seconds_total",
        "counter",
        "seconds",
        GPU_LABELS,
        "SM-seconds with a warp resident, as a fraction of all SMs (seconds of full SM activity), whole GPU (MIG disabled only): the integral over time of migscope_gpu_sm_active_ratio."
        + _INTEGRAL
        + " the GPU, and again when MIG is switched off.",
        "integral of migscope_gpu_sm_active_ratio (" + _GPM + ")",
    ),
    _m(
        "gpu_tensor_active_ratio",
        "gauge",
        "ratio",
        GPU_LABELS,
        "Fraction of cycles any tensor pipe was active, whole GPU (MIG disabled only).",
        _GPM + " 1004",
    ),
    _m(
        "gpu_tensor_active_seconds_total",
        "counter",
        "seconds",
        GPU_LABELS,
        "Seconds of full tensor-pipe activity, whole GPU (MIG disabled only): the integral over time of migscope_gpu_tensor_active_ratio."
        + _INTEGRAL
        + " the GPU, and again when MIG is switched off.",
        "integral of migscope_gpu_tensor_active_ratio (" + _GPM + ")",
    ),
    _m(
        "gpu_dram_active_ratio",
        "gauge",
        "ratio",
        GPU_LABELS,
        "Fraction of peak DRAM bandwidth used, whole GPU (MIG disabled only).",
        _GPM + " 1005",
    ),
    _m(
        "gpu_dram_active_seconds_total",
        "counter",
        "seconds",
        GPU_LABELS,
        "Seconds at full DRAM bandwidth (bandwidth used integrated over time, as a fraction of peak), whole GPU (MIG disabled only): the integral over time of migscope_gpu_dram_active_ratio."
        + _INTEGRAL
        + " the GPU, and again when MIG is switched off.",
        "integral of migscope_gpu_dram_active_ratio (" + _GPM + ")",
    ),
    _m(
        "gpu_compute_slices",
        "gauge",
        "",
        GPU_LABELS,
        "Compute slices of the GPU when MIG is enabled (7, or 4 on A30).",
        "MIG catalogue",
    ),
    _m(
        "gpu_compute_slices_free",
        "gauge",
        "",
        GPU_LABELS,
        "Compute slices no GPU instance holds: capacity the current layout leaves unused.",
        "catalogue profiles of the enumerated GPU instances",
    ),
    _m(
        "gpu_memory_slices",
        "gauge",
        "",
        GPU_LABELS,
        "Memory slices of the GPU when MIG is enabled (8, or 4 on A30).",
        "MIG catalogue",
    ),
    _m(
        "gpu_memory_slices_free",
        "gauge",
        "",
        GPU_LABELS,
        "Memory slices no GPU instance holds.",
        "placements of the enumerated GPU instances",
    ),
    _m(
        "gpu_mig_layout_info",
        "info",
        "",
        (*GPU_LABELS, "layout"),
        "The GPU's current MIG layout, largest instance first, e.g. '3g.71gb,2g.35gb,1g.18gb,1g.18gb' ('' when MIG is enabled with no instance).",
        "enumerated GPU instances",
    ),
    _m(
        "gpu_mig_profile_info",
        "info",
        "",
        (
            "gpu",
            "gpu_uuid",
            "profile",
            "profile_id",
            "compute_slices",
            "memory_mib",
            "sm_count",
            "max_instances",
            "placements",
            "placement_size",
            "copy_engines",
            "decoders",
            "encoders",
            "jpegs",
            "ofas",
        ),
        "A GPU-instance profile the GPU's own driver offers (nvidia-smi mig -lgip/-lgipp), MIG enabled or not: name, NVML id, slices, memory in MiB, SMs, most instances, placement starts (ascending, comma-separated) and size as NVML counts them (memory slices; thirds of one on RTX PRO 6000, as -lgipp prints), engines. Read once per GPU, not every sample.",
        "nvmlDeviceGetGpuInstanceProfileInfo (v2, every NVML_GPU_INSTANCE_PROFILE_* index), nvmlDeviceGetGpuInstancePossiblePlacements_v2",
    ),
    _m(
        "gpu_pod_info",
        "info",
        "",
        (*GPU_LABELS, "namespace", "pod", "container", "resource", *HOLDER_LABELS),
        "A pod container holding the whole GPU: through the device plugin (resource nvidia.com/gpu, attribution device-plugin) or a ResourceClaim (resource = the DRA driver, gpu.nvidia.com; claim and claim_namespace set; attribution dra-device-name or dra-cdi: how the DRA device was resolved, docs/pod-attribution.md).",
        "kubelet PodResources v1 List (devices; dynamic_resources resolved by device minor number)",
    ),
    # --- MIG slices (GPU instances) -----------------------------------------------------------
    _m(
        "mig_info",
        "info",
        "",
        (
            *MIG_LABELS,
            "profile",
            "profile_id",
            "placement_start",
            "placement_size",
            "compute_slices",
            "memory_slices",
        ),
        "A MIG slice (GPU instance): profile, NVML profile id and placement in memory slices.",
        "nvmlDeviceGetMigDeviceHandleByIndex, nvmlGpuInstanceGetInfo, MIG catalogue",
    ),
    _m(
        "mig_pod_info",
        "info",
        "",
        (*MIG_LABELS, "namespace", "pod", "container", "resource", *HOLDER_LABELS),
        "A pod container holding the MIG slice: through the device plugin (resource nvidia.com/mig-<profile>, or nvidia.com/gpu under the single strategy; attribution device-plugin) or a ResourceClaim (resource = the DRA driver, gpu.nvidia.com; claim and claim_namespace set; attribution dra-device-name or dra-cdi: how the DRA device was resolved to the GPU instance, docs/pod-attribution.md).",
        "kubelet PodResources v1 List (devices by MIG UUID; dynamic_resources by GPU minor, GI profile id and placement start)",
    ),
    _m(
        "mig_graphics_active_ratio",
        "gauge",
        "ratio",
        MIG_LABELS,
        "Fraction of time the slice's graphics/compute engine was active, relative to the slice. Needs two samples one interval apart; absent on Ampere without DCGM.",
        _GPM + " 1001",
    ),
    _m(
        "mig_graphics_active_seconds_total",
        "counter",
        "seconds",
        MIG_LABELS,
        "Seconds the graphics/compute engine was active, per slice: the integral over time of migscope_mig_graphics_active_ratio."
        + _INTEGRAL
        + " the slice, and again when its GPU instance is re-created (new mig_uuid).",
        "integral of migscope_mig_graphics_active_ratio (" + _GPM + ")",
    ),
    _m(
        "mig_sm_active_ratio",
        "gauge",
        "ratio",
        MIG_LABELS,
        "Fraction of the slice's SM cycles with a warp resident.",
        _GPM + " 1002",
    ),
    _m(
        "mig_sm_active_seconds_total",
        "counter",
        "seconds",
        MIG_LABELS,
        "SM-seconds with a warp resident, as a fraction of all SMs (seconds of full SM activity), per slice: the integral over time of migscope_mig_sm_active_ratio."
        + _INTEGRAL
        + " the slice, and again when its GPU instance is re-created (new mig_uuid).",
        "integral of migscope_mig_sm_active_ratio (" + _GPM + ")",
    ),
    _m(
        "mig_sm_occupancy_ratio",
        "gauge",
        "ratio",
        MIG_LABELS,
        "Resident warps relative to the slice's theoretical maximum.",
        _GPM + " 1003",
    ),
    _m(
        "mig_tensor_active_ratio",
        "gauge",
        "ratio",
        MIG_LABELS,
        "Fraction of cycles a tensor pipe of the slice was active.",
        _GPM + " 1004",
    ),
    _m(
        "mig_tensor_active_seconds_total",
        "counter",
        "seconds",
        MIG_LABELS,
        "Seconds of full tensor-pipe activity, per slice: the integral over time of migscope_mig_tensor_active_ratio."
        + _INTEGRAL
        + " the slice, and again when its GPU instance is re-created (new mig_uuid).",
        "integral of migscope_mig_tensor_active_ratio (" + _GPM + ")",
    ),
    _m(
        "mig_dram_active_ratio",
        "gauge",
        "ratio",
        MIG_LABELS,
        "Fraction of the slice's share of peak DRAM bandwidth used.",
        _GPM + " 1005",
    ),
    _m(
        "mig_dram_active_seconds_total",
        "counter",
        "seconds",
        MIG_LABELS,
        "Seconds at full DRAM bandwidth (bandwidth used integrated over time, as a fraction of peak), per slice: the integral over time of migscope_mig_dram_active_ratio."
        + _INTEGRAL
        + " the slice, and again when its GPU instance is re-created (new mig_uuid).",
        "integral of migscope_mig_dram_active_ratio (" + _GPM + ")",
    ),
    _m(
        "mig_memory_used_bytes",
        "gauge",
        "bytes",
        MIG_LABELS,
        "Framebuffer in use on the slice, reserved memory excluded.",
        "nvmlDeviceGetMemoryInfo v2 on the MIG device handle / DCGM 252",
    ),
    _m(
        "mig_memory_total_bytes",
        "gauge",
        "bytes",
        MIG_LABELS,
        "Framebuffer size of the slice.",
        "nvmlDeviceGetMemoryInfo v2 on the MIG device handle / DCGM 250",
    ),
    _m(
        "mig_processes",
        "gauge",
        "",
        MIG_LABELS,
        "Compute processes running on the slice.",
        "nvmlDeviceGetComputeRunningProcesses on the MIG device handle",
    ),
    _m(
        "mig_power_estimated_watts",
        "gauge",
        "watts",
        MIG_LABELS,
        "ESTIMATED share of the GPU's measured power: idle power split by memory slices held, the rest by activity x SMs; sums to migscope_gpu_power_watts per GPU (docs/metrics.md).",
        "computed from migscope_gpu_power_watts and slice activity",
    ),
    _m(
        "mig_energy_estimated_joules_total",
        "counter",
        "joules",
        MIG_LABELS,
        "ESTIMATED energy of the slice since the exporter saw it: the estimated power integrated over time.",
        "computed",
    ),
    # --- the exporter itself ----------------------------------------------------------------
    _m(
        "collector_success",
        "gauge",
        "",
        ("collector",),
        "1 if the collector's last run succeeded, 0 if it failed (its metrics are then missing or stale).",
        "exporter",
    ),
    _m(
        "collector_duration_seconds",
        "gauge",
        "seconds",
        ("collector",),
        "Wall time of the collector's last run.",
        "exporter",
    ),
    _m(
        "collector_last_success_timestamp_seconds",
        "gauge",
        "seconds",
        ("collector",),
        "Unix time of the collector's last successful run (0 if never).",
        "exporter",
    ),
    _m(
        "exporter_build_info",
        "info",
        "",
        ("version", "python_version", "backend"),
        "The running exporter: migscope version, Python version, hardware backend (nvml, dcgm, sim).",
        "exporter",
    ),
)

_BY_NAME = {spec.name: spec for spec in METRICS}


def metric(name: str) -> MetricSpec:
    """The spec called ``name`` (with or without the ``migscope_`` prefix).

    Raises:
        KeyError: no such metric in the contract; a typo in exporter or analyzer code should
            fail loudly rather than publish or query a name nobody else knows.
    """
    key = name if name.startswith(f"{PREFIX}_") else f"{PREFIX}_{name}"
    return _BY_NAME[key]


def metrics_table() -> str:
    """The Markdown table of every metric, as docs/metrics.md carries it (kept in sync by a test)."""
    rows = [
        "| metric | type | unit | labels | meaning | source |",
        "|---|---|---|---|---|---|",
    ]
    for spec in METRICS:
        labels = ", ".join(f"`{label}`" for label in spec.labels)
        cells = [f"`{spec.name}`", spec.type, spec.unit or "-", labels, spec.help, spec.source]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"


DcgmType = Literal["gauge", "counter", "label"]
"""A row's type in dcgm-exporter's collectors CSV: a series of that TYPE, or a label."""

DcgmValue = Literal["int64", "double", "string"]
"""DCGM's field type: dcgm-exporter prints int64 with ``%d`` and double with ``%f``."""


@dataclass(frozen=True)
class DcgmCompatSpec:
    """A dcgm-exporter field migscope can also publish (``--dcgm-compat``), and its source.

    Attributes:
        name: The DCGM field name, which is also dcgm-exporter's series name.
        field_id: DCGM's field number (``dcgm_fields.h``); dcgm-exporter writes its families
            in this order.
        type: The type dcgm-exporter's ``etc/default-counters.csv`` gives the field (a
            collectors file may say otherwise; its word is then used).
        value: DCGM's field type, which decides how the value is printed.
        help: The HELP text of ``etc/default-counters.csv``.
        default: Whether ``etc/default-counters.csv`` enables the field (commented-out rows
            are not emitted unless a collectors file enables them).
        source: The migscope reading the value is made from, in DCGM's unit.
        aliases: Other names of the same field in the same unit: DCGM 4.6+ renamed fields
            (``dcgm_fields.h`` keeps the old names as ``#define`` aliases), and dcgm-exporter
            4.9+'s collectors files use the new ones (renamed fields whose unit changed,
            framebuffer and energy, are not listed: their new names are not verified here).
    """

    name: str
    field_id: int
    type: DcgmType
    value: DcgmValue
    help: str
    default: bool
    source: str
    aliases: tuple[str, ...] = ()


DCGM_COMPAT: tuple[DcgmCompatSpec, ...] = (
    DcgmCompatSpec(
        "DCGM_FI_DRIVER_VERSION",
        1,
        "label",
        "string",
        "Driver Version",
        True,
        "nvmlSystemGetDriverVersion (migscope_gpu_info's driver_version)",
        ("DCGM_FI_SYSTEM_DRIVER_VERSION",),
    ),
    DcgmCompatSpec(
        "DCGM_FI_DEV_POWER_USAGE",
        155,
        "gauge",
        "double",
        "Power draw (in W).",
        True,
        "migscope_gpu_power_watts, once per GPU (never repeated per slice)",
        ("DCGM_FI_DEV_BOARD_POWER_WATTS",),
    ),
    DcgmCompatSpec(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        156,
        "counter",
        "int64",
        "Total energy consumption since boot (in mJ).",
        True,
        "migscope_gpu_energy_joules_total x 1000, once per GPU",
    ),
    DcgmCompatSpec(
        "DCGM_FI_DEV_FB_FREE",
        251,
        "gauge",
        "int64",
        "Framebuffer memory free (in MiB).",
        True,
        "nvmlDeviceGetMemoryInfo v2 free (total - used - reserved), floored to MiB",
    ),
    DcgmCompatSpec(
        "DCGM_FI_DEV_FB_USED",
        252,
        "gauge",
        "int64",
        "Framebuffer memory used (in MiB).",
        True,
        "migscope_mig_memory_used_bytes / migscope_gpu_memory_used_bytes, floored to MiB",
    ),
    DcgmCompatSpec(
        "DCGM_FI_DEV_FB_RESERVED",
        253,
        "gauge",
        "int64",
        "Framebuffer memory reserved (in MiB).",
        True,
        "nvmlDeviceGetMemoryInfo v2 reserved, floored to MiB",
    ),
    DcgmCompatSpec(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        1001,
        "gauge",
        "double",
        "Ratio of time the graphics engine is active.",
        True,
        "migscope_mig_graphics_active_ratio / migscope_gpu_graphics_active_ratio",
        ("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",),
    ),
    DcgmCompatSpec(
        "DCGM_FI_PROF_SM_ACTIVE",
        1002,
        "gauge",
        "double",
        "The ratio of cycles an SM has at least 1 warp assigned.",
        False,
        "migscope_mig_sm_active_ratio / migscope_gpu_sm_active_ratio",
        ("DCGM_FI_PROF_SM_UTIL_RATIO",),
    ),
    DcgmCompatSpec(
        "DCGM_FI_PROF_SM_OCCUPANCY",
        1003,
        "gauge",
        "double",
        "The ratio of number of warps resident on an SM.",
        False,
        "migscope_mig_sm_occupancy_ratio (GPM, per slice)",
        ("DCGM_FI_PROF_SM_OCCUPANCY_RATIO",),
    ),
    DcgmCompatSpec(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        1004,
        "gauge",
        "double",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        True,
        "migscope_mig_tensor_active_ratio / migscope_gpu_tensor_active_ratio",
        ("DCGM_FI_PROF_TENSOR_UTIL_RATIO",),
    ),
    DcgmCompatSpec(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        1005,
        "gauge",
        "double",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        True,
        "migscope_mig_dram_active_ratio / migscope_gpu_dram_active_ratio",
        ("DCGM_FI_PROF_DRAM_UTIL_RATIO",),
    ),
)
"""The dcgm-exporter fields migscope can make from its own readings, in field-id order.

Labels, as dcgm-exporter 3.3.7+ writes them (``internal/pkg/rendermetrics``): ``gpu, UUID,
pci_bus_id, device, modelName[, GPU_I_PROFILE, GPU_I_ID][, Hostname][, DCGM_FI_DRIVER_VERSION]
[, container, namespace, pod]``. A MIG GPU's slices carry the per-instance fields; a GPU with
MIG off (or MIG on and no instance) carries them whole-GPU. Power and energy go out once per
GPU, never per slice: dcgm-exporter repeats the board's figures on every slice (#257, #353),
so ``sum()`` over them over-counts. docs/dcgm.md lists every field of dcgm-exporter's default
file and what migscope does with it."""
