"""``migscope validate-config``: check a mig-parted config before MIG Manager applies it.

MIG Manager only discovers a bad entry on the node, after it has paused the GPU operands,
and then leaves the node ``failed``. This command finds the same mistakes offline: schema
errors with their line, and layouts that cannot be placed on the GPU models an entry reaches.
With ``--driver`` it also warns about profile names the node's driver does not print; with
``--gpu-table`` it checks against the GPU's own profile table instead of the built-in one.
FILE may be the config itself, a ConfigMap holding it (any data key; the GPU Operator's is
``config.yaml``), a manifest with such a ConfigMap, or ``kubectl get cm -o yaml`` output.
Exit status: 0 every config fits the models its filters or profile names point to (some
unfiltered configs may not fit every model their names exist on: listed, not an error), 1
something invalid or unreadable, 2 usage error.
The mig-parted reader (its pydantic schema) is imported when the command runs, not for
``--help``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from migscope.cli._errors import InvalidInput
from migscope.cli._gpu_table import (
    group_tables,
    parse_driver,
    read_input,
    read_tables,
    resolve_model,
    table_model,
)
from migscope.cli._params import chosen_format, format_option
from migscope.core import (
    DriverVersion,
    GpuModel,
    ProfileTableError,
    identify_model,
    model_from_table,
)

if TYPE_CHECKING:
    from migscope.core import ConfigCheck, ConfigError, ConfigReport, ConfigSource


@click.command("validate-config")
@click.argument("file", metavar="FILE")
@click.option(
    "--gpu",
    "gpu_query",
    metavar="MODEL",
    help="Check every config for this GPU model only (catalogue key, NVML name or PCI ID).",
)
@click.option(
    "--driver",
    "driver_text",
    metavar="VERSION",
    help="The nodes' driver (535, R535 or 535.129.03): warn about profile names it does not "
    "print. Without it, names that depend on the driver are listed as notes.",
)
@click.option(
    "--gpu-table",
    "table_file",
    metavar="TABLE",
    help="Check against the GPU's own profile table: a file of its `nvidia-smi mig -lgip` "
    "and `-lgipp` output, used instead of the built-in table of its model.",
)
@format_option(["text", "json"], help_text="Report format: text (default) or json.")
def validate_config(
    file: str,
    gpu_query: str | None,
    driver_text: str | None,
    table_file: str | None,
    format_: str | None,
    output: str | None,
) -> None:
    """Validate the mig-parted config FILE ('-' for stdin) against the MIG catalogue.

    FILE is a mig-parted config, a ConfigMap holding one (kubectl get cm -o yaml output and
    manifests too). Without --gpu, each entry is checked on every catalogued GPU model it
    can reach, and each config is said valid on the models it fits. With --gpu, every entry
    of a config meant for that model that reaches it must fit it; configs for other models
    only are counted and named. --gpu-table TABLE checks for the GPU whose profile table
    TABLE holds (its model from --gpu, else from the table).
    """
    from migscope.core import ConfigError, check_config, read_config_sources

    output = chosen_format(format_, output, "text")
    driver = parse_driver(driver_text)
    gpu = resolve_model(gpu_query, "--gpu")
    table = _gpu_table(table_file, gpu, driver) if table_file is not None else None
    if table is not None:
        gpu = table.model
        driver = driver or table.driver
    text = read_input(file)
    try:
        sources = read_config_sources(text)
    except ConfigError as exc:
        where = f"{file}:{exc.line}" if exc.line is not None else file
        raise InvalidInput(f"{where}: {exc.message}{_more(exc)}") from exc
    reports = [(source, check_config(source.config, gpu=gpu, driver=driver)) for source in sources]
    if output == "json":
        if len(reports) == 1:
            body = _as_json(file, *reports[0], table)
        else:
            body = {
                "file": file,
                "valid": all(r.ok for _, r in reports),
                "sources": [_as_json(file, s, r, table) for s, r in reports],
            }
        click.echo(json.dumps(body, indent=2))
    else:
        for source, report in reports:
            _print_text(file, source, report, table)
    if not all(report.ok for _, report in reports):
        click.get_current_context().exit(1)


@dataclass(frozen=True)
class _Table:
    """The GPU's own profile table, made into the model the configs are checked against."""

    model: GpuModel
    source: str
    driver: DriverVersion | None

    @property
    def label(self) -> str:
        return f"the GPU's own table ({self.source.removeprefix('observed from ')})"


