"""``migscope catalog check FILE``: where a GPU's own profile table disagrees with the catalogue.

A platform engineer pastes what ``nvidia-smi mig -lgip`` and ``-lgipp`` print on a node; the
command finds the catalogued model and reports every difference. Identity and placement
differences (a name, id, slice, SM, instance or engine count, a placement) are errors: a
layout planned from the catalogue could fail on that GPU. Memory that differs within the
sizes known drivers report is information, memory outside them a warning: names and ids are
the identity, memory is a per-driver fact.

Exit status: 0 no error (warnings and notes allowed), 1 an error or unreadable input, 2 usage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import click

from migscope.cli._gpu_table import (
    ChosenModel,
    TableGroup,
    group_tables,
    parse_driver,
    read_input,
    read_tables,
    resolve_model,
    table_model,
)
from migscope.cli._params import chosen_format, format_option
from migscope.core import Difference, DriverVersion, compare


@dataclass(frozen=True)
class _Verdict:
    """One group of identical GPU tables compared with one catalogued model."""

    group: TableGroup
    chosen: ChosenModel
    driver: DriverVersion | None
    differences: tuple[Difference, ...]

    def count(self, severity: str) -> int:
        return sum(1 for d in self.differences if d.severity == severity)

    def head(self) -> str:
        table = self.group.table
        name = f" ({table.gpu_name})" if table.gpu_name else ""
        driver = f"driver {self.driver}" if self.driver is not None else "driver unknown"
        parts = [f"{self.group.label}{name}: {self.chosen.model.key}, {self.chosen.how}", driver]
        if not table.has_placements:
            parts.append("placements not checked (no -lgipp)")
        if not table.has_details:
            parts.append("names, sizes and counts not checked (no -lgip)")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        table = self.group.table
        return {
            "gpus": list(self.group.gpus),
            "gpu_name": table.gpu_name,
            "model": self.chosen.model.key,
            "candidates": list(self.chosen.candidates),
            "identified": self.chosen.how,
            "driver": None if self.driver is None else str(self.driver),
            "placements_checked": table.has_placements,
            "details_checked": table.has_details,
            "errors": self.count("error"),
            "warnings": self.count("warning"),
            "notes": self.count("info"),
            "differences": [d.as_dict() for d in self.differences],
        }


@click.command("check")
@click.argument("file", metavar="FILE")
@click.option(
    "--driver",
    "driver_text",
    metavar="VERSION",
    help="Driver that printed FILE (535, R535 or 535.129.03); default: the nvidia-smi banner "
    "in FILE, if any. Needed to judge names and memory that vary by driver.",
)
@click.option(
    "--model",
    "model_query",
    metavar="MODEL",
    help="Compare with this catalogued model (key, NVML name or PCI ID) instead of the one "
    "the table's profiles identify.",
)
@format_option(["text", "json"], help_text="Report format: text (default) or json.")
def check(
    file: str,
    driver_text: str | None,
    model_query: str | None,
    format_: str | None,
    output: str | None,
) -> None:
    """Compare nvidia-smi mig -lgip and/or -lgipp output in FILE ('-' for stdin) with the catalogue.

    FILE may hold the output of several GPUs and anything around it (prompts, other commands,
    markdown). Identity or placement differences are errors (exit 1); memory within the sizes
    known drivers report is a note, outside them a warning (exit 0).
    """
    output = chosen_format(format_, output, "text")
    driver = parse_driver(driver_text)
    wanted = resolve_model(model_query, "--model")
    tables = read_tables(file, read_input(file), driver)
    verdicts = []
    for group in group_tables(tables):
        chosen = table_model(file, group, wanted)
        on = driver or group.table.driver
        found = tuple(compare(group.table, chosen.model, on))
        verdicts.append(_Verdict(group, chosen, on, found))
    failed = sum(v.count("error") for v in verdicts)
    if output == "json":
        data = {"file": file, "ok": not failed, "tables": [v.as_dict() for v in verdicts]}
        click.echo(json.dumps(data, indent=2))
    else:
        _print_text(file, verdicts)
    if failed:
        click.get_current_context().exit(1)


def _print_text(file: str, verdicts: list[_Verdict]) -> None:
    """Per table: a head line, then its differences; the verdict last (stderr if it failed)."""
    for verdict in verdicts:
        click.echo(verdict.head())
        for difference in verdict.differences:
            click.echo(f"  {_WORD[difference.severity]}: {difference.message}")
    errors = sum(v.count("error") for v in verdicts)
    warnings = sum(v.count("warning") for v in verdicts)
    notes = sum(v.count("info") for v in verdicts)
    gpus = sum(len(v.group.gpus) for v in verdicts)
    tally = f"{_plural(warnings, 'warning')}, {_plural(notes, 'note')}"
    if errors:
        bad = sum(1 for v in verdicts if v.count("error"))
        click.echo(
            f"differs: {_plural(errors, 'error')} ({tally}) in {bad} of {len(verdicts)} "
            f"distinct GPU tables in {file}",
            err=True,
        )
        return
    verb = "agrees" if gpus == 1 else "agree"
    click.echo(
        f"ok: {_plural(gpus, 'GPU table')} {verb} with the catalogue on identity and "
        f"placements ({tally})"
    )


_WORD = {"error": "error", "warning": "warning", "info": "note"}


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
