"""DCGM backend: per-GPU-instance activity, memory and board power from nv-hostengine.

Why a second backend: NVML has per-slice activity only through GPM, which Hopper and newer
have and Ampere has not. On an A100, only DCGM's profiling fields (1001 GR engine active,
1002 SM active, 1003 SM occupancy, 1004 tensor, 1005 DRAM) tell a busy slice from an idle one.
And on GPU Operator nodes with ``dcgm.enabled=true`` a standalone nv-hostengine already
samples the GPUs, so reading its cache costs the node nothing extra. docs/dcgm.md says when to
pick which backend.

DCGM facts this code rests on (reference/nvml-dcgm.md §4, NVIDIA/DCGM sources; docs/dcgm.md
lists what was verified where), each in the module that acts on it:

- :mod:`.bindings`: the Python bindings are not on PyPI; they are imported from DCGM's
  directory and leave no trace in ``sys.path``/``sys.modules``.
- :mod:`.fields`: field ids (stable across the DCGM 4.6 renames), return codes, and the blank
  sentinels that become ``None`` (absent), never 0.
- :mod:`.hierarchy`: GPU-instance entities are DCGM's own numbers, mapped to NVML GI ids,
  profiles and MIG UUIDs through ``dcgmGetGpuInstanceHierarchy``.
- :mod:`.watches`: the field groups and entity group the hostengine samples for us.
- :mod:`.values`: one cached read per entity kind, decoded into measurements.
- :mod:`.backend`: :class:`DcgmBackend`, the session and the cycle.
"""

from migscope.exporter._backends.dcgm.backend import DcgmBackend
from migscope.exporter._backends.dcgm.bindings import DEFAULT_BINDINGS

__all__ = [
    "DEFAULT_BINDINGS",
    "DcgmBackend",
]
