"""``migscope catalog``: the GPU models, their MIG profiles and placements, and valid layouts.

It answers the questions a platform engineer asks before writing a mig-parted config: what is
the 2g profile called on this GPU, where may it start, and which mixes fit at all; and
``migscope catalog check`` says where a GPU's own ``nvidia-smi mig -lgip``/``-lgipp`` output
disagrees with the catalogue.
"""

from __future__ import annotations

import json
from typing import Any

import click

from migscope.cli._catalog_check import check
from migscope.cli._errors import InvalidInput
from migscope.cli._params import chosen_format, format_option
from migscope.core import (
    CatalogueError,
    GpuModel,
    Layout,
    all_models,
    find_model,
    is_valid,
    maximal_layouts,
    valid_layouts,
)


def _placements_text(starts: tuple[int, ...], size: int) -> str:
    return "{" + ",".join(map(str, starts)) + f"}}:{size}"


def profile_rows(model: GpuModel) -> list[dict[str, Any]]:
    """Profiles of ``model`` in the stable JSON shape documented in docs/catalogue.md."""
    return [
        {
            "name": p.name,
            "id": p.nvml_id,
            "compute_slices": p.compute_slices,
            "memory_slices": p.memory_slices,
            "memory_mib": p.memory_mib,
            "sm_count": p.sm_count,
            "max_instances": p.max_instances,
            "placements": [[start, size] for start, size in p.placement_spans()],
            "media_extensions": p.media_extensions,
            "min_driver": p.min_driver,
            "aliases": list(p.aliases),
        }
        for p in model.profiles
    ]


def _layout_json(model: GpuModel, layout: Layout, maximal: set[Layout]) -> dict[str, Any]:
    check = is_valid(model, layout)
    return {
        "instances": layout.as_dict(),
        "maximal": layout in maximal,
        "compute_slices": check.compute_slices_used(),
        "memory_slices": check.memory_slices_used(),
        "placements": [[p.profile.name, p.start, p.size] for p in check.placements],
    }


def model_json(model: GpuModel, *, layouts: bool, maximal_only: bool) -> dict[str, Any]:
    """The whole answer for one model as JSON-ready data."""
    out: dict[str, Any] = {
        "model": model.key,
        "names": list(model.names),
        "pci_device_ids": model.device_filter(),
        "architecture": model.architecture,
        "compute_slices": model.compute_slices,
        "memory_slices": model.memory_slices,
        "evidence": model.evidence.value,
        "source": model.source,
        "profiles": profile_rows(model),
    }
    if layouts:
        maximal = set(maximal_layouts(model))
        chosen = [lay for lay in valid_layouts(model) if not maximal_only or lay in maximal]
        out["layouts"] = [_layout_json(model, lay, maximal) for lay in chosen]
    return out


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _models_text() -> str:
    rows = [["MODEL", "PCI DEVICE IDS", "SLICES", "EVIDENCE", "NVML NAMES"]]
    for m in all_models():
        rows.append(
            [
                m.key,
                ",".join(m.device_filter()),
                f"{m.compute_slices}c/{m.memory_slices}m",
                m.evidence.value,
                "; ".join(m.names),
            ]
        )
    return _table(rows)


def _model_text(model: GpuModel, *, layouts: bool, maximal_only: bool) -> str:
    head = (
        f"{model.key}: {', '.join(model.names)}\n"
        f"PCI {', '.join(model.device_filter())}; {model.compute_slices} compute and "
        f"{model.memory_slices} memory slices; evidence: {model.evidence.value}"
    )
    rows = [["PROFILE", "ID", "COMPUTE", "MEMORY", "MiB", "SMs", "MAX", "PLACEMENTS"]]
    for p in model.profiles:
        rows.append(
            [
                p.name,
                "?" if p.nvml_id is None else str(p.nvml_id),
                f"{p.compute_slices}/{model.compute_slices}",
                f"{p.memory_slices}/{model.memory_slices}",
                str(p.memory_mib),
                str(p.sm_count),
                str(p.max_instances),
                _placements_text(p.placements, p.memory_slices),
            ]
        )
    parts = [head, "", _table(rows), "", f"source: {model.source}"]
    if model.notes:
        parts.append(f"note: {model.notes}")
    if layouts:
        maximal = set(maximal_layouts(model))
        chosen = [lay for lay in valid_layouts(model) if not maximal_only or lay in maximal]
        total = len(valid_layouts(model))
        if maximal_only:
            parts += ["", f"{len(chosen)} maximal layouts (of {total} valid):"]
        else:
            parts += ["", f"{total} valid layouts ({len(maximal)} maximal):"]
        for lay in chosen:
            check = is_valid(model, lay)
            where = " ".join(str(p) for p in check.placements)
            mark = "  [maximal]" if lay in maximal and not maximal_only else ""
            parts.append(f"  {lay!s:<44} {where}{mark}")
    return "\n".join(parts)


class _CatalogGroup(click.Group):
    """``catalog [MODEL]`` shows the catalogue; ``catalog check FILE`` compares a paste with it.

    Anything that is not a subcommand's name goes to ``show``, so ``migscope catalog H200
    --layouts`` keeps working as it always has.
    """

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] in self.commands:
            return super().resolve_command(ctx, args)
        return "show", self.commands["show"], args


@click.group(
    cls=_CatalogGroup,
    invoke_without_command=True,
    context_settings={"ignore_unknown_options": True},
    options_metavar="",
    subcommand_metavar="[MODEL] [OPTIONS] | check FILE [OPTIONS]",
    help=(
        "The MIG catalogue: GPU models, profiles, placements and valid layouts.\n\n"
        "\b\n"
        "migscope catalog                     list the catalogued GPU models\n"
        "migscope catalog MODEL [--layouts]   one model's profiles ('catalog show MODEL')\n"
        "migscope catalog check FILE          compare nvidia-smi mig -lgip/-lgipp output"
    ),
)
@click.pass_context
def catalog(ctx: click.Context) -> None:
    """Show the catalogue, or run ``check``; what ``catalog MODEL`` means is in ``help``."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(show)


@catalog.command("show")
@click.argument("model", required=False)
@format_option(["table", "json"], help_text="What to print: table (default) or json.")
@click.option("--layouts", is_flag=True, help="Also list every valid layout (needs MODEL).")
@click.option("--maximal", is_flag=True, help="With --layouts: only layouts that cannot grow.")
def show(
    model: str | None, format_: str | None, output: str | None, layouts: bool, maximal: bool
) -> None:
    """Show MIG profiles and placements for MODEL, or list the catalogued GPU models.

    MODEL is a catalogue key (H200-141GB; a unique prefix such as H200 is enough), an NVML
    name ("NVIDIA H200") or a PCI device ID (0x233510DE).
    """
    output = chosen_format(format_, output, "table")
    if model is None:
        if layouts or maximal:
            raise click.UsageError("--layouts needs a MODEL")
        if output == "json":
            data = {
                "models": [model_json(m, layouts=False, maximal_only=False) for m in all_models()]
            }
            click.echo(json.dumps(data, indent=2))
        else:
            click.echo(_models_text())
        return
    if maximal and not layouts:
        raise click.UsageError("--maximal only makes sense with --layouts")
    try:
        gpu = find_model(model)
    except CatalogueError as exc:
        raise InvalidInput(str(exc)) from exc
    if output == "json":
        click.echo(json.dumps(model_json(gpu, layouts=layouts, maximal_only=maximal), indent=2))
    else:
        click.echo(_model_text(gpu, layouts=layouts, maximal_only=maximal))


catalog.add_command(check)
