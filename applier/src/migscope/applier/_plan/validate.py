"""Checking a plan against the MIG catalogue before any node is touched.

MIG Manager finds out that a layout cannot be built only on the node, after the applier has
cordoned it and changed its label; the change then fails and is rolled back. A plan is data
from a file (hand-edited, truncated, written by a buggy or newer tool), so the reader checks
what the catalogue can tell about it first, and refuses the whole plan (one
:class:`~migscope.applier._plan.model.PlanRefused` line) when anything is wrong:

- every mig-parted config the plan names passes the check ``migscope validate-config`` makes
  (:func:`migscope.core._migparted.check_config`), on the model of the node's GPUs when the
  recommendation names it (``--gpu``), else on every catalogued model it can reach;
- every ``current``/``proposed`` layout names profiles of that model, at most
  ``max_instances`` of each, and a proposed layout can be placed on the GPU;
- GPU indexes are ``0 <= index <`` :data:`MAX_GPUS_PER_NODE` and listed once.

Counts are bounded before anything is placed: a layout of 10^30 instances is refused by the
bound rather than expanded into instances. Everything here holds for what the analyzer
writes (its layouts come from the same catalogue), so only a damaged plan is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from migscope.applier._plan.model import PlanRefused
from migscope.core import (
    GpuLayoutV1,
    GpuModel,
    MigConfigEntry,
    MigPartedConfig,
    UnknownGpuError,
    all_models,
    check_config,
    entry_applies_to,
    find_model,
    gpu_instances,
    is_valid,
)

MAX_GPUS_PER_NODE = 64
"""GPU indexes must be below this. Nodes have 8 GPUs, a few 16; 64 is room, not a guess."""

_MOST_OF_ONE_PROFILE = max(p.max_instances for m in all_models() for p in m.profiles)
"""No catalogued GPU holds more instances of one profile (7 × 1g): a bound on any count."""


def model_named(name: str | None, source: str, where: str) -> GpuModel | None:
    """The catalogue model a recommendation names; None when it names none.

    Args:
        name: The recommendation's ``model`` (a catalogue key, as the analyzer writes it).
        source: The plan's file, for the refusal.
        where: The recommendation, e.g. ``recommendations[0] (gpu-a)``.

    Returns:
        The model, or None for a plan that does not say (older or trimmed by hand).

    Raises:
        PlanRefused: the catalogue does not know the model, so nothing can be checked.
    """
    if name is None:
        return None
    try:
        return find_model(name)
    except UnknownGpuError as exc:
        raise PlanRefused(
            source,
            f"{where}: model {name!r} is not in the MIG catalogue, so its layouts cannot be "
            f"checked ({exc})",
        ) from exc


def check_layouts(
    layouts: Sequence[GpuLayoutV1],
    model: GpuModel | None,
    source: str,
    where: str,
    *,
    placeable: bool,
) -> None:
    """Refuse GPU indexes and layouts the catalogue says no GPU of ``model`` can have.

    Args:
        layouts: A recommendation's ``current`` or ``proposed`` list.
        model: The node's GPU model; None: any catalogued model offering the profiles.
        source: The plan's file, for the refusal.
        where: The list, e.g. ``recommendations[0] (gpu-a).proposed``.
        placeable: Also find a placement for each layout (the proposed ones: MIG Manager
            must build them; the current ones were observed, and are only bounded).

    Raises:
        PlanRefused: the first problem, naming the GPU.
    """
    seen: set[int] = set()
    for j, g in enumerate(layouts):
        at = f"{where}[{j}]"
        problem = _index_problem(g.gpu)
        if problem is None and g.gpu in seen:
            problem = f"GPU {g.gpu} is listed more than once"
        if problem is not None:
            raise PlanRefused(source, f"{at}: {problem}")
        seen.add(g.gpu)
        at = f"{at} (gpu {g.gpu})"
        # A layout may name compute-instance profiles ("1c.7g.40gb": 7 is one 7g GPU
        # instance, as mig-parted builds it): check the GPU instances it makes.
        layout = gpu_instances(g.layout)
        problem = _counts_problem(layout, model)
        if problem is None and placeable and g.mig_enabled and layout and model is not None:
            problem = is_valid(model, layout).reason
        if problem is not None:
            raise PlanRefused(source, f"{at}: {problem}")


def check_config_named(
    config: MigPartedConfig, name: str, model: GpuModel | None, source: str, where: str
) -> None:
    """Refuse the named config unless ``migscope validate-config`` would accept it.

    ``validate-config --gpu`` skips an unfiltered entry whose profiles are other models'
    names (mig-parted's own files hold configs for every GPU). A plan's config is applied to
    a node whose GPUs are ``model``, though, so every entry selecting ``model`` must also
    name only its profiles.

    Args:
        config: The plan's mig-parted config (``name`` is in it).
        name: The config the node's label is to name.
        model: The node's GPU model (``validate-config --gpu``); None: every catalogued
            model an entry can reach (``validate-config`` without ``--gpu``).
        source: The plan's file, for the refusal.
        where: The recommendation or node, e.g. ``recommendations[0] (gpu-a)``.

    Raises:
        PlanRefused: a GPU index or a count out of bounds, a profile ``model`` lacks, or
            the check's first error.
    """
    entries = config.mig_configs[name]
    for i, entry in enumerate(entries):
        problem = _entry_problem(entry, model)
        if problem is not None:
            raise PlanRefused(source, f"{where}: mig_config {name!r}: entry {i}: {problem}")
    # Only the named config: the file may hold other people's configs for other GPUs.
    check = check_config(MigPartedConfig.of({name: entries}), gpu=model)
    report = check[name]
    if model is not None and not report.applies:
        raise PlanRefused(
            source,
            f"{where}: mig_config {name!r} has no entry for {model.key} (its device-filter "
            "names other GPUs), so MIG Manager could not apply it",
        )
    errors = (*check.errors, *report.errors)
    if errors:
        on = f" on {model.key}" if model is not None else ""
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise PlanRefused(
            source, f"{where}: mig_config {name!r} is not valid{on}: {errors[0]}{more}"
        )


def _index_problem(index: int) -> str | None:
    """Why ``index`` is no GPU of a node, or None."""
    if index < 0:
        return f"GPU index {index} must be >= 0"
    if index >= MAX_GPUS_PER_NODE:
        return f"GPU index {index} is over {MAX_GPUS_PER_NODE - 1}, more GPUs than a node has"
    return None


def _entry_problem(entry: MigConfigEntry, model: GpuModel | None) -> str | None:
    """What the catalogue check does not say about an entry, checked before it places any."""
    if entry.devices != "all":
        for index in entry.devices:
            problem = _index_problem(index)
            if problem is not None:
                return f"devices: {problem}"
    layout = entry.mig_devices or {}
    for profile, count in layout.items():
        if count > _MOST_OF_ONE_PROFILE:
            return (
                f"{count} × {profile}: at most {_MOST_OF_ONE_PROFILE} instances of one "
                "profile fit any catalogued GPU"
            )
    if model is not None and entry.mig_enabled and entry_applies_to(entry, model):
        for profile in layout:
            if not model.has_profile(profile):
                return _unknown_profile(model, profile)
    return None


def _counts_problem(layout: Mapping[str, int], model: GpuModel | None) -> str | None:
    """Why a layout's profile names or counts cannot be, on ``model`` (None: on any model)."""
    for profile, count in layout.items():
        if model is not None and not model.has_profile(profile):
            return _unknown_profile(model, profile)
        models = [model] if model is not None else _offering(profile, all_models())
        if not models:
            return f"no catalogued GPU offers {profile}"
        most = max(m.profile(profile).max_instances for m in models)
        if count > most:
            per = f"per {model.key} GPU" if model is not None else "per GPU of any catalogued model"
            return f"{count} × {profile}: at most {most} × {profile} {per}"
    return None


def _unknown_profile(model: GpuModel, profile: str) -> str:
    known = ", ".join(p.name for p in model.profiles)
    return f"{model.key} has no MIG profile {profile!r} (known: {known})"


def _offering(profile: str, models: Iterable[GpuModel]) -> list[GpuModel]:
    return [m for m in models if m.has_profile(profile)]
