"""Where a GPU's own profile table and the catalogue disagree, and how much it matters."""

from __future__ import annotations

from migscope.core._drivers import DriverVersion
from migscope.core._gpu_models.gpu_model import GiProfile, GpuModel, NameStatus
from migscope.core._profile_table.table import (
    Difference,
    ObservedProfile,
    ProfileTable,
    Severity,
    memory_slices_of,
    placements_text,
)


def resolve(observed: ObservedProfile, model: GpuModel) -> GiProfile | None:
    """The catalogued profile an observed one is: by name when it has one, else by id."""
    if observed.name is not None:
        return model.profile(observed.name) if model.has_profile(observed.name) else None
    return model.profile_by_nvml_id(observed.profile_id)


def _diff(
    severity: Severity,
    observed: ObservedProfile,
    field: str,
    got: object,
    want: object,
    message: str,
) -> Difference:
    return Difference(
        severity,
        observed.label,
        field,
        None if got is None else str(got),
        None if want is None else str(want),
        f"{observed.label}: {message}",
    )


ENGINES = ("copy_engines", "decoders", "encoders", "jpegs", "ofas")
_FIELD_WORDS = {
    "compute_slices": "compute slices",
    "sm_count": "SMs",
    "max_instances": "instances per GPU",
    "copy_engines": "copy engines",
    "decoders": "decoders",
    "encoders": "encoders",
    "jpegs": "JPEG decoders",
    "ofas": "OFAs",
}


def identity_differences(
    observed: ObservedProfile, profile: GiProfile, model: GpuModel
) -> list[Difference]:
    """Identity and placement differences between an observed and a catalogued profile."""
    out = []
    if profile.nvml_id != observed.profile_id:
        known = "no NVML id" if profile.nvml_id is None else f"id {profile.nvml_id}"
        out.append(
            _diff(
                "error",
                observed,
                "id",
                observed.profile_id,
                profile.nvml_id,
                f"the GPU gives it id {observed.profile_id}; the catalogue has {known}",
            )
        )
    for field in ("compute_slices", "sm_count", "max_instances", *ENGINES):
        got = getattr(observed, field)
        want = getattr(profile, field)
        if got is not None and got != want:
            out.append(
                _diff(
                    "error",
                    observed,
                    field,
                    got,
                    want,
                    f"{_FIELD_WORDS[field]}: GPU {got}, catalogue {want}",
                )
            )
    if observed.placements is not None and observed.placement_size is not None:
        got_text = placements_text(observed.placements, observed.placement_size)
        want_text = placements_text(profile.placements, profile.memory_slices)
        slices = memory_slices_of(model, observed.placements, observed.placement_size)
        if slices is None:
            out.append(
                _diff(
                    "error",
                    observed,
                    "placements",
                    got_text,
                    want_text,
                    f"placements: GPU {got_text} are not on {model.key}'s grid of "
                    f"{model.placement_unit} driver units per memory slice",
                )
            )
        elif slices != (profile.placements, profile.memory_slices):
            scale = ""
            if model.placement_unit > 1:
                scale = f" ({placements_text(*slices)} in memory slices)"
            out.append(
                _diff(
                    "error",
                    observed,
                    "placements",
                    got_text,
                    want_text,
                    f"placements: GPU {got_text}{scale}, catalogue {want_text}",
                )
            )
    return out


def _mib_text(mib: int, *, printed: bool = False) -> str:
    """A size for messages; one read from ``-lgip`` is shown as it was printed, in GiB."""
    gib = f"{mib / 1024:.2f} GiB"
    return gib if printed else f"{mib} MiB ({gib})"


