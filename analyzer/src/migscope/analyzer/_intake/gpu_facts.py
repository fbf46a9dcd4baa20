"""What the data says about each GPU itself: its model, its driver, and its own profile table.

The catalogue's profile names and memory sizes are facts *per
driver* (``7g.79gb`` on some A100 80GB drivers, H100 NVL 1g at 10.62 or 10.75 GiB), and a GPU
that reports its profile table (migscope's exporter reads it from NVML and publishes
``migscope_gpu_mig_profile_info``) knows better than any built-in table. Both file readers and
the Prometheus source read these label sets the same way, here, and hand the analysis a
:class:`GpuFacts` per GPU; :mod:`migscope.analyzer._intake.gpu_catalogue` decides what to plan with.

What each dialect gives:

============== ============================================ =====================================
               migscope                                     dcgm-exporter
============== ============================================ =====================================
model          ``migscope_gpu_info{model,name}``            ``modelName``
driver         ``migscope_gpu_info{driver_version}``        ``DCGM_FI_DRIVER_VERSION`` label
                                                            (``DCGM_FI_SYSTEM_DRIVER_VERSION``
                                                            from 4.9.0), when the counters
                                                            file has the label row
profile table  ``migscope_gpu_mig_profile_info`` per        none
               profile (ids, slices, SMs, memory,
               placements, engines)
============== ============================================ =====================================

The GPU is named by ``gpu_uuid`` (every migscope family), else ``uuid`` (migscope before the
label was made one name) or dcgm-exporter's ``UUID``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from migscope.core import (
    CatalogueError,
    DriverVersion,
    DriverVersionError,
    ObservedProfile,
    ProfileTable,
    find_model,
    model_for_name,
    parse_pci_device_id,
)

GPU_UUID_LABELS = ("gpu_uuid", "uuid", "UUID")
"""Where a GPU's UUID is read from, first set wins."""

DRIVER_LABELS = ("driver_version", "DCGM_FI_DRIVER_VERSION", "DCGM_FI_SYSTEM_DRIVER_VERSION")
"""Where a GPU's driver version is read from, first set wins."""

NodeOf = Callable[[Mapping[str, str]], str]
"""How a reader names the node of a label set (its node label, or its default)."""


@dataclass(frozen=True)
class GpuFacts:
    """One GPU as its own series describe it.

    Attributes:
        node: The node, named as the slices' keys name it.
        gpu_uuid: ``GPU-...``.
        model: Catalogue key of its model, or None when the model is not catalogued.
        driver: Its driver version, or None when the data does not say.
        table: The MIG profile table the GPU reported (NVML through migscope's exporter),
            or None: then only the built-in catalogue describes it.
    """

    node: str
    gpu_uuid: str
    model: str | None
    driver: DriverVersion | None
    table: ProfileTable | None = None


def _first(labels: Mapping[str, str], names: Iterable[str]) -> str:
    return next((labels[n] for n in names if labels.get(n)), "")


def parse_driver(text: str) -> DriverVersion | None:
    """A driver version label as a version, or None when it is missing or not a version."""
    if not text:
        return None
    try:
        return DriverVersion.parse(text)
    except DriverVersionError:
        return None


def _model_key(key: str, name: str) -> str | None:
    if key:
        try:
            return find_model(key).key
        except CatalogueError:
            pass
    found = model_for_name(name) if name else None
    return found.key if found is not None else None


def _int(labels: Mapping[str, str], name: str) -> int | None:
    text = labels.get(name, "")
    try:
        return int(text) if text else None
    except ValueError:
        return None


def _placements(text: str) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        return tuple(sorted(int(part) for part in text.split(",")))
    except ValueError:
        return None


