"""The simulated NVML: one object with pynvml's call surface, for one simulated node.

The exporter takes an NVML *module-like object* and calls ``nvml.nvmlInit()``,
``nvml.nvmlDeviceGetCount()`` ... For real hardware that object is the ``pynvml`` module;
in demos and tests it is a :class:`SimNvml`, so the very same exporter code path runs on
both. Names, signatures, return types (pynvml's own ctypes structs and friendly objects) and
errors (pynvml's own ``NVMLError_*`` classes) are pynvml's; constants and classes are
delegated to the ``pynvml`` module; an NVML function not simulated raises
``NVMLError_FunctionNotFound``.

The calls are split by topic: :mod:`~migscope.sim._nvml_device` (library, identity, memory,
power, utilisation, processes), :mod:`~migscope.sim._nvml_mig` (MIG modes, devices, GPU
instances) and :mod:`~migscope.sim._nvml_gpm` (GPM). Each module's docstring lists the NVML
semantics it copies and their evidence.
"""

from __future__ import annotations

from migscope.sim._nvml_device import DeviceApi
from migscope.sim._nvml_gpm import GpmApi
from migscope.sim._nvml_mig import MigApi


class SimNvml(DeviceApi, MigApi, GpmApi):
    """A simulated NVML library for one node (see the module docstring).

    Besides the NVML calls, it carries the simulation's handles for tests: ``gpus`` (the
    :class:`~migscope.sim._gpu.SimGpu` objects, ground truth), ``clock`` and ``faults`` (the
    :class:`~migscope.sim._faults.FaultInjector`).
    """
