"""The GPU's own profile table from a file named on the command line.

``migscope catalog check`` and ``migscope validate-config --gpu-table`` both read a paste of
``nvidia-smi mig -lgip``/``-lgipp`` output and need the same things from it: the text (a
file or stdin), the tables in it with a clear line when there are none, the driver, and the
catalogued model each table belongs to. They are written once here.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from migscope.cli._errors import InvalidInput
from migscope.core import (
    DriverVersion,
    DriverVersionError,
    GpuModel,
    ProfileTable,
    ProfileTableError,
    UnknownGpuError,
    find_model,
    identify_model,
    tables_from_nvidia_smi,
)


def read_input(file: str) -> str:
    """The text of ``file`` (``-``: stdin); any reason it cannot be read is one error line."""
    if file == "-":
        return sys.stdin.read()
    try:
        with open(file, encoding="utf-8") as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{file}: not UTF-8 text (byte {exc.start})") from exc
    except OSError as exc:
        raise InvalidInput(f"{file}: cannot read: {exc.strerror or exc}") from exc


def parse_driver(text: str | None, flag: str = "--driver") -> DriverVersion | None:
    """``--driver``'s value as a :class:`DriverVersion` (None when not given)."""
    if text is None:
        return None
    try:
        return DriverVersion.parse(text)
    except DriverVersionError as exc:
        raise InvalidInput(f"{flag}: {exc}") from exc


def resolve_model(query: str | None, flag: str) -> GpuModel | None:
    """The catalogue model ``flag`` names, or an error line listing the known keys."""
    if query is None:
        return None
    try:
        return find_model(query)
    except UnknownGpuError as exc:
        raise InvalidInput(f"{flag}: {exc}") from exc


def read_tables(file: str, text: str, driver: DriverVersion | None) -> list[ProfileTable]:
    """The profile tables pasted in ``text`` (one per GPU), or one line saying why none.

    Raises:
        InvalidInput: no ``-lgip``/``-lgipp`` row in the text, or rows that contradict
            each other.
    """
    source = "standard input" if file == "-" else file
    try:
        tables = tables_from_nvidia_smi(
            text, source=f"nvidia-smi output in {source}", driver=driver
        )
    except ProfileTableError as exc:
        raise InvalidInput(f"{file}: {exc}") from exc
    if not tables:
        said = ""
        if "No MIG-enabled devices found" in text:
            said = '; the text says "No MIG-enabled devices found"'
        raise InvalidInput(
            f"{file}: no `nvidia-smi mig -lgip` or `-lgipp` table found{said} "
            "(paste the command's output, e.g. `nvidia-smi mig -lgip; nvidia-smi mig -lgipp`)"
        )
    return tables


@dataclass(frozen=True)
class TableGroup:
    """GPUs of one paste whose tables are identical (a node's GPUs usually are)."""

    gpus: tuple[int, ...]
    table: ProfileTable

    @property
    def label(self) -> str:
        """``"GPU 0"`` or ``"GPUs 0-7"`` / ``"GPUs 0, 2"``."""
        gpus = self.gpus
        if len(gpus) == 1:
            return f"GPU {gpus[0]}"
        if list(gpus) == list(range(gpus[0], gpus[-1] + 1)):
            return f"GPUs {gpus[0]}-{gpus[-1]}"
        return "GPUs " + ", ".join(map(str, gpus))


def group_tables(tables: list[ProfileTable]) -> list[TableGroup]:
    """Tables grouped by identical content (same name and profiles), in GPU order."""
    groups: list[TableGroup] = []
    for table in tables:
        index = table.gpu_index if table.gpu_index is not None else len(groups)
        for i, group in enumerate(groups):
            if group.table.same_profiles(table) and group.table.gpu_name == table.gpu_name:
                groups[i] = TableGroup((*group.gpus, index), group.table)
                break
        else:
            groups.append(TableGroup((index,), table))
    return groups


@dataclass(frozen=True)
class ChosenModel:
    """The catalogued model a table is compared with, how it was chosen, and its equals."""

    model: GpuModel
    how: str
    candidates: tuple[str, ...]


def table_model(file: str, group: TableGroup, model: GpuModel | None) -> ChosenModel:
    """The catalogued model to compare ``group``'s table with, and how it was chosen.

    Raises:
        InvalidInput: no ``--model`` and the table fits no model, or several equally (the
            line lists them and says to pass ``--model``).
    """
    if model is not None:
        return ChosenModel(model, "given by --model", (model.key,))
    found = identify_model(group.table)
    if found.model is None:
        raise InvalidInput(f"{file}: {group.label}'s table {found.describe(group.table)}")
    keys = tuple(m.key for m in found.candidates) or (found.model.key,)
    return ChosenModel(found.model, found.describe(group.table), keys)
