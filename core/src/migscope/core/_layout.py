"""Which sets of MIG instances one GPU can hold, and where each one goes.

A layout is a multiset of GPU-instance profiles ("3g.71gb + 2g.35gb×2"). It is valid iff every
instance can be given a start from its profile's placement list with no two instances sharing
a memory slice, no profile over its instance limit, at most one media-extension (``+me``)
instance, and nothing but ``-me`` instances beside a ``+me.all`` one (it takes every media
engine). Counting slices is not enough: 3g+3g+1g needs 9 of 8 memory slices, and 1g+2g+2g+2g
only fits with the 1g at slot 6 — which is why NVML's own ``-cgi 19,14,14,14`` can fail where
``-cgi 14,14,14,19`` succeeds. The solver here is exact (backtracking over the handful of
starts each profile has), so it never rejects a layout the hardware accepts or vice versa.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from migscope.core._catalogue import find_model, iter_profiles
from migscope.core._errors import UserError
from migscope.core._gpu_models.gpu_model import GiProfile, GpuModel, UnknownProfileError


class LayoutError(UserError, ValueError):
    """A layout that cannot even be read: unknown profile, negative count."""


@dataclass(frozen=True, order=True)
class Layout:
    """A multiset of profile names for one GPU, kept in a canonical order.

    The order is largest profile first, so equal layouts compare and hash equal and print
    the same way everywhere (reports, mig-parted configs, error messages).
    """

    counts: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, model: GpuModel, layout: Mapping[str, int] | Iterable[str]) -> Layout:
        """Build a canonical layout for ``model`` from ``{name: count}`` or a list of names.

        Profile names are resolved through the catalogue (``"MIG "`` prefixes and driver
        aliases accepted) and zero counts dropped.

        Raises:
            LayoutError: a profile the model lacks, a negative or non-integer count.
        """
        pairs: Iterable[tuple[str, int]]
        pairs = layout.items() if isinstance(layout, Mapping) else ((n, 1) for n in layout)
        merged: Counter[str] = Counter()
        for name, count in pairs:
            if isinstance(count, bool) or not isinstance(count, int):
                raise LayoutError(f"count for {name} must be an integer, got {count!r}")
            if count < 0:
                raise LayoutError(f"count for {name} must be >= 0, got {count}")
            try:
                profile = model.profile(str(name))
            except UnknownProfileError as exc:
                raise LayoutError(str(exc)) from exc
            merged[profile.name] += count
        order = {p.name: i for i, p in enumerate(iter_profiles(model))}
        ordered = sorted((n for n, c in merged.items() if c > 0), key=order.__getitem__)
        return cls(tuple((n, merged[n]) for n in ordered))

    def __str__(self) -> str:
        if not self.counts:
            return "(no instances)"
        return " + ".join(name if n == 1 else f"{name}×{n}" for name, n in self.counts)

    def as_dict(self) -> dict[str, int]:
        """``{profile name: count}``, the shape of mig-parted's ``mig-devices``."""
        return dict(self.counts)

    def names(self) -> list[str]:
        """One profile name per instance, largest first."""
        return [name for name, n in self.counts for _ in range(n)]

    def instance_count(self) -> int:
        """How many GPU instances the layout has."""
        return sum(n for _, n in self.counts)


@dataclass(frozen=True)
class PlacedInstance:
    """One GPU instance at a concrete start position (in memory slices)."""

    profile: GiProfile
    start: int

    @property
    def size(self) -> int:
        """Memory slices covered."""
        return self.profile.memory_slices

    def slots(self) -> range:
        """The memory slices this instance covers."""
        return range(self.start, self.start + self.size)

    def __str__(self) -> str:
        return f"{self.profile.name}@{self.start}:{self.size}"


@dataclass(frozen=True)
class LayoutCheck:
    """The answer of :func:`is_valid`: a placement for every instance, or why there is none."""

    model: GpuModel
    layout: Layout
    placements: tuple[PlacedInstance, ...]
    reason: str | None

    @property
    def ok(self) -> bool:
        """True when every instance has a placement."""
        return self.reason is None

    def __bool__(self) -> bool:
        return self.ok

    def compute_slices_used(self) -> int:
        """Compute slices taken by the placed instances."""
        return sum(p.profile.compute_slices for p in self.placements)

    def memory_slices_used(self) -> int:
        """Memory slices taken by the placed instances."""
        return sum(p.size for p in self.placements)


