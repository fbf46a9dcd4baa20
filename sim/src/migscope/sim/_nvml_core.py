"""The base of the simulated NVML: initialisation, handle resolution, faults, delegation.

:class:`NvmlCore` gives every API method the same front door (:func:`nvml_api`): the library
must be initialised (else ``NVMLError_Uninitialized``, as pynvml raises before ``nvmlInit``
and after the last ``nvmlShutdown``), injected faults run, then the call runs under a lock
(real NVML is thread-safe and the exporter samples from a thread while tests poke it).

Attribute access falls back to the ``pynvml`` module for *constants and classes* only
(``NVML_DEVICE_MIG_ENABLE``, ``nvmlMemory_v2``, ``c_nvmlGpmMetricsGet_t``,
``NVMLError_NotFound`` ...), so exporter code written against ``pynvml`` finds everything it
uses on the simulator object. A pynvml *function* the simulator does not implement is never
delegated: calling it raises ``NVMLError_FunctionNotFound``, what pynvml raises when the
loaded driver lacks the symbol (an old driver), so unsupported paths are exercised too.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import pynvml

from migscope.sim._clock import SimClock
from migscope.sim._faults import FaultInjector, InstanceBuilder
from migscope.sim._gpm import SampleStore
from migscope.sim._gpu import SimGpu, SimInstance
from migscope.sim._handles import HandleKind, HandleTable
from migscope.sim._nvml_errors import fail

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="NvmlCore")

# Calls that work before nvmlInit (or re-initialise).
_NO_INIT_NEEDED = frozenset({"nvmlInit", "nvmlInitWithFlags", "nvmlInit_v2", "nvmlErrorString"})
# pynvml helpers that are pure Python (no library call): safe to hand out as they are.
_PURE_HELPERS = frozenset({"nvmlStructToFriendlyObject", "nvmlExceptionClass"})


def nvml_api(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Mark a method as an NVML entry point: init check, faults, lock."""
    name = fn.__name__

    @functools.wraps(fn)
    def entry(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        self._before_call(name, args)
        with self._lock:
            return fn(self, *args, **kwargs)

    return entry


def _not_implemented(owner: NvmlCore, name: str) -> Callable[..., Any]:
    def missing(*args: Any, **kwargs: Any) -> Any:
        owner._before_call(name, args)
        fail(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    missing.__name__ = missing.__qualname__ = name
    missing.__doc__ = (
        f"Not simulated: raises NVMLError_FunctionNotFound like a driver without {name}."
    )
    return missing


class NvmlCore:
    """State shared by the API mixins: GPUs, clock, handles, samples, faults.

    Args:
        gpus: The node's GPUs, in NVML index order.
        clock: Simulated time.
        driver: Driver version string (``nvmlSystemGetDriverVersion``).
        privileged: Whether the caller is root. Unprivileged callers get NO_PERMISSION from
            the calls nvml.h marks "requires privileged user" (GPU-instance enumeration and
            placements) and from the parent's aggregate memory and process list in MIG mode.
        node: Node name (for fault seeds and messages).
        seed: Scenario seed.
        builder: Builds instances for layout-change faults (None: layout changes refused).
    """

    def __init__(
        self,
        gpus: Sequence[SimGpu],
        *,
        clock: SimClock,
        driver: str = "580.159.04",
        privileged: bool = True,
        node: str = "node",
        seed: int = 0,
        builder: InstanceBuilder | None = None,
    ) -> None:
        self.gpus: tuple[SimGpu, ...] = tuple(gpus)
        self.clock = clock
        self.driver_version = driver
        self.privileged = privileged
        self.node = node
        self.faults = FaultInjector(clock, self.gpus, seed, node, builder or _no_builder)
        self._lock = threading.RLock()
        self._refcount = 0
        self._handles = HandleTable()
        self._samples = SampleStore()
        self.calls: Counter[str] = Counter()
        """NVML calls made so far, by function name: benchmarks price them with the real
        per-call latencies measured on an H200, tests check what a code path costs."""

    def __repr__(self) -> str:
        return f"SimNvml(node={self.node!r}, gpus={len(self.gpus)}, initialised={self._refcount})"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            value = getattr(pynvml, name)
        except AttributeError:
            raise AttributeError(
                f"{type(self).__name__} has no attribute {name!r} (nor has pynvml)"
            ) from None
        if isinstance(value, type) or not callable(value) or name in _PURE_HELPERS:
            self.__dict__[name] = value  # constants never change: look them up once
            return value
        return _not_implemented(self, name)

    # -- the front door -------------------------------------------------------------------

    @property
    def gpm_samples_in_use(self) -> int:
        """GPM sample buffers allocated and not yet freed (a leak check for callers)."""
        return len(self._samples)

    def _before_call(self, name: str, args: Sequence[Any]) -> None:
        self.calls[name] += 1
        if self._refcount == 0 and name not in _NO_INIT_NEEDED:
            fail(pynvml.NVML_ERROR_UNINITIALIZED)
        if self.faults.active():
            self.faults.before_call(name, self._gpu_hint(name, args))

    def _gpu_hint(self, name: str, args: Sequence[Any]) -> int | None:
        """The GPU index a call concerns, for faults aimed at one GPU (None if unknown)."""
        if not args:
            return None
        first = args[0]
        if name == "nvmlDeviceGetHandleByIndex" and isinstance(first, int):
            return first
        found = self._handles.lookup(first)
        if found is not None:
            target = found[1]
            gpu = target if isinstance(target, SimGpu) else getattr(target, "gpu", None)
            return gpu.index if isinstance(gpu, SimGpu) else None
        sample = self._samples.get(getattr(first, "sample1", None))
        if sample is not None and sample.source is not None:
            owner = sample.source[1]
            gpu = owner if isinstance(owner, SimGpu) else getattr(owner, "gpu", None)
            return gpu.index if isinstance(gpu, SimGpu) else None
        return None

    # -- handles --------------------------------------------------------------------------

    def _now(self) -> float:
        return self.clock.elapsed()

    def _device_ptr(self, gpu: SimGpu) -> Any:
        return self._handles.pointer(HandleKind.DEVICE, gpu, pynvml.c_nvmlDevice_t)

    def _mig_ptr(self, inst: SimInstance) -> Any:
        return self._handles.pointer(HandleKind.MIG, inst, pynvml.c_nvmlDevice_t)

    def _gi_ptr(self, inst: SimInstance) -> Any:
        return self._handles.pointer(HandleKind.GPU_INSTANCE, inst, pynvml.c_nvmlGpuInstance_t)

    def _ci_ptr(self, inst: SimInstance) -> Any:
        return self._handles.pointer(
            HandleKind.COMPUTE_INSTANCE, inst, pynvml.c_nvmlComputeInstance_t
        )

    @staticmethod
    def _check_alive(gpu: SimGpu, inst: SimInstance | None, t: float) -> None:
        """GPU_IS_LOST for a lost GPU; the stale error for a replaced instance."""
        if gpu.is_lost(t):
            fail(pynvml.NVML_ERROR_GPU_IS_LOST)
        if inst is not None and not inst.alive(t):
            fail(inst.stale_error or pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def _device(self, handle: Any, t: float) -> tuple[SimGpu, SimInstance | None]:
        """The GPU (and MIG instance) a device handle stands for.

        Raises:
            pynvml.NVMLError: INVALID_ARGUMENT for anything that is not a live device handle
                of this simulator (NULL, foreign, pre-shutdown, a GI handle); GPU_IS_LOST;
                the stale error of a replaced MIG device.
        """
        found = self._handles.lookup(handle)
        if found is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        kind, target = found
        if kind is HandleKind.DEVICE and isinstance(target, SimGpu):
            self._check_alive(target, None, t)
            return target, None
        if kind is HandleKind.MIG and isinstance(target, SimInstance):
            self._check_alive(target.gpu, target, t)
            return target.gpu, target
        fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def _physical(self, handle: Any, t: float) -> SimGpu:
        """A physical GPU handle (a MIG handle is INVALID_ARGUMENT)."""
        gpu, inst = self._device(handle, t)
        if inst is not None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu

    def _mig(self, handle: Any, t: float) -> SimInstance:
        """A MIG device handle.

        A physical handle is INVALID_ARGUMENT, as measured for ``nvmlDeviceGetGpuInstanceId``
        on the H200's own handle.
        """
        _, inst = self._device(handle, t)
        if inst is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return inst

    def _instance_handle(self, handle: Any, kind: HandleKind, t: float) -> SimInstance:
        """The instance behind a GPU-instance or compute-instance handle."""
        found = self._handles.lookup(handle)
        if found is None or found[0] is not kind or not isinstance(found[1], SimInstance):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        inst = found[1]
        self._check_alive(inst.gpu, inst, t)
        return inst

    def _require_privilege(self) -> None:
        if not self.privileged:
            fail(pynvml.NVML_ERROR_NO_PERMISSION)


def _no_builder(gpu: SimGpu, specs: Sequence[Any], generation: int) -> list[SimInstance]:
    raise ValueError("this simulator was built without a scenario: layout changes need one")
