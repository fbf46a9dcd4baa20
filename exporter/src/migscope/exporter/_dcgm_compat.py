"""dcgm-exporter's exposition, made from migscope's readings (``--dcgm-compat``).

A team that already has dashboards and alerts on dcgm-exporter's ``DCGM_FI_*`` series should
be able to point them at migscope and see no difference for the fields migscope measures. So
this module writes what dcgm-exporter 3.3.7+ writes (``internal/pkg/rendermetrics``,
``internal/pkg/collector/gpu_collector.go`` at NVIDIA/dcgm-exporter d5e5f51), not an
approximation of it:

- the families a dcgm-exporter *collectors file* asks for (``-f``, the same CSV; by default
  dcgm-exporter's own ``etc/default-counters.csv``), with that file's TYPE and HELP, in DCGM
  field-id order; fields migscope has no reading for are left out (and named once in the log);
- labels in dcgm-exporter's order: ``gpu, UUID, pci_bus_id, device, modelName``, then
  ``GPU_I_PROFILE, GPU_I_ID`` on a MIG slice, then the host label (``Hostname``, or
  ``hostname`` as from 4.8.3, or none as with ``-n``), the file's ``label`` rows
  (``DCGM_FI_DRIVER_VERSION``), and ``container, namespace, pod`` only when a pod holds the
  device (3.3.5+);
- values printed as DCGM's field types print: int64 with ``%d``, double with ``%f``;
- a MIG GPU's fields per GPU instance, a GPU with MIG off (or on with no instance) whole-GPU,
  as DCGM's entities are watched (``devicemonitoring``), and no framebuffer series for a MIG
  GPU without instances (DCGM has none there: see
  tests/fixtures/dcgm/dcgm-mig-a100-40gb-mig-enabled-no-gi.txt).

One deliberate difference: board power and energy go out once per GPU, without
``GPU_I_*``, where dcgm-exporter repeats them on every slice (#257, #353) and ``sum()``
over-counts. docs/dcgm.md has the field-by-field account.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, cast

from prometheus_client.core import Metric

from migscope.core import DCGM_COMPAT, DcgmCompatSpec, DcgmType, UserError
from migscope.exporter._snapshot import Activity, GpuReading, MigReading, Snapshot

MIB = 1024 * 1024

HostLabel = Literal["Hostname", "hostname", "none"]
"""The host label's name: ``Hostname`` (dcgm-exporter up to 4.8.2), ``hostname`` (4.8.3,
NVIDIA/dcgm-exporter#655), or ``none`` (no host label, as dcgm-exporter's ``-n``)."""

HOST_LABELS: tuple[HostLabel, ...] = ("Hostname", "hostname", "none")

_CSV_TYPES = ("gauge", "counter", "histogram", "summary", "label")
"""The types dcgm-exporter accepts in a collectors file (``counters.promMetricType``)."""

_BY_NAME = {name: spec for spec in DCGM_COMPAT for name in (spec.name, *spec.aliases)}
"""Every name a collectors file may give a field migscope fills: DCGM's old and new names."""


class CountersError(UserError, ValueError):
    """A collectors file migscope cannot use; one line naming the file and line."""


@dataclass(frozen=True, order=True)
class CounterRow:
    """One row of a dcgm-exporter collectors file: ``FIELD, type, help``."""

    name: str
    type: DcgmType
    help: str


DEFAULT_COUNTERS: tuple[CounterRow, ...] = tuple(
    CounterRow(spec.name, spec.type, spec.help) for spec in DCGM_COMPAT if spec.default
)
"""The rows of dcgm-exporter's ``etc/default-counters.csv`` that migscope can fill (the test
compares them with the file itself, tests/fixtures/dcgm/dcgm-exporter-default-counters.csv)."""


class Owner(Protocol):
    """Who holds a device (the collector's owner type, as far as this module needs it)."""

    @property
    def namespace(self) -> str: ...

    @property
    def pod(self) -> str: ...

    @property
    def container(self) -> str: ...


OwnerMap = Mapping[str, Sequence[Owner]]