def parse_layout(model: GpuModel | str, layout: Mapping[str, int] | Iterable[str]) -> Layout:
    """Canonical :class:`Layout` for ``model`` (a :class:`GpuModel` or a catalogue key)."""
    gpu = model if isinstance(model, GpuModel) else find_model(model)
    return Layout.of(gpu, layout)


def is_valid(
    model: GpuModel | str,
    layout: Layout | Mapping[str, int] | Iterable[str],
    *,
    keep: Sequence[tuple[str, int]] = (),
) -> LayoutCheck:
    """Find a non-overlapping placement for ``layout`` on ``model``, or say why none exists.

    Args:
        model: The GPU model, or its catalogue key.
        layout: The instances wanted: a :class:`Layout`, ``{name: count}`` or names.
        keep: ``(profile name, start)`` of instances that already exist and must stay
            where they are (the analyzer never moves a slice a pod is using). They count
            towards ``layout``: list them there as well.

    Returns:
        A :class:`LayoutCheck`; ``check.ok`` tells the verdict, ``check.placements`` the
        starts (sorted by start), ``check.reason`` a one-line explanation when invalid, e.g.
        ``"3g.71gb×2 + 1g.18gb: no memory slices left for 1g.18gb"``.
    """
    gpu = model if isinstance(model, GpuModel) else find_model(model)
    try:
        wanted = layout if isinstance(layout, Layout) else Layout.of(gpu, layout)
    except LayoutError as exc:
        return LayoutCheck(gpu, Layout(()), (), str(exc))

    def fail(reason: str) -> LayoutCheck:
        return LayoutCheck(gpu, wanted, (), f"{wanted}: {reason}")

    # Counts first, before one entry per instance is built: a layout asking for 10**30
    # instances (a hostile or broken file) is refused at once instead of exhausting memory.
    counts = Counter({gpu.profile(name).name: count for name, count in wanted.counts})
    for profile in iter_profiles(gpu):
        if counts[profile.name] > profile.max_instances:
            return fail(
                f"at most {profile.max_instances} × {profile.name} per {gpu.key} GPU, "
                f"asked for {counts[profile.name]}"
            )
    profiles = [gpu.profile(name) for name in wanted.names()]
    media = [p.name for p in profiles if p.media_extensions]
    if len(media) > 1:
        return fail(f"at most one media-extension (+me) instance per GPU, asked for {len(media)}")
    if clash := _media_clash(profiles):
        return fail(clash)
    compute = sum(p.compute_slices for p in profiles)
    if compute > gpu.compute_slices:
        return fail(f"needs {compute} compute slices, a {gpu.key} has {gpu.compute_slices}")
    memory = 0
    for profile in profiles:
        memory += profile.memory_slices
        if memory > gpu.memory_slices:
            return fail(f"no memory slices left for {profile.name}")

    fixed: list[PlacedInstance] = []
    occupied = 0
    remaining = list(profiles)
    for name, start in keep:
        try:
            profile = gpu.profile(name)
        except UnknownProfileError as exc:
            return fail(str(exc))
        if start not in profile.placements:
            return fail(
                f"{profile.name} cannot start at slot {start} (allowed: {_starts(profile)})"
            )
        if profile not in remaining:
            return fail(f"kept instance {profile.name}@{start} is not part of the layout")
        placed = PlacedInstance(profile, start)
        mask = _mask(placed)
        if occupied & mask:
            return fail(f"kept instances overlap at {placed}")
        occupied |= mask
        fixed.append(placed)
        remaining.remove(profile)

    order = sorted(remaining, key=lambda p: (-p.memory_slices, len(p.placements), p.name))
    found = _place(order, occupied, gpu.memory_slices)
    if found is not None:
        placements = tuple(sorted([*fixed, *found], key=lambda p: p.start))
        return LayoutCheck(gpu, wanted, placements, None)
    return fail(_why_unplaceable(order, occupied, gpu.memory_slices))


def _media_clash(profiles: Sequence[GiProfile]) -> str | None:
    """Why a ``+me.all`` instance cannot share the GPU with these others, or None.

    ``+me.all`` "allocates all available media engines to this instance" (MIG user guide,
    RTX PRO Blackwell profiles), so every other instance must be one without media engines
    (a ``-me`` profile).
    """
    greedy = next((p for p in profiles if p.takes_all_media), None)
    if greedy is None:
        return None
    holder = next((p for p in profiles if p is not greedy and p.has_media_engines), None)
    if holder is None:
        return None
    return (
        f"{greedy.name} takes every media engine, so no other instance may hold one, and "
        f"{holder.name} does (use a -me profile beside it)"
    )


