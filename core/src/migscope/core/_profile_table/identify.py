"""Which catalogued GPU model a profile table belongs to."""

from __future__ import annotations

from dataclasses import dataclass

from migscope.core._catalogue import all_models, model_for_name, model_for_pci
from migscope.core._gpu_models.gpu_model import GpuModel
from migscope.core._profile_table.compare import compare, identity_differences, resolve
from migscope.core._profile_table.table import ProfileTable


@dataclass(frozen=True)
class Identification:
    """Which catalogued model a table belongs to, and why.

    Attributes:
        model: The model, or None when no model or several fit equally. Where several
            catalogued models have the very same profile table (an H100 NVL and an H100 SXM5
            94GB), the table cannot tell them apart; where comparing with each finds the same
            differences it need not, and the first is chosen.
        basis: How it was found: ``"PCI device ID"``, ``"device name"`` or ``"profiles"``.
        agreeing: With ``"profiles"``: how many of the table's profiles agree with the
            model on identity (name or id, slices, SMs, instance limit, placements).
        candidates: The models that fit equally well (more than one: ambiguous), best first;
            with no fit, the closest ones.
    """

    model: GpuModel | None
    basis: str
    agreeing: int = 0
    candidates: tuple[GpuModel, ...] = ()

    def describe(self, table: ProfileTable) -> str:
        """Why the model was chosen, or why none was, in one line."""
        if self.model is not None:
            if self.basis != "profiles":
                return f"identified by its {self.basis}"
            why = (
                f"identified by its profiles ({self.agreeing} of {len(table.profiles)} agree "
                "on identity)"
            )
            if len(self.candidates) > 1:
                keys = ", ".join(m.key for m in self.candidates)
                why += (
                    f" as one of {keys}, whose catalogued tables are the same (pass --model "
                    "to name one)"
                )
            return why
        keys = ", ".join(m.key for m in self.candidates)
        if len(self.candidates) > 1 and self.agreeing * 2 >= len(table.profiles):
            return f"matches several catalogued models equally ({keys}); pass --model"
        closest = f" (closest: {keys})" if keys else ""
        return f"matches no catalogued model{closest}; pass --model to compare anyway"


def identify_model(table: ProfileTable) -> Identification:
    """The catalogued model a table belongs to: by PCI ID, by device name, else by profiles.

    By profiles, a model scores one point per observed profile that it offers with the same
    identity (see :class:`Identification`); memory does not count, since it varies by
    driver, except to break a tie. The best model wins if it agrees on at least half the
    profiles and no other model scores as high: H20 and GH200-96GB share every profile name
    but not their SM counts. Models still tied after memory are one answer when the table
    names its profiles and comparing it with each finds the same (see
    :class:`Identification`); a bare ``-lgipp`` (ids and placements) is not enough.
    """
    if table.pci_device_id is not None and (found := model_for_pci(table.pci_device_id)):
        return Identification(found, "PCI device ID")
    if table.gpu_name and (found := model_for_name(table.gpu_name)):
        return Identification(found, "device name")
    scored = sorted(
        ((_agreeing(table, model), model) for model in all_models()),
        key=lambda pair: -pair[0],
    )
    best = scored[0][0] if scored else 0
    top = tuple(model for score, model in scored if score == best and score > 0)
    if best * 2 < len(table.profiles) or not top:
        return Identification(None, "profiles", best, top or _closest(table))
    if len(top) > 1:
        top = _best_memory(table, top)
    if len(top) > 1 and (not table.has_details or len({_verdicts(table, m) for m in top}) > 1):
        return Identification(None, "profiles", best, top)
    return Identification(top[0], "profiles", best, top)


def _agreeing(table: ProfileTable, model: GpuModel) -> int:
    return sum(
        1
        for observed in table.profiles
        if (profile := resolve(observed, model)) is not None
        and not [d for d in identity_differences(observed, profile, model) if d.severity == "error"]
    )


def _closest(table: ProfileTable) -> tuple[GpuModel, ...]:
    """Up to three models that know the most of the table's profile names (at least one)."""
    named = [p.name for p in table.profiles if p.name]
    scored = [(sum(m.has_profile(n) for n in named), m) for m in all_models()]
    best = max((score for score, _ in scored), default=0)
    return tuple(m for score, m in scored if score == best and best > 0)[:3]


def _best_memory(table: ProfileTable, models: tuple[GpuModel, ...]) -> tuple[GpuModel, ...]:
    """Of models tied on identity, those whose known memory sizes hold the most profiles."""

    def fits(model: GpuModel) -> int:
        count = 0
        for observed in table.profiles:
            profile = resolve(observed, model)
            if profile is None or observed.memory_mib is None:
                continue
            low, high = profile.memory_range_mib()
            slack = observed.memory_tolerance_mib
            count += low - slack <= observed.memory_mib <= high + slack
        return count

    scores = [fits(m) for m in models]
    return tuple(m for m, score in zip(models, scores, strict=True) if score == max(scores))


def _verdicts(table: ProfileTable, model: GpuModel) -> tuple[tuple[str | None, ...], ...]:
    """What comparing ``table`` with ``model`` finds, without the wording that names it."""
    return tuple(
        (d.severity, d.profile, d.field, d.observed, d.catalogue)
        for d in compare(table, model, table.driver)
    )
