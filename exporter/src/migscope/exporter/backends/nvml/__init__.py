"""NVML backend: GPUs, MIG slices, memory, power and GPM activity through nvidia-ml-py.

The backend is handed an NVML *module-like object*: the real ``pynvml`` module on a GPU node,
or :class:`migscope.sim.SimNvml` in demos and tests. Both expose pynvml's functions, structs
and exception classes, so this code path is the same everywhere.

Costs drive the design (median latencies measured on a real H200, tests/fixtures/h200/):
memory ≈7 µs, power ≈1 µs, a GPM sample ≈40 µs, but ``GetMigMode`` and
``GetMaxMigDeviceCount`` ≈150 µs each and the energy counter ≈3 ms. So the slice list (the
enumeration) is cached and refreshed every ``enumerate_interval`` seconds, or at once when a
cached MIG handle stops working (MIG Manager re-partitioned the GPU); energy is read only when
the sampler asks; and GPM keeps one sample per slice from the previous cycle, so each cycle
costs one ``nvmlGpmMigSampleGet`` per slice, like DCGM's rolling buffer.

- :mod:`.codes`: which NVML return codes mean absent, stale or gone.
- :mod:`.inventory`: the cached GPUs and slices, and their enumeration.
- :mod:`.gpm`: GPM windows and metrics.
- :mod:`.backend`: :class:`NvmlBackend`, the session and the cycle.
"""

from migscope.exporter.backends.nvml.backend import NvmlBackend

__all__ = ["NvmlBackend"]
