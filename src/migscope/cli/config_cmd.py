"""``migscope validate-config``: check a mig-parted config before MIG Manager applies it.

MIG Manager only discovers a bad entry on the node, after it has paused the GPU operands,
and then leaves the node ``failed``. This command finds the same mistakes offline: schema
errors with their line, and layouts that cannot be placed on the GPU models an entry reaches.
Exit status: 0 all configs valid, 1 something invalid or unreadable, 2 usage error.
"""

from __future__ import annotations

import json
import sys

import click

from migscope.cli.errors import InvalidInput
from migscope.cli.params import chosen_format, format_option
from migscope.core.catalogue import GpuModel, UnknownGpuError, find_model
from migscope.core.migparted import ConfigCheck, ConfigError, check_config, parse_config

__all__ = ["validate_config"]


@click.command("validate-config")
@click.argument("file", metavar="FILE")
@click.option(
    "--gpu",
    "gpu_query",
    metavar="MODEL",
    help="Check every config for this GPU model only (catalogue key, NVML name or PCI ID).",
)
@format_option(["text", "json"], help_text="Report format: text (default) or json.")
def validate_config(
    file: str, gpu_query: str | None, format_: str | None, output: str | None
) -> None:
    """Validate the mig-parted config FILE ('-' for stdin) against the MIG catalogue.

    Without --gpu, each entry is checked on every catalogued GPU model it can reach. With
    --gpu, every config meant for that model must fit it; configs for other models only are
    counted and skipped.
    """
    output = chosen_format(format_, output, "text")
    gpu = _resolve_gpu(gpu_query)
    text = _read(file)
    try:
        config = parse_config(text)
    except ConfigError as exc:
        where = f"{file}:{exc.line}" if exc.line is not None else file
        raise InvalidInput(f"{where}: {exc.message}{_more(exc)}") from exc
    report = check_config(config, gpu=gpu)
    if output == "json":
        click.echo(json.dumps(_as_json(file, report), indent=2))
    else:
        _print_text(file, report)
    if not report.ok:
        click.get_current_context().exit(1)


def _resolve_gpu(query: str | None) -> GpuModel | None:
    """The catalogue model for ``--gpu``, or an error line listing the known keys."""
    if query is None:
        return None
    try:
        return find_model(query)
    except UnknownGpuError as exc:
        raise InvalidInput(f"--gpu: {exc}") from exc


def _read(file: str) -> str:
    """The file's text; any reason it cannot be read becomes one error line."""
    if file == "-":
        return sys.stdin.read()
    try:
        with open(file, encoding="utf-8") as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{file}: not UTF-8 text (byte {exc.start})") from exc
    except OSError as exc:
        raise InvalidInput(f"{file}: cannot read: {exc.strerror or exc}") from exc


def _more(exc: ConfigError) -> str:
    """Say how many further problems the schema check found, keeping the error one line."""
    more = len(exc.problems) - 1
    return f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""


def _print_text(file: str, report: ConfigCheck) -> None:
    """Errors one per line on stdout, then warnings; the verdict last."""
    for config in report.invalid:
        for error in config.errors:
            click.echo(error)
    for warning in report.warnings:
        click.echo(f"warning: {warning}")
    for error in report.errors:
        click.echo(f"{file}: {error}")
    skipped = len(report.not_applicable)
    total = len(report.configs) - skipped
    noun = "config" if total == 1 else "configs"
    if report.ok:
        scope = (
            f"on {report.gpu}"
            if report.gpu
            else f"against {len(report.models_checked)} catalogued GPU models"
        )
        others = f"; {skipped} for other GPU models only" if skipped else ""
        click.echo(f"ok: {total} {noun} valid {scope}{others}{_warning_count(report)}")
        return
    bad = len(report.invalid) + len(report.errors)
    click.echo(f"invalid: {bad} of {total} {noun} in {file}", err=True)


def _warning_count(report: ConfigCheck) -> str:
    count = len(report.warnings)
    return f" ({count} warning{'s' if count > 1 else ''})" if count else ""


def _as_json(file: str, report: ConfigCheck) -> dict[str, object]:
    """The stable JSON shape documented in ``docs/mig-parted-config.md``."""
    return {
        "file": file,
        "valid": report.ok,
        "gpu": report.gpu,
        "errors": list(report.errors),
        "configs": [config.as_dict() for config in report.configs],
    }
