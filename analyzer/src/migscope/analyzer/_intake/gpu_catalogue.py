"""The catalogue one analysis plans with: the GPUs' own profile tables over the built-in one.

Why: the built-in catalogue is pinned to real ``nvidia-smi`` output, but profile names and
memory sizes differ by driver, and a GPU that reported its own table (NVML, through
migscope's exporter) is the authority on what it can build. A plan that names a profile or a
placement the driver does not have fails in MIG Manager; one that names the wrong size
misleads the report. So, per catalogue model:

* every GPU that reported a table agrees with the built-in entry: the built-in one is used;
* they all report the *same* table, and it differs from the built-in entry (a name, an id,
  placements, memory): that table is used for the whole model, and a note says what
  differs (``migscope catalog check`` shows the same on a pasted ``nvidia-smi`` output);
* they disagree with one another: the built-in entry is used, and every node with a GPU
  whose table disagrees with it in identity or placements is not planned (its GPUs keep
  their layout: never plan a layout for hardware whose own table says otherwise);
* where the built-in table is used and the GPUs' drivers are known, profiles that one of
  those drivers does not have (``1g.10gb`` before R525 on an A100 40GB) are left out of
  the model's table, so the plan never names a profile a node's driver refuses.

It also knows each GPU's driver, so that a slice whose profile name exists only on some
drivers (``7g.79gb``) or not on its GPU's driver is said so in the report.

The report's ``provenance.catalogue`` names, per model, which table was used.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from migscope.analyzer._intake.gpu_facts import GpuFacts
from migscope.analyzer._model import SliceInfo
from migscope.core import (
    CatalogueError,
    Difference,
    DriverVersion,
    GpuModel,
    NameStatus,
    ProfileTable,
    UserError,
    compare,
    find_model,
    model_from_table,
)

BUILT_IN = "built-in"
"""``provenance.catalogue`` value of a model planned with the built-in table."""

_MAX_LISTED = 3
"""Differences named in one note; the rest are counted."""


@dataclass(frozen=True)
class GpuCatalogue:
    """The models an analysis plans with, each GPU's driver, and the nodes left out.

    Attributes:
        observed: Models that replace the built-in entry, by catalogue key: the GPUs' own
            table, or the built-in one without the profiles the fleet's drivers lack.
        used: Per catalogue key seen in the data, which table the analysis used
            (``"built-in"``, or ``"observed: ..."`` saying from how many GPUs).
        drivers: Each GPU's driver, by ``(node, gpu_uuid)``, where the data says it.
        unplanned: Nodes not to plan, with the reason (a GPU's table contradicts the rest).
        notes: What the report should say about the tables.
    """

    observed: Mapping[str, GpuModel] = field(default_factory=dict)
    used: Mapping[str, str] = field(default_factory=dict)
    drivers: Mapping[tuple[str, str], DriverVersion] = field(default_factory=dict)
    unplanned: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def model(self, key: str | None) -> GpuModel | None:
        """The model to plan ``key`` with: the GPUs' own table if chosen, else the built-in."""
        if key is None:
            return None
        chosen = self.observed.get(key)
        if chosen is not None:
            return chosen
        try:
            return find_model(key)
        except CatalogueError:
            return None

    def name_notes(self, slices: Iterable[SliceInfo]) -> list[str]:
        """A note per (model, profile) whose name the slices' drivers may not have.

        Counted, not listed per slice: a fleet of 10,000 slices on one old driver gets one
        sentence, with how many slices it concerns.
        """
        found: Counter[tuple[str, str, str]] = Counter()
        for info in slices:
            model = self.model(info.model)
            if model is None or not info.profile:
                continue
            driver = self.drivers.get((info.key.node, info.key.gpu_uuid))
            check = model.check_profile_name(info.profile, driver)
            if check.status in (NameStatus.NOT_ON_DRIVER, NameStatus.DRIVER_DEPENDENT):
                found[(model.key, info.profile, check.message)] += 1
        return [
            f"{count} slice(s) of {profile} on {key}: {message}"
            for (key, profile, message), count in sorted(found.items())
        ]


def _signature(table: ProfileTable) -> tuple[tuple[object, ...], ...]:
    """What makes two tables the same hardware description (memory aside)."""
    return tuple(
        sorted(
            (
                (p.name or "").lower(),
                p.profile_id,
                p.compute_slices,
                p.sm_count,
                p.max_instances,
                p.placements,
                p.placement_size,
            )
            for p in table.profiles
        )
    )


def _summary(differences: Sequence[Difference]) -> str:
    listed = "; ".join(d.message for d in differences[:_MAX_LISTED])
    more = len(differences) - _MAX_LISTED
    return listed + (f"; and {more} more" if more > 0 else "")


def choose_catalogue(facts: Sequence[GpuFacts]) -> GpuCatalogue:
    """Decide, per model, whether the GPUs' own profile table or the built-in one is used."""
    drivers = {(f.node, f.gpu_uuid): f.driver for f in facts if f.driver is not None}
    with_table: dict[str, list[GpuFacts]] = defaultdict(list)
    used: dict[str, str] = {}
    for fact in facts:
        if fact.model is not None:
            used.setdefault(fact.model, BUILT_IN)
            if fact.table is not None:
                with_table[fact.model].append(fact)
    observed: dict[str, GpuModel] = {}
    unplanned: dict[str, str] = {}
    notes: list[str] = []
    for key, gpus in sorted(with_table.items()):
        built = find_model(key)
        tables = [g.table for g in gpus if g.table is not None]
        signatures = {_signature(t) for t in tables}
        differences = [compare(t, built, t.driver) for t in tables]
        if len(signatures) == 1:
            found = differences[0]
            if not found:
                used[key] = f"{BUILT_IN} (agrees with the own table of {len(gpus)} GPU(s))"
                continue
            try:
                observed[key] = model_from_table(tables[0], built)
            except UserError as exc:
                _leave_out(
                    gpus, differences, unplanned, f"its own profile table is unusable: {exc}"
                )
                continue
            used[key] = f"observed: the own table of {len(gpus)} GPU(s)"
            if any(d.severity == "error" for d in found):
                # Its GPUs that did not report a table may be the built-in kind: neither
                # table can be trusted for them, so their layouts stay as they are.
                for fact in facts:
                    if fact.model == key and fact.table is None:
                        unplanned.setdefault(
                            fact.node,
                            f"GPU {fact.gpu_uuid} reported no profile table, and other {key} "
                            "GPUs' own table contradicts the built-in one",
                        )
            notes.append(
                f"{key}: planned with the profile table the GPUs report ({len(gpus)} GPU(s), "
                f"{tables[0].source}), not the built-in one, which differs: {_summary(found)}"
            )
            continue
        _leave_out(
            gpus,
            differences,
            unplanned,
            f"its GPUs report {len(signatures)} different {key} profile tables",
        )
        notes.append(
            f"{key}: GPUs report {len(signatures)} different profile tables; planned with the "
            "built-in one, and nodes whose GPUs contradict it are not planned "
            "(`migscope catalog check` compares a node's `nvidia-smi mig -lgip -lgipp`)"
        )
    by_model: dict[str, list[DriverVersion]] = defaultdict(list)
    for fact in facts:
        if fact.model is not None and fact.driver is not None and fact.model not in observed:
            by_model[fact.model].append(fact.driver)
    for key, versions in sorted(by_model.items()):
        restricted, left, why = _for_drivers(find_model(key), versions)
        if left:
            observed[key] = restricted
            used[key] = f"{BUILT_IN}, without {', '.join(left)} (not on the fleet's drivers)"
            notes.append(f"{key}: planned without {', '.join(left)}: {why}")
    for node, why in sorted(unplanned.items()):
        notes.append(f"{node}: not planned: {why}")
    return GpuCatalogue(observed, used, drivers, unplanned, tuple(notes))


def _for_drivers(
    model: GpuModel, drivers: Iterable[DriverVersion]
) -> tuple[GpuModel, list[str], str]:
    """``model`` without the profiles some of ``drivers`` do not have, what was left out, why.

    The plan names profiles by the catalogue's names; a driver without one (a profile that
    came with a later branch, a name some branches print otherwise) would refuse the config
    in MIG Manager. So a pool plans only with profiles every driver in it has; a GPU already
    running one of the others is then not planned (its profile is not in the pool's table).
    """
    versions = sorted(set(drivers))
    missing: dict[str, list[str]] = {}
    for profile in model.profiles:
        for driver in versions:
            check = model.check_profile_name(profile.name, driver)
            if check.status is NameStatus.NOT_ON_DRIVER:
                missing.setdefault(profile.name, []).append(str(driver))
    if not missing:
        return model, [], ""
    kept = tuple(p for p in model.profiles if p.name not in missing)
    why = "; ".join(f"{name} not on driver {', '.join(found)}" for name, found in missing.items())
    return dataclasses.replace(model, profiles=kept), list(missing), why


def _leave_out(
    gpus: Sequence[GpuFacts],
    differences: Sequence[Sequence[Difference]],
    unplanned: dict[str, str],
    why: str,
) -> None:
    """Mark the nodes of GPUs whose table contradicts the built-in one as not planned."""
    for gpu, found in zip(gpus, differences, strict=True):
        errors = [d for d in found if d.severity == "error"]
        if errors:
            unplanned.setdefault(gpu.node, f"{why}; GPU {gpu.gpu_uuid}: {_summary(errors)}")
