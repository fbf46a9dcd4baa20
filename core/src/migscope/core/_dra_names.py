r"""NVIDIA's DRA device names, read the same way by the exporter and the applier.

NVIDIA's DRA driver (``gpu.nvidia.com``, kubernetes-sigs/dra-driver-nvidia-gpu) names each
device it publishes after where it is (docs/dra-sources.md §4):

* ``gpu-<minor>``: a whole GPU, by its ``/dev/nvidia<minor>`` minor number;
* ``gpu-<minor>-mig-<profile>-<GI profile id>-<placement start>`` (driver v25.12.0 and later,
  static MIG and DynamicMIG alike: ``ToCanonicalName``), where ``<profile>`` is the profile
  name with its dots removed and made RFC 1123 (:func:`profile_key`);
* ``gpu-<minor>-mig-<GI profile id>-<placement start>-<placement size>`` (v25.3 to v25.8,
  static MIG), e.g. ``gpu-1-mig-19-4-1``.

The two MIG forms have the same number of dash-separated parts, and the driver's own regex
(``^gpu-(\d+)-mig-(.+)-(\d+)-(\d+)$``) reads the older one as a profile called ``19``. The
form is decided here by the middle part instead: a profile name always contains a letter
(``1g12gb``), a GI profile id never does. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

#: NVIDIA's DRA driver name (kubernetes-sigs/dra-driver-nvidia-gpu, DeviceClasses
#: ``gpu.nvidia.com`` and ``mig.nvidia.com``; every device's driver is ``gpu.nvidia.com``).
NVIDIA_DRIVER = "gpu.nvidia.com"

_WHOLE = re.compile(r"^gpu-(?P<minor>\d+)$")
_MIG = re.compile(r"^gpu-(?P<minor>\d+)-mig-(?P<middle>.+)-(?P<a>\d+)-(?P<b>\d+)$")
_LEGACY_ID = re.compile(r"^\d+$")
# What toRFC1123Compliant leaves of a profile name without dots: lower-case letters, digits
# and inner dashes, and at least one letter (a profile name has its "g" and "gb").
_PNAME = re.compile(r"^(?=[a-z0-9-]*[a-z])[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def profile_key(profile: str) -> str:
    """A profile as the driver writes it in a device name: ``1g.18gb+me`` -> ``1g18gb-me``.

    ``toRFC1123Compliant(strings.ReplaceAll(profile, ".", ""))``: dots removed, lower case,
    anything else outside ``[a-z0-9-]`` a ``-``, ``-`` trimmed. ``+me`` and ``-me`` become
    alike, so a caller deciding safety errs on the side of the pod.
    """
    text = re.sub(r"[^a-z0-9-]", "-", profile.replace(".", "").lower())
    return text.strip("-")


@dataclass(frozen=True)
class DeviceName:
    """A ``gpu.nvidia.com`` device name taken apart.

    Attributes:
        kind: ``"gpu"`` (a whole GPU) or ``"mig"`` (a GPU instance).
        form: ``"gpu"``, ``"canonical"`` (v25.12.0+) or ``"legacy"`` (v25.3-v25.8).
        minor: The parent GPU's device minor (``nvmlDeviceGetMinorNumber``), not its index.
        profile_id: NVML GI profile id (``nvidia-smi mig -lgip``'s ID); None for a GPU.
        placement_start: GI placement start in NVML's units (``nvmlGpuInstanceGetInfo``'s
            ``placement.start``); None for a GPU.
        profile: The name's profile part (``1g12gb``), canonical form only.
        placement_size: The placement size, legacy form only.
    """

    kind: Literal["gpu", "mig"]
    form: Literal["gpu", "canonical", "legacy"]
    minor: int
    profile_id: int | None = None
    placement_start: int | None = None
    profile: str | None = None
    placement_size: int | None = None


def parse_device_name(name: str) -> DeviceName | None:
    """Read a ``gpu.nvidia.com`` device name; None when it is in no form the driver emits.

    None for the names NVIDIA's docs illustrate but no driver emits (``gpu-0-mig-1g.5gb-0``:
    dots are not allowed in a DRA device name), for development-era names
    (``gpu-0-mig-1g24gb-0``), VFIO devices (``gpu-vfio-0``) and anything else.
    """
    whole = _WHOLE.match(name)
    if whole:
        return DeviceName("gpu", "gpu", int(whole.group("minor")))
    mig = _MIG.match(name)
    if not mig:
        return None
    minor, middle = int(mig.group("minor")), mig.group("middle")
    a, b = int(mig.group("a")), int(mig.group("b"))
    if _LEGACY_ID.match(middle):  # gpu-<minor>-mig-<id>-<start>-<size>
        return DeviceName("mig", "legacy", minor, int(middle), a, placement_size=b)
    if _PNAME.match(middle):
        return DeviceName("mig", "canonical", minor, a, b, profile=middle)
    return None