def parse_counters(text: str, source: str) -> tuple[CounterRow, ...]:
    """The rows of a collectors file, read as dcgm-exporter reads it.

    Lines starting with ``#`` and blank lines are skipped, fields are trimmed of spaces, and
    each row has exactly three fields (``encoding/csv`` with ``Comment = '#'``, then
    ``counters.ExtractCounters``).

    Raises:
        CountersError: a malformed row, an unknown type, a field listed twice, or a field
            migscope provides with a type it cannot write (histogram, summary).
    """
    rows: list[CounterRow] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{source}:{number}"
        try:
            fields = [field.strip(" ") for field in next(csv.reader([line]))]
        except csv.Error as exc:
            raise CountersError(f"{where}: not a CSV row: {exc}") from exc
        if len(fields) != 3:
            raise CountersError(
                f"{where}: expected 3 fields (FIELD, type, help), got {len(fields)}"
            )
        name, kind, help_ = fields
        if kind not in _CSV_TYPES:
            raise CountersError(f"{where}: unknown type {kind!r}; expected one of {_CSV_TYPES}")
        if name in seen:
            raise CountersError(f"{where}: {name} is listed twice")
        seen.add(name)
        if kind not in ("gauge", "counter", "label"):
            if name in _BY_NAME:
                raise CountersError(
                    f"{where}: {name} as a {kind}: migscope writes its fields as gauge, "
                    "counter or label"
                )
            continue  # a field migscope does not provide anyway
        rows.append(CounterRow(name, cast("DcgmType", kind), help_))
    return tuple(rows)


def load_counters(path: Path | None) -> tuple[CounterRow, ...]:
    """The collectors file at ``path``, or dcgm-exporter's defaults when None.

    Raises:
        CountersError: the file cannot be read or is malformed (one line).
    """
    if path is None:
        return DEFAULT_COUNTERS
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CountersError(f"dcgm counters {path}: cannot read: {reason}") from exc
    return parse_counters(text, str(path))


# --- values -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entity:
    """What one DCGM entity (a whole GPU, or one GPU instance) read, in migscope's units."""

    activity: Activity | None
    used: int | None
    total: int | None
    reserved: int | None


def _free(e: _Entity) -> float | None:
    if e.used is None or e.total is None or e.reserved is None:
        return None
    return max(e.total - e.used - e.reserved, 0)


