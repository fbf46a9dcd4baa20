"""The GPU instances a ``mig-devices`` mapping makes, counting compute-instance profiles right.

A key of ``mig-devices`` names a MIG *device*: a compute instance (CI) in a GPU instance (GI).
``3g.20gb`` is one GI with one CI spanning it; ``1c.3g.20gb`` is a CI of one compute slice in
a 3g.20gb GI. mig-parted (``pkg/mig/config/config.go``, ``SetMigConfig``) flattens the mapping
into one profile per device, sorted by G then C (largest first), and walks it: a device whose
GI profile equals the previous device's first tries to create its CI in that previous GI and
creates a new GI only when the CI does not fit. It retries every distinct ordering until one
succeeds (``iteratePermutationsUntilSuccess``). So ``"1c.7g.40gb": 7`` is seven CIs in ONE
7g.40gb GI, and ``{"3g.20gb": 1, "1c.3g.20gb": 1}`` is two 3g.20gb GIs (the full-width CI
leaves no room for the 1c).

Placement validity depends only on the GIs, and fewer GIs of a profile can only fit better,
so a mapping fits a GPU iff its fewest possible GIs fit: the compute slices of each GI
profile's CIs packed into GIs of G slices each (bin packing, solved exactly here; the
orderings mig-parted tries include one that reaches the optimum). Where more GIs than that
also fit, mig-parted may stop at an ordering that makes more; the fewest is what validity
needs.

Inferred, not verified on hardware: a GI holds CIs whose compute slices sum to at most its G
(CI placement inside a GI is not modelled; NVIDIA's MIG user guide shows 1c/2c/3c/4c CIs in a
4g GI). Sources: NVIDIA/mig-parted@bd7160f ``pkg/mig/config/config.go``,
``pkg/types/mig_config.go`` (``Flatten``), go-nvlib ``pkg/nvlib/device/mig_profile.go``
(``parseMigProfile``: ``[<C>c.]<G>g.<GB>gb[+attr]``, C defaults to G; CI sizes 1, 2, 3, 4, 6,
7, 8 slices in ``NewMigProfile``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache

COMPUTE_INSTANCE_SIZES = frozenset({1, 2, 3, 4, 6, 7, 8})
"""Compute slices of NVML's compute-instance profiles (``NVML_COMPUTE_INSTANCE_PROFILE_*``)."""

_DEVICE_PROFILE = re.compile(r"^(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.(?P<rest>.+)$")
# Past this many GIs of one profile no GPU holds the layout (at most 7 of any profile), so
# the exact packing is not needed: the lower bound already says "too many".
_EXACT_LIMIT = 16


@dataclass(frozen=True)
class DeviceProfile:
    """A ``mig-devices`` key split into its compute instance and its GPU instance.

    Attributes:
        name: The key as written (``"1c.3g.20gb"``).
        gpu_instance: The GI profile name (``"3g.20gb"``; attributes such as ``+me`` stay).
        gi_slices: G, the compute slices of the GI.
        ci_slices: C, the compute slices of the CI (G when the key has no ``Nc.`` part).
    """

    name: str
    gpu_instance: str
    gi_slices: int
    ci_slices: int

    @property
    def is_compute_instance(self) -> bool:
        """True for a CI narrower than its GI (``1c.3g.20gb``), the form mig-parted packs."""
        return self.ci_slices != self.gi_slices


def split_device_profile(name: str) -> DeviceProfile | None:
    """Split ``[<C>c.]<G>g.<rest>``; None when ``name`` does not have that shape."""
    match = _DEVICE_PROFILE.match(name.strip())
    if match is None:
        return None
    g = int(match["g"])
    c = int(match["c"]) if match["c"] is not None else g
    return DeviceProfile(name, f"{g}g.{match['rest']}", g, c)