def _memory(
    observed: ObservedProfile, profile: GiProfile, driver: DriverVersion | None
) -> Difference | None:
    """Memory: equal, within the known variance across drivers (info), or outside it."""
    got = observed.memory_mib
    if got is None:
        return None
    slack = observed.memory_tolerance_mib
    want = profile.memory_mib_on(driver)
    if abs(got - want) <= slack:
        return None
    low, high = profile.memory_range_mib()
    on = f"driver {driver}" if driver is not None else "an unknown driver"
    seen = _mib_text(got, printed=slack > 0)
    if low - slack <= got <= high + slack:
        return _diff(
            "info",
            observed,
            "memory_mib",
            got,
            want,
            f"memory {seen} on {on}, catalogue {_mib_text(want)}: within the "
            f"known variance across drivers ({low}-{high} MiB)",
        )
    return _diff(
        "warning",
        observed,
        "memory_mib",
        got,
        want,
        f"memory {seen} on {on}, catalogue {_mib_text(want)}: outside every "
        f"known driver's size ({low}-{high} MiB)",
    )


def _name(
    observed: ObservedProfile, model: GpuModel, driver: DriverVersion | None
) -> tuple[GiProfile | None, list[Difference]]:
    """The catalogued profile for an observed one, and what its name says."""
    if observed.name is None:
        profile = model.profile_by_nvml_id(observed.profile_id)
        if profile is None:
            return None, [
                _diff(
                    "error",
                    observed,
                    "id",
                    observed.profile_id,
                    None,
                    f"no {model.key} profile has NVML id {observed.profile_id}",
                )
            ]
        return profile, []
    check = model.check_profile_name(observed.name, driver)
    if check.status is NameStatus.UNKNOWN or check.profile is None:
        by_id = model.profile_by_nvml_id(observed.profile_id)
        known = f"; the catalogue calls id {observed.profile_id} {by_id.name}" if by_id else ""
        return None, [
            _diff(
                "error",
                observed,
                "name",
                observed.name,
                by_id.name if by_id else None,
                f"{model.key} has no profile of that name on any driver{known}",
            )
        ]
    if check.status is NameStatus.NOT_ON_DRIVER:
        return check.profile, [
            _diff(
                "error",
                observed,
                "name",
                observed.name,
                check.profile.name,
                f"the GPU prints this name on driver {driver}, the catalogue does not: "
                f"{check.message}",
            )
        ]
    if check.status is NameStatus.DRIVER_DEPENDENT:
        return check.profile, [
            _diff(
                "info",
                observed,
                "name",
                observed.name,
                check.profile.name,
                f"a driver-dependent name: {check.message}",
            )
        ]
    return check.profile, []


def compare(table: ProfileTable, model: GpuModel, driver: DriverVersion | None) -> list[Difference]:
    """Every way ``table`` and ``model``'s catalogue entry disagree, errors first.

    Args:
        table: The GPU's own table.
        model: The catalogued model to compare with.
        driver: The driver that printed the table (None: unknown), for driver-dependent
            names and memory; falls back to ``table.driver``.

    Returns:
        The differences, errors first, then warnings, then information, each group in the
        table's order; a catalogued profile missing from the table comes last in its group.
    """
    driver = driver or table.driver
    found: list[Difference] = []
    matched: set[str] = set()
    for observed in table.profiles:
        profile, named = _name(observed, model, driver)
        found.extend(named)
        if profile is None:
            continue
        matched.add(profile.name)
        found.extend(identity_differences(observed, profile, model))
        memory = _memory(observed, profile, driver)
        if memory is not None:
            found.append(memory)
    found.extend(_unlisted(table, model, driver, matched))
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(found, key=lambda d: order[d.severity])


def _unlisted(
    table: ProfileTable, model: GpuModel, driver: DriverVersion | None, matched: set[str]
) -> list[Difference]:
    """Catalogued profiles the table lacks: expected on its driver (warning) or not (info)."""
    out = []
    for profile in model.profiles:
        if profile.name in matched:
            continue
        label = (
            f"{profile.name} (id {profile.nvml_id})"
            if profile.nvml_id is not None
            else (profile.name)
        )
        if not profile.exists_on(driver):
            continue
        if driver is None and not profile.drivers.is_any:
            severity: Severity = "info"
            why = (
                f"not listed; the catalogue has it from {profile.drivers}, and the driver "
                "is unknown (pass --driver)"
            )
        else:
            severity = "warning"
            on = f"driver {driver}" if driver is not None else "every driver"
            why = f"not listed, although the catalogue offers it on {on}"
        out.append(Difference(severity, label, "listed", None, profile.name, f"{label}: {why}"))
    return out