def _mib(value: int | float | None) -> float | None:
    return None if value is None else float(int(value) // MIB)


def _ratio(attr: str) -> Callable[[_Entity], float | None]:
    def read(e: _Entity) -> float | None:
        return None if e.activity is None else getattr(e.activity, attr)

    return read


_ENTITY_VALUES: dict[str, Callable[[_Entity], float | None]] = {
    "DCGM_FI_DEV_FB_FREE": lambda e: _mib(_free(e)),
    "DCGM_FI_DEV_FB_USED": lambda e: _mib(e.used),
    "DCGM_FI_DEV_FB_RESERVED": lambda e: _mib(e.reserved),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": _ratio("graphics"),
    "DCGM_FI_PROF_SM_ACTIVE": _ratio("sm_active"),
    "DCGM_FI_PROF_SM_OCCUPANCY": _ratio("sm_occupancy"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": _ratio("tensor"),
    "DCGM_FI_PROF_DRAM_ACTIVE": _ratio("dram"),
}
"""Fields of a GPU instance, or of a whole GPU without instances."""

_BOARD_VALUES: dict[str, Callable[[GpuReading], float | None]] = {
    "DCGM_FI_DEV_POWER_USAGE": lambda g: g.power_watts,
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": lambda g: (
        None if g.energy_joules is None else float(round(g.energy_joules * 1000.0))
    ),
}
"""Fields only the board has: once per GPU, never per slice."""

_FRAMEBUFFER = frozenset({"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED"})


def _print(value: float, spec: DcgmCompatSpec) -> str:
    """The value as dcgm-exporter prints DCGM's type (``toString``: ``%d`` / ``%f``)."""
    return str(int(value)) if spec.value == "int64" else f"{value:.6f}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


# --- the exposition ----------------------------------------------------------------------

Labels = tuple[tuple[str, str], ...]


@dataclass
class _Family:
    row: CounterRow
    spec: DcgmCompatSpec
    samples: list[tuple[Labels, float]]


class DcgmExposition:
    """dcgm-exporter's series for a snapshot, for the families of a collectors file.

    Args:
        counters: The collectors file's rows (:func:`load_counters`).
        hostname: The host label's value (dcgm-exporter: ``$NODE_NAME``, else the OS host
            name); empty leaves the label out, as dcgm-exporter does.
        host_label: The host label's name, or ``none``.
    """

    def __init__(
        self,
        counters: Sequence[CounterRow] = DEFAULT_COUNTERS,
        *,
        hostname: str = "",
        host_label: HostLabel = "Hostname",
    ) -> None:
        known = [(row, _BY_NAME[row.name]) for row in counters if row.name in _BY_NAME]
        self._series = sorted(
            ((row, spec) for row, spec in known if row.type != "label"),
            key=lambda pair: pair[1].field_id,
        )
        # dcgm-exporter ranges over a map: label rows come out sorted by name
        self._label_rows = sorted(
            (row.name, spec.name) for row, spec in known if row.type == "label"
        )
        self.unsupported = tuple(row.name for row in counters if row.name not in _BY_NAME)
        """Fields of the collectors file migscope has no reading for (left out)."""
        self._host = () if host_label == "none" or not hostname else ((host_label, hostname),)

    def _families(self, snap: Snapshot, owners: OwnerMap) -> list[_Family]:
        families = [_Family(row, spec, []) for row, spec in self._series]
        tail = (*self._host, *self._static(snap))
        for gpu in snap.gpus:
            base = (
                ("gpu", str(gpu.index)),
                ("UUID", gpu.uuid),
                ("pci_bus_id", gpu.pci_bus_id),
                ("device", f"nvidia{gpu.index}"),
                ("modelName", gpu.name),
            )
            per_instance = gpu.mig_enabled and bool(gpu.instances)
            board = (*base, *tail) if per_instance else (*base, *tail, *_pod(owners, gpu.uuid))
            whole = _Entity(
                gpu.activity,
                gpu.memory_used_bytes,
                gpu.memory_total_bytes,
                gpu.memory_reserved_bytes,
            )
            for family in families:
                name = family.spec.name
                if name in _BOARD_VALUES:
                    _add(family, board, _BOARD_VALUES[name](gpu))
                elif not per_instance and not (gpu.mig_enabled and name in _FRAMEBUFFER):
                    _add(family, board, _ENTITY_VALUES[name](whole))
            if per_instance:
                for inst in gpu.instances:
                    labels = (*base, *_instance(inst), *tail, *_pod(owners, inst.mig_uuid))
                    entity = _Entity(
                        inst.activity,
                        inst.memory_used_bytes,
                        inst.memory_total_bytes,
                        inst.memory_reserved_bytes,
                    )
                    for family in families:
                        if family.spec.name in _ENTITY_VALUES:
                            _add(family, labels, _ENTITY_VALUES[family.spec.name](entity))
        return [family for family in families if family.samples]

    def _static(self, snap: Snapshot) -> Labels:
        """The collectors file's ``label`` rows, as labels on every series."""
        values = {"DCGM_FI_DRIVER_VERSION": snap.driver_version}
        return tuple((row, values[field]) for row, field in self._label_rows if values.get(field))

    def text(self, snap: Snapshot, owners: OwnerMap) -> str:
        """The series in the text format, line for line as dcgm-exporter writes them."""
        out: list[str] = []
        for family in self._families(snap, owners):
            name = family.row.name  # the file's name for the field, as dcgm-exporter writes it
            out.append(f"# HELP {name} {family.row.help}")
            out.append(f"# TYPE {name} {family.row.type}")
            for labels, value in family.samples:
                text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                out.append(f"{name}{{{text}}} {_print(value, family.spec)}")
        return "\n".join(out) + "\n" if out else ""

    def metrics(self, snap: Snapshot, owners: OwnerMap) -> Iterator[Metric]:
        """The same series as prometheus_client families, for the registry (OpenMetrics).

        A counter goes out as ``unknown``: OpenMetrics (and prometheus_client's renderers)
        want a counter's samples to end in ``_total``, which dcgm-exporter's names do not.
        Prometheus scrapes the text format, where :meth:`text` writes ``counter``.
        """
        for family in self._families(snap, owners):
            kind = "unknown" if family.row.type == "counter" else family.row.type
            metric = Metric(family.row.name, family.row.help, kind)
            for labels, value in family.samples:
                metric.add_sample(family.row.name, dict(labels), value)
            yield metric


def _add(family: _Family, labels: Labels, value: float | None) -> None:
    """Add a sample unless the value is unknown (dcgm-exporter skips DCGM's blanks)."""
    if value is not None and math.isfinite(value):
        family.samples.append((labels, value))


def _instance(inst: MigReading) -> Labels:
    return (("GPU_I_PROFILE", inst.profile), ("GPU_I_ID", str(inst.gpu_instance_id)))


def _pod(owners: OwnerMap, device: str) -> Labels:
    """``container, namespace, pod`` of the device's (first) holder; none when unheld."""
    holders = owners.get(device, ())
    if not holders:
        return ()
    first = holders[0]
    return (("container", first.container), ("namespace", first.namespace), ("pod", first.pod))