def compute_instance_problem(name: str) -> str | None:
    """Why the compute-instance part of ``name`` cannot exist, or None.

    ``4c.3g.20gb`` asks for more compute slices than its GI has, and NVML has no 5-slice
    compute instance, so mig-parted can never create ``5c.7g.40gb``.
    """
    split = split_device_profile(name)
    if split is None or not split.is_compute_instance:
        return None
    if split.ci_slices > split.gi_slices:
        return (
            f"{name}: a {split.ci_slices}-slice compute instance does not fit a "
            f"{split.gi_slices}-slice GPU instance"
        )
    if split.ci_slices not in COMPUTE_INSTANCE_SIZES:
        sizes = ", ".join(map(str, sorted(COMPUTE_INSTANCE_SIZES)))
        return f"{name}: NVML has no {split.ci_slices}-slice compute instance (sizes: {sizes})"
    return None


def gpu_instances(
    mig_devices: Mapping[str, int], *, canonical: Callable[[str], str] | None = None
) -> dict[str, int]:
    """The fewest GPU instances per GI profile that ``mig_devices`` can be built in.

    Args:
        mig_devices: ``{profile: count}`` as in a mig-parted entry; keys may be CI profiles.
        canonical: Maps a GI profile name to the name it is grouped under (a model's own
            name for a driver alias); by default names group as written.

    Returns:
        ``{GI profile name: count}`` in first-seen order, zero counts dropped. Keys without
        the ``[<C>c.]<G>g.`` shape pass through unchanged, so that the layout check reports
        them.
    """
    name_of = canonical or (lambda gi: gi)
    sizes: dict[str, Counter[int]] = {}
    capacity: dict[str, int] = {}
    counts: dict[str, int] = {}
    for key, count in mig_devices.items():
        if count <= 0:
            continue
        split = split_device_profile(key)
        if split is None or split.ci_slices > split.gi_slices or split.ci_slices < 1:
            counts[key] = counts.get(key, 0) + count
            continue
        gi = name_of(split.gpu_instance)
        sizes.setdefault(gi, Counter())[split.ci_slices] += count
        capacity[gi] = split.gi_slices
        counts.setdefault(gi, 0)
    for gi, items in sizes.items():
        counts[gi] += _fewest_bins(items, capacity[gi])
    return {name: n for name, n in counts.items() if n > 0}


def _fewest_bins(items: Counter[int], capacity: int) -> int:
    """Fewest bins of ``capacity`` that hold ``items`` ({size: count}), exactly."""
    total = sum(size * n for size, n in items.items())
    lower = -(-total // capacity)  # integer ceiling: counts may be huge
    if lower > _EXACT_LIMIT:
        return lower
    order = tuple(sorted(items, reverse=True))
    return _pack(order, tuple(items[s] for s in order), capacity)


@cache
def _pack(sizes: tuple[int, ...], left: tuple[int, ...], capacity: int) -> int:
    """Fewest bins for ``left[i]`` items of ``sizes[i]`` (sizes descending)."""
    if not any(left):
        return 0
    first = next(i for i, n in enumerate(left) if n)
    # Some bin holds the largest remaining item; try every way to fill the rest of it.
    best = sum(left)
    for filled in _fillings(sizes, left, first, capacity):
        best = min(best, 1 + _pack(sizes, filled, capacity))
    return best


def _fillings(
    sizes: tuple[int, ...], left: tuple[int, ...], first: int, capacity: int
) -> Iterator[tuple[int, ...]]:
    """What is left after one bin takes item ``first`` plus any subset of the others."""
    start = list(left)
    start[first] -= 1

    def fill(index: int, room: int, state: list[int]) -> Iterator[tuple[int, ...]]:
        if index == len(sizes):
            yield tuple(state)
            return
        most = min(state[index], room // sizes[index])
        for take in range(most, -1, -1):
            state[index] -= take
            yield from fill(index + 1, room - take * sizes[index], state)
            state[index] += take

    yield from fill(0, capacity - sizes[first], start)
