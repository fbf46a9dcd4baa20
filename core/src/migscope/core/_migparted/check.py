"""Checking a mig-parted config's layouts against the MIG catalogue, before MIG Manager does.

MIG Manager finds out that a layout cannot be built only on the node, mid-change, with the
operands already paused. Here every ``mig-devices`` layout is checked for placement validity
on each catalogued GPU model it can reach (or on the one model asked for), and the verdict
is a report per named config that ``migscope validate-config`` prints as text or JSON.
Profile names are also held against the node's driver: a name the model has only on other
drivers (A100 80GB ``7g.79gb`` is R535-R545 only) is a warning for that driver, and without a
driver such names are noted as driver-dependent (the evidence once per file, not per note).

Without a GPU model, an unfiltered entry points to the models that offer its profile names;
one name can mean two profiles (``1g.10gb`` is the 1-slice profile of an A100 80GB and the
double-memory one of an A100 40GB), so such an entry may fit some of those models and not
others. That is reported per model (``ConfigReport.not_valid_on``), and it is an error only
when the entry fits none of them: MIG Manager would fail on every node it was meant for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from migscope.core._catalogue import all_models
from migscope.core._drivers import DriverVersion
from migscope.core._gpu_models.gpu_model import GpuModel, NameStatus
from migscope.core._layout import Layout, is_valid
from migscope.core._migparted.config import MigConfigEntry, MigPartedConfig
from migscope.core._migparted.filters import DeviceFilterError, parse_device_filter
from migscope.core._migparted.instances import (
    compute_instance_problem,
    gpu_instances,
    split_device_profile,
)

_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class ConfigReport:
    """The verdict on one named config.

    Attributes:
        name: The config name (the value of ``nvidia.com/mig.config``).
        errors: One line each: config, entry index, model and why.
        warnings: Things that did not make the config invalid but were not checked or
            look wrong (an uncatalogued PCI ID, a name no label can select, a profile name
            the given driver does not print).
        models: Keys of the catalogued models the config applies to and was found valid on.
        notes: Without a driver: profile names that exist only on some drivers or boards,
            with where they do.
        applies: False when checking for one GPU model (``gpu=``) and the config is for
            other models only: every entry has a device-filter naming other GPUs, or its
            unfiltered entries use only other models' profile names (``all-1g.5gb`` on an
            H200; then ``not_valid_on`` says that such a node would fail). Such a config is
            not an error: mig-parted's own default files hold configs for every GPU and the
            node label picks one. In a config meant for ``gpu`` every entry that reaches it
            (unfiltered, or filtered for it) is checked.
        not_valid_on: With ``gpu``: ``(gpu, why)`` for a config for other models only
            whose unfiltered entries would still be applied to it. Without ``gpu``:
            ``(model, why)`` for each catalogued model an
            unfiltered entry's profile names point to but whose layout does not fit there
            (``all-1g.10gb``'s seven ``1g.10gb`` on an A100 40GB, where that name is the
            2-slice profile), while it fits another model those names point to.
    """

    name: str
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    applies: bool = True
    notes: tuple[str, ...] = ()
    not_valid_on: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        """True when no error was found."""
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape ``validate-config --output json`` prints per config."""
        return {
            "name": self.name,
            "valid": self.ok,
            "errors": list(self.errors),
            "warnings": list(self.warnings),
            "models": list(self.models),
            "applies": self.applies,
            "notes": list(self.notes),
            "not_valid_on": dict(self.not_valid_on),
        }