def _starts(profile: GiProfile) -> str:
    return ",".join(str(s) for s in profile.placements)


def _mask(placed: PlacedInstance) -> int:
    return ((1 << placed.size) - 1) << placed.start


def _place(order: Sequence[GiProfile], occupied: int, slots: int) -> list[PlacedInstance] | None:
    """Backtracking placement; identical profiles take increasing starts (no permutations)."""
    result: list[PlacedInstance] = []

    def step(i: int, used: int) -> bool:
        if i == len(order):
            return True
        profile = order[i]
        floor = result[-1].start + 1 if i and order[i - 1] == profile else 0
        for start in profile.placements:
            if start < floor or start + profile.memory_slices > slots:
                continue
            placed = PlacedInstance(profile, start)
            mask = _mask(placed)
            if used & mask:
                continue
            result.append(placed)
            if step(i + 1, used | mask):
                return True
            result.pop()
        return False

    return result if step(0, occupied) else None


def _why_unplaceable(order: Sequence[GiProfile], occupied: int, slots: int) -> str:
    """Name the first instance (largest first) the larger ones leave no room for."""
    for k in range(len(order) - 1, -1, -1):
        prefix = _place(order[:k], occupied, slots)
        if prefix is None:
            continue
        used = occupied
        for placed in prefix:
            used |= _mask(placed)
        free = [s for s in range(slots) if not used >> s & 1]
        blocked = order[k]
        return (
            f"no free placement for {blocked.name} (it may start at {_starts(blocked)}; "
            f"free memory slices: {','.join(map(str, free)) or 'none'})"
        )
    return "no placement found"  # pragma: no cover - the empty prefix always places


def valid_layouts(model: GpuModel | str) -> tuple[Layout, ...]:
    """Every non-empty layout ``model`` can hold, smallest instance count first.

    Enumerated exhaustively by walking the memory slices left to right and, at each slice,
    either leaving it empty or starting any profile allowed there; the distinct multisets
    of the resulting placements are the valid layouts. A 7-slice GPU has a few hundred.
    """
    gpu = model if isinstance(model, GpuModel) else find_model(model)
    return _valid_layouts(gpu)


def maximal_layouts(model: GpuModel | str) -> tuple[Layout, ...]:
    """Valid layouts to which no further instance can be added."""
    gpu = model if isinstance(model, GpuModel) else find_model(model)
    return _maximal_layouts(gpu)


@cache
def _valid_layouts(gpu: GpuModel) -> tuple[Layout, ...]:
    found: set[Layout] = set()
    profiles = list(iter_profiles(gpu))

    def walk(slot: int, chosen: list[GiProfile], compute: int, media: int, engines: int) -> None:
        """``media``: +me instances chosen; ``engines``: instances holding media engines."""
        if slot >= gpu.memory_slices:
            if chosen:
                found.add(Layout.of(gpu, [p.name for p in chosen]))
            return
        walk(slot + 1, chosen, compute, media, engines)
        greedy = any(p.takes_all_media for p in chosen)
        for profile in profiles:
            if slot not in profile.placements or slot + profile.memory_slices > gpu.memory_slices:
                continue
            if chosen.count(profile) >= profile.max_instances:
                continue
            if compute + profile.compute_slices > gpu.compute_slices:
                continue
            if profile.media_extensions and media:
                continue
            if profile.takes_all_media and engines:
                continue
            if greedy and profile.has_media_engines:
                continue
            chosen.append(profile)
            walk(
                slot + profile.memory_slices,
                chosen,
                compute + profile.compute_slices,
                media + profile.media_extensions,
                engines + profile.has_media_engines,
            )
            chosen.pop()

    walk(0, [], 0, 0, 0)
    return tuple(sorted(found, key=lambda lay: (lay.instance_count(), str(lay))))


@cache
def _maximal_layouts(gpu: GpuModel) -> tuple[Layout, ...]:
    valid = set(_valid_layouts(gpu))
    maximal = []
    for layout in _valid_layouts(gpu):
        grown = (Layout.of(gpu, [*layout.names(), p.name]) for p in gpu.profiles)
        if not any(g in valid for g in grown):
            maximal.append(layout)
    return tuple(maximal)
