"""Real ctypes pointers for simulated objects, so simulated handles behave like NVML's.

pynvml's handles are ``POINTER`` instances (``c_nvmlDevice_t``, ``c_nvmlGpuInstance_t``,
``c_nvmlGpmSample_t``) and callers put them into pynvml's own structs:
``c_nvmlGpmMetricsGet_t.sample1 = sample``, ``c_nvmlGpuInstanceInfo_t.device``, arrays of
``c_nvmlGpuInstance_t``. A Python object would not fit there, so every simulated device,
GPU instance, compute instance and GPM sample is given a small ctypes buffer whose address
*is* the handle. Like NVML, each call returns a fresh pointer object with the same address
(so ``h1 == h2`` is False, as with real handles; compare ``addressof``-style if you must).

Addresses belong to one initialisation "epoch": a real H200 answered a handle obtained before
``nvmlShutdown`` (refcount to zero) and ``nvmlInit`` with INVALID_ARGUMENT
(``tests/sim/recordings/h200_semantics_3.txt``), so :meth:`HandleTable.reset` forgets them.
"""

from __future__ import annotations

import ctypes
from enum import Enum
from typing import Any


class HandleKind(Enum):
    """What a handle stands for."""

    DEVICE = "device"
    MIG = "mig"
    GPU_INSTANCE = "gpu_instance"
    COMPUTE_INSTANCE = "compute_instance"


def address_of(pointer: Any) -> int | None:
    """The address a ctypes pointer (or integer) holds, None for NULL or non-pointers."""
    try:
        return ctypes.addressof(pointer.contents)  # the fast path: a typed pointer
    except ValueError:
        return None  # NULL pointer
    except (AttributeError, TypeError):
        pass
    if pointer is None or isinstance(pointer, bool):
        return None
    try:
        value = ctypes.cast(pointer, ctypes.c_void_p).value
    except (ctypes.ArgumentError, TypeError):
        return None
    return value or None


class HandleTable:
    """Addresses for ``(kind, object)`` pairs, stable until :meth:`reset`."""

    def __init__(self) -> None:
        self._by_address: dict[int, tuple[HandleKind, object]] = {}
        self._address: dict[tuple[HandleKind, int], int] = {}
        self._buffers: list[ctypes.Array[ctypes.c_char]] = []

    def address(self, kind: HandleKind, target: object) -> int:
        """The address standing for ``target`` as ``kind`` (allocated on first use)."""
        key = (kind, id(target))
        found = self._address.get(key)
        if found is None:
            buffer = ctypes.create_string_buffer(8)
            self._buffers.append(buffer)
            found = ctypes.addressof(buffer)
            self._address[key] = found
            self._by_address[found] = (kind, target)
        return found

    def pointer(self, kind: HandleKind, target: object, ctype: Any) -> Any:
        """A fresh ``ctype`` pointer object holding ``target``'s address."""
        return ctypes.cast(ctypes.c_void_p(self.address(kind, target)), ctype)

    def lookup(self, pointer: Any) -> tuple[HandleKind, object] | None:
        """What ``pointer`` stands for in this epoch, or None (stale, foreign or garbage)."""
        address = address_of(pointer)
        return None if address is None else self._by_address.get(address)

    def reset(self) -> None:
        """Forget every handle: a full ``nvmlShutdown`` invalidates them.

        The buffers stay allocated, so a new handle never reuses an old address and a stale
        handle can never alias a live object.
        """
        self._by_address.clear()
        self._address.clear()