@dataclass(frozen=True)
class ConfigCheck:
    """The verdict on a whole config file, one :class:`ConfigReport` per name, in file order."""

    configs: tuple[ConfigReport, ...]
    gpu: str | None = None
    models_checked: tuple[str, ...] = field(default=())
    errors: tuple[str, ...] = ()
    driver: DriverVersion | None = None
    evidence: tuple[tuple[str, str], ...] = ()
    """``(model and name, source)`` for the driver-dependent names of the notes, each once."""

    @property
    def ok(self) -> bool:
        """True when every named config is valid and the file as a whole is sound."""
        return not self.errors and all(report.ok for report in self.configs)

    @property
    def not_applicable(self) -> tuple[ConfigReport, ...]:
        """With ``gpu``: the configs meant for other GPU models only."""
        return tuple(report for report in self.configs if not report.applies)

    @property
    def invalid(self) -> tuple[ConfigReport, ...]:
        """The configs with errors."""
        return tuple(report for report in self.configs if not report.ok)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every warning of every config."""
        return tuple(w for report in self.configs for w in report.warnings)

    @property
    def notes(self) -> tuple[str, ...]:
        """Every note of every config."""
        return tuple(n for report in self.configs for n in report.notes)

    def __getitem__(self, name: str) -> ConfigReport:
        """The report of the config called ``name``."""
        for report in self.configs:
            if report.name == name:
                return report
        raise KeyError(name)


def entry_applies_to(entry: MigConfigEntry, model: GpuModel) -> bool:
    """Whether ``entry``'s device-filter selects ``model`` (no filter selects every GPU).

    Only the device+vendor part counts: the subsystem suffix and the case are ignored,
    because the catalogue knows models by device ID.
    """
    if entry.device_filter is None:
        return True
    return any(_filter_id(f) in model.pci_device_ids for f in entry.device_filter)


def check_config(
    config: MigPartedConfig,
    *,
    gpu: GpuModel | None = None,
    driver: DriverVersion | None = None,
) -> ConfigCheck:
    """Check every named config's layouts against the MIG catalogue.

    Without ``gpu``, an entry with a device-filter must fit every model the filter names. An
    entry without one is checked on every model that offers all its profile names: it is
    valid on those it fits, listed as not valid on the others (``not_valid_on``), and an
    error only when it fits none. With ``gpu``, every entry that reaches that model (no
    filter, or a filter naming it) must fit it; configs none of whose entries reach it are
    reported as not applicable, and it is an error if no config applies at all.

    Args:
        config: A parsed config.
        gpu: Check for this one model only (a catalogued model, or one made from the GPU's
            own profile table by :func:`migscope.core._profile_table.model_from_table`).
        driver: The nodes' driver: profile names the model has only on other drivers are
            warnings. None: names that depend on the driver are notes.

    Returns:
        A :class:`ConfigCheck` with a report per config name.
    """
    evidence: dict[str, str] = {}
    reports = tuple(
        _check_named(name, entries, gpu, driver, evidence)
        for name, entries in config.mig_configs.items()
    )
    if gpu is None:
        models = tuple(m.key for m in all_models())
        return ConfigCheck(reports, None, models, driver=driver, evidence=tuple(evidence.items()))
    errors: tuple[str, ...] = ()
    if not any(report.applies for report in reports):
        errors = (_nothing_for(gpu, reports),)
    return ConfigCheck(reports, gpu.key, (gpu.key,), errors, driver, tuple(evidence.items()))


def _nothing_for(gpu: GpuModel, reports: Sequence[ConfigReport]) -> str:
    """The file-level error when no config is for ``gpu``, saying why."""
    filtered = sum(1 for r in reports if not r.not_valid_on)
    foreign = len(reports) - filtered
    parts = []
    if filtered:
        parts.append(f"{_configs(filtered)} filter{'s' if filtered == 1 else ''} other GPUs only")
    if foreign:
        parts.append(
            f"{_configs(foreign)} use{'s' if foreign == 1 else ''} other models' profiles "
            "with no device-filter"
        )
    return f"no config in the file applies to {gpu.key} ({'; '.join(parts)})"


def _configs(n: int) -> str:
    return f"{n} config{'s' if n != 1 else ''}"


@dataclass
class _Findings:
    """What checking one named config found so far."""

    name: str
    driver: DriverVersion | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    models: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    not_valid_on: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)

    def report(self) -> ConfigReport:
        order = [m.key for m in all_models()]
        valid = self.models - set(self.not_valid_on)
        models = sorted(valid, key=lambda k: order.index(k) if k in order else len(order))
        return ConfigReport(
            self.name,
            tuple(self.errors),
            tuple(self.warnings),
            tuple(models),
            notes=tuple(dict.fromkeys(self.notes)),
            not_valid_on=tuple(self.not_valid_on.items()),
        )


def _check_named(
    name: str,
    entries: Sequence[MigConfigEntry],
    gpu: GpuModel | None,
    driver: DriverVersion | None,
    evidence: dict[str, str],
) -> ConfigReport:
    found = _Findings(name, driver, evidence=evidence)
    if not _LABEL_VALUE.match(name):
        found.warnings.append(
            f"{name}: not a valid Kubernetes label value, so nvidia.com/mig.config cannot select it"
        )
    if gpu is None:
        for index, entry in enumerate(entries):
            _check_entry_on_catalogue(found, index, entry)
        return found.report()
    # MIG Manager applies every entry whose filter matches the GPU, and an entry without a
    # filter matches every GPU: in a config meant for the GPU all of them must fit (issue 25).
    reaching = [(i, e) for i, e in enumerate(entries) if entry_applies_to(e, gpu)]
    if not reaching:
        return ConfigReport(name, warnings=tuple(found.warnings), applies=False)
    foreign = _foreign_entries(reaching, gpu)
    if foreign is not None:
        return ConfigReport(
            name,
            warnings=tuple(found.warnings),
            applies=False,
            not_valid_on=((gpu.key, foreign),),
        )
    for index, entry in reaching:
        _check_entry_on(found, index, entry, gpu)
    return found.report()


def _foreign_entries(reaching: Sequence[tuple[int, MigConfigEntry]], gpu: GpuModel) -> str | None:
    """Why a config is for other GPU models only, though its unfiltered entries reach ``gpu``.

    mig-parted's own files hold one config per GPU family without device-filters
    (``all-1g.5gb`` for A100 40GB): the node's label picks the config, and a node of another
    model labelled with it fails. Such a config is not for ``gpu`` when every entry that
    reaches it and creates instances is unfiltered and uses none of ``gpu``'s profile names,
    all of another model's. None: the config is meant for ``gpu`` and every entry is checked.
    """
    creating = [(i, e) for i, e in reaching if e.mig_enabled and e.mig_devices]
    if not creating or any(e.device_filter is not None for _, e in creating):
        return None
    reasons = []
    for index, entry in creating:
        names = list(entry.mig_devices or {})
        if any(gpu.has_profile(n) for n in names):
            return None
        owners = [m.key for m in all_models() if all(m.has_profile(n) for n in names)]
        if not owners:
            return None
        reasons.append(
            f"entry {index} uses {' and '.join(names)} ({', '.join(owners[:3])}"
            f"{', ...' if len(owners) > 3 else ''})"
        )
    return (
        f"{'; '.join(reasons)} with no device-filter: a {gpu.key} node labelled with this "
        "config would fail"
    )


def _check_entry_on_catalogue(found: _Findings, index: int, entry: MigConfigEntry) -> None:
    """Check one entry on every catalogued model it can reach (no ``--gpu``)."""
    if entry.device_filter is not None:
        targets: list[GpuModel] = []
        for text in entry.device_filter:
            model = _model_for_filter(text)
            if model is None:
                found.warnings.append(
                    f"{found.name}: entry {index}: {text} is not in the catalogue; not checked"
                )
            elif model not in targets:
                targets.append(model)
    elif not entry.mig_enabled or not entry.mig_devices:
        targets = list(all_models())
    else:
        targets = [m for m in all_models() if all(m.has_profile(p) for p in entry.mig_devices)]
        if not targets:
            found.errors.append(
                f"{found.name}: entry {index}: {_missing_profiles(list(entry.mig_devices))}"
            )
            return
        _check_unfiltered(found, index, entry, targets)
        return
    for model in targets:
        _check_entry_on(found, index, entry, model)


def _check_unfiltered(
    found: _Findings, index: int, entry: MigConfigEntry, targets: Sequence[GpuModel]
) -> None:
    """An unfiltered entry on the models its names point to: valid on some is enough.

    The same name can be two profiles (``1g.10gb``: 1 slice on an A100 80GB, 2 on an A100
    40GB), so a layout may fit one of the models and not another; each such model is
    recorded as not valid, and the entry is an error only when it fits none.
    """
    problems = {m.key: _layout_problem(entry, m) for m in targets}
    fits = [m for m in targets if problems[m.key] is None]
    if not fits:
        for model in targets:
            found.errors.append(
                f"{found.name}: entry {index} on {model.key}: {problems[model.key]}"
            )
        return
    for model in targets:
        reason = problems[model.key]
        if reason is None:
            found.models.add(model.key)
        else:
            found.not_valid_on.setdefault(model.key, f"entry {index}: {reason}")
        if entry.mig_enabled:
            _check_names_on_driver(found, index, entry, model)


def _check_entry_on(found: _Findings, index: int, entry: MigConfigEntry, model: GpuModel) -> None:
    """Check one entry's layout on one model, recording an error or the model."""
    reason = _layout_problem(entry, model)
    if reason is None:
        found.models.add(model.key)
    else:
        found.errors.append(f"{found.name}: entry {index} on {model.key}: {reason}")
    if entry.mig_enabled:
        _check_names_on_driver(found, index, entry, model)


