"""What the backend asks the hostengine to sample: two field groups over one entity group.

Watches are state on the hostengine, named, shared with every other
client of it, and kept until deleted. This class creates them with names unique per process
and backend, re-creates the entity group when the MIG layout changes, and deletes everything
on close, best effort (on a dead connection there is nothing left to free). The hostengine
samples the per-cycle fields at ``field_interval`` and the slow energy counter (≈3 ms per GPU
in NVML) only every ``energy_interval``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Sequence
from typing import Any

from migscope.exporter._backends.dcgm.bindings import Bindings
from migscope.exporter._backends.dcgm.fields import (
    F_ENERGY,
    FE_GPU,
    FE_GPU_I,
    GPU_FIELDS,
    GROUP_EMPTY,
)
from migscope.exporter._backends.dcgm.hierarchy import DcgmGpu

_NAMES = itertools.count(1)
"""Field group names must be unique per hostengine, across backends of one process too."""


class Watches:
    """Our field groups and entity group on one hostengine connection.

    Args:
        field_interval: Seconds between the hostengine's samples of the per-cycle fields.
        energy_interval: Seconds between its reads of the energy counter.
    """

    def __init__(self, *, field_interval: float, energy_interval: float) -> None:
        self._field_interval = field_interval
        self._energy_interval = energy_interval
        self._field_groups: list[tuple[Any, float]] = []
        self._group: Any = None

    def create_field_groups(self, b: Bindings, handle: Any) -> None:
        """Two field groups: the per-cycle fields, and the slow energy counter."""
        agent = b.agent
        tag = f"migscope-{os.getpid()}-{next(_NAMES)}"
        main = agent.dcgmFieldGroupCreate(handle, list(GPU_FIELDS), f"{tag}-fields")
        self._field_groups = [(main, self._field_interval)]
        energy = agent.dcgmFieldGroupCreate(handle, [F_ENERGY], f"{tag}-energy")
        self._field_groups.append((energy, max(self._energy_interval, self._field_interval)))

    def watch(self, b: Bindings, handle: Any, gpus: Sequence[DcgmGpu]) -> None:
        """(Re)create our entity group of GPUs and GPU instances and watch both field groups."""
        s, agent = b.structs, b.agent
        self.drop_group(b, handle)
        group = agent.dcgmGroupCreate(handle, GROUP_EMPTY, f"migscope-{os.getpid()}-entities")
        self._group = group
        for gpu in gpus:
            agent.dcgmGroupAddEntity(handle, group, FE_GPU, gpu.gpu_id)
            for inst in gpu.instances:
                agent.dcgmGroupAddEntity(handle, group, FE_GPU_I, inst.entity_id)
        if not gpus:
            return
        for fg, interval in self._field_groups:
            keep = max(60.0, 5 * interval)
            agent.dcgmWatchFields(handle, group, fg, int(interval * 1_000_000), keep, 0)
        # One update pass now, so the first read has values rather than NO_DATA.
        with contextlib.suppress(s.DCGMError):
            agent.dcgmUpdateAllFields(handle, 1)

    def drop_group(self, b: Bindings, handle: Any) -> None:
        """Unwatch and delete the entity group, if there is one; errors are ignored."""
        group, self._group = self._group, None
        if group is None:
            return
        for fg, _interval in self._field_groups:
            with contextlib.suppress(Exception):
                b.agent.dcgmUnwatchFields(handle, group, fg)
        with contextlib.suppress(Exception):
            b.agent.dcgmGroupDestroy(handle, group)

    def destroy(self, b: Bindings, handle: Any) -> None:
        """Delete the entity group and both field groups, best effort."""
        with contextlib.suppress(Exception):
            self.drop_group(b, handle)
        for fg, _interval in self._field_groups:
            with contextlib.suppress(Exception):
                b.agent.dcgmFieldGroupDestroy(handle, fg)

    def forget(self) -> None:
        """Forget every group without a call (the connection they lived on is gone)."""
        self._group = None
        self._field_groups = []
