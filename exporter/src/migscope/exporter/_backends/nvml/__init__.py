"""NVML backend: GPUs, MIG slices, memory, power and GPM activity through nvidia-ml-py.

The backend is handed an NVML *module-like object*: the real ``pynvml`` module on a GPU node,
or :class:`migscope.sim.SimNvml` in demos and tests. Both expose pynvml's functions, structs
and exception classes, so this code path is the same everywhere.

Costs drive the design (median latencies measured on a real H200, tests/fixtures/h200/):
memory ≈7 µs, power ≈1 µs, a GPM sample ≈40 µs, but ``GetMigMode`` and
``GetMaxMigDeviceCount`` ≈150 µs each and the energy counter ≈3 ms. So the slice list (the
enumeration) is cached and refreshed every ``enumerate_interval`` seconds, or at once when a
cached MIG handle stops working (MIG Manager re-partitioned the GPU); energy is read only when
the sampler asks; the GPU's own MIG profile table is read once per GPU (≈500 µs per profile
index); and GPM keeps a short ring of samples per slice, so each cycle costs one
``nvmlGpmMigSampleGet`` and one ``nvmlGpmMetricsGet`` per slice for a window that slides
every cycle, like DCGM's rolling buffer.

- :mod:`.codes`: which NVML return codes mean absent, stale or gone.
- :mod:`.inventory`: the cached GPUs and slices, and their enumeration.
- :mod:`.profiles`: the GPU's GPU-instance profile table and placements.
- :mod:`.gpm`: sliding GPM windows and metrics.
- :mod:`.backend`: :class:`NvmlBackend`, the session and the cycle.
"""

from migscope.exporter._backends.nvml.backend import NvmlBackend

__all__ = ["NvmlBackend"]