def _check_names_on_driver(
    found: _Findings, index: int, entry: MigConfigEntry, model: GpuModel
) -> None:
    """Warn about names the driver does not print; note driver-dependent ones."""
    where = f"{found.name}: entry {index} on {model.key}"
    for name in entry.mig_devices or {}:
        verdict = model.check_profile_name(name, found.driver)
        if verdict.status is NameStatus.NOT_ON_DRIVER:
            found.warnings.append(f"{where}: {verdict.message}")
        elif verdict.status is NameStatus.DRIVER_DEPENDENT:
            found.notes.append(f"{where}: {_short_note(model, name, found)}")


def _short_note(model: GpuModel, name: str, found: _Findings) -> str:
    """Where a driver-dependent name exists, in a few words; its evidence goes to the file.

    The evidence of a name fact (GB200's early names cite three sources in 300 characters)
    is the same for every config that uses the name, so it is kept once per file
    (:attr:`ConfigCheck.evidence`) instead of in each note.
    """
    profile = model.profile(name)
    wanted = name.split(".", 1)[1] if _is_ci(name) else name
    facts = [f for f in profile.known_names() if f.name.lower() == wanted.lower()]
    others = [f for f in profile.known_names() if f.name.lower() != wanted.lower()]
    for fact in facts:
        if fact.evidence != "the catalogue's reference name":
            found.evidence.setdefault(f"{model.key} {fact.name}", fact.evidence)
    where = "; ".join(f.where() for f in facts) or str(profile.drivers)
    text = f"{wanted} exists only on {where}"
    if others:
        text += "; elsewhere " + ", ".join(f"{f.name} on {f.where()}" for f in others)
    return text