def _gpu_table(table_file: str, gpu: GpuModel | None, driver: DriverVersion | None) -> _Table:
    """``--gpu-table``: one GPU's table from the file, as a model (the table wins)."""
    groups = group_tables(read_tables(table_file, read_input(table_file), driver))
    if len(groups) > 1:
        labels = ", ".join(g.label for g in groups)
        raise InvalidInput(
            f"--gpu-table: {table_file} holds different tables for {labels}; keep one GPU's"
        )
    (group,) = groups
    if gpu is not None:
        found = identify_model(group.table)
        if found.model is not None and gpu not in found.candidates:
            raise InvalidInput(
                f"--gpu-table: {table_file} is the table of a {found.model.key}, not of "
                f"--gpu {gpu.key}"
            )
    base = table_model(table_file, group, gpu).model
    try:
        observed = model_from_table(group.table, base)
    except ProfileTableError as exc:
        raise InvalidInput(f"--gpu-table: {table_file}: {exc}") from exc
    where = f"{observed.source}, {group.label}"
    return _Table(observed, where, driver or group.table.driver)


def _more(exc: ConfigError) -> str:
    """Say how many further problems the schema check found, keeping the error one line."""
    more = len(exc.problems) - 1
    return f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""


def _print_text(file: str, source: ConfigSource, report: ConfigCheck, table: _Table | None) -> None:
    """Errors one per line on stdout, then misfits, warnings and notes; the verdict last.

    A note's evidence (the source of a driver-dependent name) is printed once per source.
    """
    from migscope.core import PLAIN_FORM

    for config in report.invalid:
        for error in config.errors:
            click.echo(error)
    if report.gpu is None:
        for config in report.configs:
            if config.not_valid_on and config.ok:
                click.echo(_not_everywhere(config.name, config.models, config.not_valid_on))
    for warning in report.warnings:
        click.echo(f"warning: {warning}")
    for note in report.notes:
        click.echo(f"note: {note}")
    for line in _evidence(report):
        click.echo(f"note: {line}")
    for error in report.errors:
        click.echo(f"{file}: {error}")
    skipped = report.not_applicable
    total = len(report.configs) - len(skipped)
    noun = "config" if total == 1 else "configs"
    held = "" if source.form == PLAIN_FORM else f" ({source.form})"
    if report.ok:
        if report.gpu and table is not None:
            scope = f"on {report.gpu} per {table.label}"
        elif report.gpu:
            scope = f"on {report.gpu}"
        else:
            scope = f"against {len(report.models_checked)} catalogued GPU models"
        if report.driver is not None:
            scope += f" with driver {report.driver}"
        others = f"; {_others(skipped)}" if skipped else ""
        click.echo(f"ok: {total} {noun} valid {scope}{held}{others}{_counts(report)}")
        return
    if report.errors and total == 0:
        click.echo(f"invalid: no config in {file}{held} is for {report.gpu}", err=True)
        return
    bad = len(report.invalid)
    click.echo(f"invalid: {bad} of {total} {noun} in {file}{held}", err=True)


def _not_everywhere(
    name: str, models: tuple[str, ...], not_valid_on: tuple[tuple[str, str], ...]
) -> str:
    """Where an unfiltered config fits and where its profile names mean something else."""
    where = ", ".join(models)
    nots = "; ".join(f"{model}: {why}" for model, why in not_valid_on)
    return f"{name}: valid on {where}; not on {nots}"


def _others(skipped: tuple[ConfigReport, ...]) -> str:
    """The configs for other GPU models, counted; a few named when they would reach it."""
    text = f"{len(skipped)} for other GPU models only"
    reaching = [r.name for r in skipped if r.not_valid_on]
    if not reaching or len(reaching) > 3:
        return text
    return f"{text} ({', '.join(reaching)}: no device-filter, so fails if set on it)"


def _evidence(report: ConfigCheck) -> list[str]:
    """Each source of a driver-dependent name once, with every name it backs."""
    grouped: dict[str, list[str]] = {}
    for label, source in report.evidence:
        grouped.setdefault(source, []).append(label)
    return [f"{', '.join(labels)}: {source}" for source, labels in grouped.items()]


def _counts(report: ConfigCheck) -> str:
    parts = []
    for count, noun in ((len(report.warnings), "warning"), (len(report.notes), "note")):
        if count:
            parts.append(f"{count} {noun}{'s' if count > 1 else ''}")
    return f" ({', '.join(parts)})" if parts else ""


def _as_json(
    file: str, source: ConfigSource, report: ConfigCheck, table: _Table | None
) -> dict[str, object]:
    """The stable JSON shape documented in ``docs/mig-parted-config.md``."""
    return {
        "file": file,
        "form": source.form,
        "valid": report.ok,
        "gpu": report.gpu,
        "driver": None if report.driver is None else str(report.driver),
        "table": "catalogue" if table is None else table.source,
        "errors": list(report.errors),
        "configs": [config.as_dict() for config in report.configs],
        "evidence": {label: source for label, source in report.evidence},
    }
