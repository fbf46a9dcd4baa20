"""Identifiers a simulated GPU hands out: UUIDs, GPU-instance ids, PCI bus ids, pids.

Everything here is a pure function of the scenario seed and the object's place in the
scenario, so that two runs with the same seed enumerate identical devices whatever the call
order, and a different seed gives different (but equally valid) identifiers.

**GPU-instance ids.** NVML numbers GPU instances by where they sit, not by creation order.
All recorded cases fit one rule: treat the GPU's memory slices as a binary tree (the whole
GPU at the root, halves below it, then quarters, then single slices) and number the nodes
breadth-first; a GI gets the number of the node its placement covers:
``gi_id = memory_slices // size - 1 + start // size``. Recorded evidence
(``reference/samples/``):

- H100 PCIe, ``-cgi 9,19,19,19``: 3g.40gb @4:4 is GI 2, 1g.10gb @0,1,2 are GI 7, 8, 9
  (``nvidia-smi-h100-pcie-80gb-lgi.txt``).
- A100-SXM4-40GB, seven 1g.5gb: GI 7..13 (``nvidia-smi-a100-sxm4-40gb-L.txt``).
- A100-SXM4-40GB, ``-cgi 9,14,19``: GI 2, 3, 9, i.e. 3g @4, 2g @0, 1g @2
  (``nvidia-smi-a100-sxm4-40gb-L-mixed.txt``).
- A30 (4 memory slices), four 1g.6gb @0..3: GI 3..6 (``nvidia-smi-a30-lgi.txt``).
- dcgm-exporter on an A100: 2g.10gb GI 5 (= @4) beside 1g.5gb GI 7, 8, 9
  (``dcgm-mig-a100-40gb-4gi-active.txt``).

It is "a per-profile base plus a position index": the base is ``memory_slices // size - 1``
(0 for 7g, 1 for 3g/4g, 3 for 2g and 1g double-memory, 7 for 1g on 8-slice GPUs) and the
position ``start // size``.
"""

from __future__ import annotations

import hashlib
import uuid

# A fixed namespace for MIG UUIDs. Real MIG UUIDs carry version nibble 5 (name-based SHA-1),
# e.g. MIG-da06d78f-7534-56a0-a062-62fef012be91 in nvidia-smi-h100-pcie-80gb-L.txt.
_MIG_NAMESPACE = uuid.UUID("6d696773-636f-7065-2d73-696d2d6d6967")

# PCI bus numbers of the eight GPUs of an HGX H100/H200 baseboard, the usual node shape.
_HGX_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()


def derive_seed(*parts: object) -> int:
    """A 64-bit seed for one object from the scenario seed and the object's path.

    Python's ``hash()`` is salted per process for strings, so it would break determinism;
    SHA-256 of the joined parts is stable everywhere.
    """
    return int.from_bytes(_digest(*parts)[:8], "big")


def stable_unit(*parts: object) -> float:
    """A number in [0, 1) fixed by ``parts``: a deterministic stand-in for ``random()``."""
    return derive_seed(*parts) / 2.0**64


def gpu_uuid(seed: int, node: str, index: int) -> str:
    """``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` for GPU ``index`` of ``node``.

    Real GPU UUIDs are not RFC 4122 UUIDs (``GPU-7cd6d4d6-9fa8-13be-...``), so these are
    plain hex in the same 8-4-4-4-12 shape.
    """
    h = _digest("gpu", seed, node, index).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def mig_uuid(seed: int, gpu: str, gi_id: int, ci_id: int, generation: int) -> str:
    """``MIG-<uuid>`` (R470+ format) for one GI/CI of GPU ``gpu`` in one layout generation.

    ``generation`` counts layout changes: instances recreated by a re-partition get fresh
    UUIDs even at the same GI id, as real re-created instances do.
    """
    name = f"{seed}/{gpu}/{gi_id}/{ci_id}/{generation}"
    return f"MIG-{uuid.uuid5(_MIG_NAMESPACE, name)}"


def gi_id_for(memory_slices: int, start: int, size: int) -> int:
    """The NVML GPU-instance id of a GI at ``start`` covering ``size`` memory slices.

    See the module docstring for the rule and the real outputs it reproduces.

    Raises:
        ValueError: the placement does not sit on a node of the slice tree, which no
            catalogued profile does.
    """
    if size <= 0 or memory_slices % size or start % size:
        raise ValueError(f"placement {start}:{size} is not aligned in {memory_slices} slices")
    return memory_slices // size - 1 + start // size


def pci_bus_id(index: int) -> str:
    """NVML's bus id (``00000000:18:00.0``) for the ``index``-th GPU of a node."""
    bus = _HGX_BUSES[index] if index < len(_HGX_BUSES) else (0xE0 + index) & 0xFF
    return f"00000000:{bus:02X}:00.0"