def _is_ci(name: str) -> bool:
    split = split_device_profile(name)
    return split is not None and split.is_compute_instance


def _layout_problem(entry: MigConfigEntry, model: GpuModel) -> str | None:
    """Why the entry's layout cannot be built on ``model``, or None if it can.

    Compute-instance keys (``"1c.7g.40gb": 7``) are counted as mig-parted builds them: CIs
    share GPU instances, so the layout checked is the GPU instances they need.
    """
    if not entry.mig_enabled or not entry.mig_devices:
        return None
    devices = entry.mig_devices
    for name in devices:
        problem = compute_instance_problem(name)
        if problem is not None:
            return problem
    if not all(model.has_profile(name) for name in devices):
        return is_valid(model, devices).reason
    instances = gpu_instances(devices, canonical=lambda gi: model.profile(gi).name)
    reason = is_valid(model, instances).reason
    if reason is None or not _has_compute_instances(devices):
        return reason
    made = Layout.of(model, instances)
    return f"{reason} (mig-devices {_devices_text(devices)} make GPU instances {made})"


def _has_compute_instances(devices: Mapping[str, int]) -> bool:
    return any(
        (split := split_device_profile(name)) is not None and split.is_compute_instance
        for name in devices
    )


def _devices_text(devices: Mapping[str, int]) -> str:
    return " + ".join(name if n == 1 else f"{name}×{n}" for name, n in devices.items() if n)


def _missing_profiles(names: Sequence[str]) -> str:
    """Why no model offers all of ``names``: the unknown ones, or that they never meet."""
    unknown = [n for n in names if not any(m.has_profile(n) for m in all_models())]
    if unknown:
        return f"no catalogued GPU offers {', '.join(unknown)}"
    return f"no catalogued GPU offers {' and '.join(names)} together"


def _filter_id(text: str) -> int:
    """The packed device+vendor ID of a device-filter string (validated already)."""
    try:
        return parse_device_filter(text).device_vendor
    except DeviceFilterError:  # pragma: no cover - the schema admits only readable filters
        return -1


def _model_for_filter(text: str) -> GpuModel | None:
    wanted = _filter_id(text)
    return next((m for m in all_models() if wanted in m.pci_device_ids), None)
