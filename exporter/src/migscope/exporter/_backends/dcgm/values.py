"""Field values from the hostengine's cache, and the measurements made of them.

Every reading (GPU, slice, energy, identity) goes through the same two
steps: one ``dcgmEntitiesGetLatestValues`` call, decoded (:func:`latest`), then one value per
field in which a real error is noted against its collector and "no such value here" is
simply absent (:func:`field_value`). Framebuffer sizes arrive in MiB and become bytes here;
activity ratios are clamped to 0..1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from migscope.core import one_line
from migscope.exporter._backends.dcgm.bindings import Bindings
from migscope.exporter._backends.dcgm.fields import (
    ABSENT,
    ACTIVITY_FIELDS,
    F_FB_FREE,
    F_FB_TOTAL,
    F_FB_USED,
    FIELD_NAMES,
    MIB,
    Values,
    decode,
)
from migscope.exporter._backends.status import CycleErrors
from migscope.exporter._snapshot import Activity


def latest(
    b: Bindings, handle: Any, entities: Sequence[tuple[int, int]], fields: Sequence[int], flags: int
) -> Values:
    """``dcgmEntitiesGetLatestValues``, decoded: blanks become None.

    Args:
        b: The loaded bindings.
        handle: The hostengine connection.
        entities: ``(entity group, entity id)`` pairs to read.
        fields: Field ids to read of each.
        flags: ``dcgmEntitiesGetLatestValues`` flags (``LIVE_DATA`` skips the cache).

    Raises:
        DCGMError: the call failed as a whole (the caller decides what that means).
    """
    pairs = []
    for group, entity in entities:
        pair = b.structs.c_dcgmGroupEntityPair_t()
        pair.entityGroupId = group
        pair.entityId = entity
        pairs.append(pair)
    raw = b.agent.dcgmEntitiesGetLatestValues(handle, pairs, list(fields), flags)
    out: Values = {}
    for fv in raw:
        key = (int(fv.entityGroupId), int(fv.entityId))
        out.setdefault(key, {})[int(fv.fieldId)] = (int(fv.status), decode(fv))
    return out


def status_text(b: Bindings, status: int) -> str:
    """DCGM's own one-line text for a return code, or ``DCGM status N``."""
    try:
        return one_line(b.structs.DCGMError(status))
    except Exception:
        return f"DCGM status {status}"


def field_value(
    b: Bindings,
    errors: CycleErrors,
    collector: str,
    where: str,
    values: dict[int, tuple[int, Any]],
    field_id: int,
) -> Any:
    """One decoded value, or None; a real error is noted against ``collector``.

    Args:
        b: The loaded bindings (for the text of an error status).
        errors: This cycle's error notes.
        collector: The collector an error counts against (``dcgm``, ``energy``).
        where: The entity, for the note (``GPU 0 GI 3``).
        values: The entity's values from :func:`latest`.
        field_id: The field wanted.
    """
    found = values.get(field_id)
    if found is None:
        return None
    status, value = found
    if status == 0:
        return value
    if status not in ABSENT:
        name = FIELD_NAMES.get(field_id, "field")
        errors.note(collector, f"{where}: {name} ({field_id}): {status_text(b, status)}")
    return None


def memory(
    b: Bindings, errors: CycleErrors, where: str, values: dict[int, tuple[int, Any]]
) -> tuple[int | None, int | None, int | None]:
    """``(used, total, reserved)`` framebuffer bytes of an entity.

    DCGM's fields are NVML's ``nvmlMemory_v2_t`` in MiB (``ReadAndCacheFBMemoryInfo``), so
    reserved is total - used - free; total is used + free when field 250 is missing, and
    reserved is then unknown.
    """
    used = field_value(b, errors, "dcgm", where, values, F_FB_USED)
    free = field_value(b, errors, "dcgm", where, values, F_FB_FREE)
    total = field_value(b, errors, "dcgm", where, values, F_FB_TOTAL)
    reserved = None
    if total is None and used is not None and free is not None:
        total = used + free
    elif total is not None and used is not None and free is not None:
        reserved = max(int(total) - int(used) - int(free), 0)
    return (
        None if used is None else int(used) * MIB,
        None if total is None else int(total) * MIB,
        None if reserved is None else reserved * MIB,
    )


def activity(
    b: Bindings, errors: CycleErrors, where: str, values: dict[int, tuple[int, Any]]
) -> Activity | None:
    """The profiling ratios of an entity, clamped to 0..1; None when none is there."""
    ratios: dict[str, float | None] = {}
    for attr, fid in ACTIVITY_FIELDS:
        value = field_value(b, errors, "dcgm", where, values, fid)
        ratios[attr] = None if value is None else min(max(float(value), 0.0), 1.0)
    if all(v is None for v in ratios.values()):
        return None
    return Activity(**ratios)
