"""What a named mig-parted config does to one GPU, and the configs MIG Manager generates.

A node label ``nvidia.com/mig.config=<name>`` means "apply the entries of config ``<name>``
that select this GPU" (``device-filter`` matches its PCI ID, ``devices`` its index). The
what-if replay needs that to count the instances a proposed layout offers, and the applier
needs it to tell which instances a relabel destroys. Both also have to understand the names
every GPU Operator cluster has without a custom ConfigMap: since mig-parted v0.14 MIG
Manager generates ``all-disabled``, ``all-enabled``, ``all-balanced`` and one
``all-<profile>`` per base profile for the GPUs it finds (reference/mig-manager.md §3):
:func:`generated_configs` builds the same for a catalogue model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from migscope.core._errors import UserError
from migscope.core._gpu_models.gpu_model import GiProfile, GpuModel
from migscope.core._migparted import (
    MigConfigEntry,
    MigPartedConfig,
    entry_applies_to,
    gpu_instances,
)


class UnknownConfigError(UserError, KeyError):
    """The config name is not in the mig-parted config (MIG Manager sets ``failed``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown config"


def layout_for_gpu(
    config: MigPartedConfig, name: str, model: GpuModel, index: int
) -> Mapping[str, int] | None:
    """The instances config ``name`` gives GPU ``index`` of ``model``.

    Returns:
        ``{profile: count}`` (empty when the entry disables MIG or creates nothing), or None
        when no entry of the config selects this GPU (mig-parted then leaves it alone).

    Raises:
        UnknownConfigError: ``name`` is not in ``config``.
    """
    entries = config.mig_configs.get(name)
    if entries is None:
        known = ", ".join(sorted(config.mig_configs)[:8])
        raise UnknownConfigError(f"no config named {name!r} (known: {known})")
    # mig-parted walks the entries in order and applies each to the GPUs it selects, so
    # where several select the same GPU the last one is what the GPU ends up with.
    for entry in reversed(entries):
        if _selects(entry, model, index):
            if not entry.mig_enabled:
                return {}
            # Compute-instance profiles ("1c.7g.40gb": 7) share GPU instances as mig-parted
            # builds them: count the GPU instances, not the devices.
            return gpu_instances(
                entry.mig_devices or {}, canonical=lambda gi: model.profile(gi).name
            )
    return None


def _selects(entry: MigConfigEntry, model: GpuModel, index: int) -> bool:
    if not entry_applies_to(entry, model):
        return False
    return entry.devices == "all" or index in entry.devices


def _base_profiles(model: GpuModel) -> list[GiProfile]:
    """Profiles without media-extension variants, the ones MIG Manager generates configs for."""
    return [p for p in model.profiles if not p.media_extensions and "-" not in p.name]


def balanced_layout(model: GpuModel) -> dict[str, int]:
    """MIG Manager's ``all-balanced`` for ``model``.

    ``{1g: 2, 2g: 1, 3g: 1}`` on 7-slice GPUs and ``{1g: 2, 2g: 1}`` on 4-slice ones, each
    G taken by the base profile with the most instances (``1g.10gb`` over ``1g.20gb``).
    """
    wanted = {1: 2, 2: 1, 3: 1} if model.compute_slices >= 7 else {1: 2, 2: 1}
    out: dict[str, int] = {}
    for g, count in wanted.items():
        candidates = [p for p in _base_profiles(model) if p.compute_slices == g]
        if candidates:
            best = max(candidates, key=lambda p: (p.max_instances, -p.memory_slices))
            out[best.name] = count
    return out


def _config_name(profile: GiProfile) -> str:
    return "all-" + profile.name.replace("+", ".")


def generated_configs(models: Iterable[GpuModel]) -> MigPartedConfig:
    """The configs MIG Manager generates for a node with these GPU models.

    One entry per model, filtered by its PCI IDs, in each of ``all-disabled``,
    ``all-enabled``, ``all-balanced`` and ``all-<profile>`` (the profile at its maximum
    count); a profile only some models offer gets entries for those models only.
    """
    configs: dict[str, list[MigConfigEntry]] = {
        "all-disabled": [],
        "all-enabled": [],
        "all-balanced": [],
    }
    for model in models:
        filters = tuple(model.device_filter())

        def entry(
            layout: Mapping[str, int] | None, *, filters: tuple[str, ...] = filters
        ) -> MigConfigEntry:
            return MigConfigEntry(
                devices="all",
                device_filter=filters,
                mig_enabled=layout is not None,
                mig_devices=dict(layout) if layout is not None else None,
            )

        configs["all-disabled"].append(entry(None))
        configs["all-enabled"].append(entry({}))
        configs["all-balanced"].append(entry(balanced_layout(model)))
        for profile in _base_profiles(model):
            configs.setdefault(_config_name(profile), []).append(
                entry({profile.name: profile.max_instances})
            )
    return MigPartedConfig.of(configs)