def observed_profile(labels: Mapping[str, str]) -> ObservedProfile | None:
    """One ``migscope_gpu_mig_profile_info`` label set as a profile, or None if incomplete.

    The identity fields (name, id, compute slices, memory, SMs, instances) must all be
    there; placements and engine counts may be missing (an older exporter, or NVML that
    does not answer for the profile), and are then unknown rather than zero.
    """
    name = labels.get("profile", "")
    required = {
        field: _int(labels, field)
        for field in (
            "profile_id",
            "compute_slices",
            "memory_mib",
            "sm_count",
            "max_instances",
        )
    }
    if not name or any(value is None for value in required.values()):
        return None
    return ObservedProfile(
        name=name,
        profile_id=required["profile_id"] or 0,
        compute_slices=required["compute_slices"] or 0,
        memory_mib=required["memory_mib"] or 0,
        sm_count=required["sm_count"] or 0,
        max_instances=required["max_instances"] or 0,
        placements=_placements(labels.get("placements", "")),
        placement_size=_int(labels, "placement_size"),
        copy_engines=_int(labels, "copy_engines"),
        decoders=_int(labels, "decoders"),
        encoders=_int(labels, "encoders"),
        jpegs=_int(labels, "jpegs"),
        ofas=_int(labels, "ofas"),
    )


def migscope_gpu_facts(
    gpu_info: Iterable[Mapping[str, str]],
    profile_info: Iterable[Mapping[str, str]],
    *,
    node_of: NodeOf,
) -> list[GpuFacts]:
    """Each GPU of ``migscope_gpu_info``, with the profile table its exporter published.

    Args:
        gpu_info: Label sets of ``migscope_gpu_info`` (the newest per GPU wins).
        profile_info: Label sets of ``migscope_gpu_mig_profile_info``.
        node_of: How the reader names a label set's node.
    """
    profiles: dict[tuple[str, str], dict[str, ObservedProfile]] = defaultdict(dict)
    for labels in profile_info:
        profile = observed_profile(labels)
        if profile is not None:
            ident = (node_of(labels), _first(labels, GPU_UUID_LABELS))
            profiles[ident][profile.name or ""] = profile
    out: dict[tuple[str, str], GpuFacts] = {}
    for labels in gpu_info:
        gpu = _gpu(labels, node_of)
        if gpu is None:
            continue
        node, uuid, driver = gpu
        rows = profiles.get((node, uuid))
        table = None
        if rows:
            table = ProfileTable(
                source=f"NVML on {node}, GPU {uuid} (migscope_gpu_mig_profile_info)",
                gpu_name=labels.get("name") or None,
                pci_device_id=_pci(labels.get("pci_device_id", "")),
                driver=driver,
                profiles=tuple(sorted(rows.values(), key=lambda p: p.profile_id)),
            )
        out[(node, uuid)] = GpuFacts(
            node=node,
            gpu_uuid=uuid,
            model=_model_key(labels.get("model", ""), labels.get("name", "")),
            driver=driver,
            table=table,
        )
    return [out[k] for k in sorted(out)]


def _gpu(
    labels: Mapping[str, str], node_of: NodeOf
) -> tuple[str, str, DriverVersion | None] | None:
    """Node, GPU UUID and driver a label set names (None without a UUID)."""
    uuid = _first(labels, GPU_UUID_LABELS)
    if not uuid:
        return None
    return node_of(labels), uuid, parse_driver(_first(labels, DRIVER_LABELS))


def _pci(text: str) -> int | None:
    if not text:
        return None
    try:
        return parse_pci_device_id(text)
    except CatalogueError:
        return None


def dcgm_gpu_facts(label_sets: Iterable[Mapping[str, str]], *, node_of: NodeOf) -> list[GpuFacts]:
    """Each GPU that dcgm-exporter's series name, with the driver its label gives.

    dcgm-exporter publishes no profile table; a GPU's model comes from ``modelName``.
    """
    out: dict[tuple[str, str], GpuFacts] = {}
    for labels in label_sets:
        gpu = _gpu(labels, node_of)
        if gpu is None:
            continue
        node, uuid, driver = gpu
        known = out.get((node, uuid))
        if known is not None and (known.driver is not None or driver is None):
            continue
        out[(node, uuid)] = GpuFacts(
            node=node,
            gpu_uuid=uuid,
            model=_model_key("", labels.get("modelName", "")),
            driver=driver,
        )
    return [out[k] for k in sorted(out)]
