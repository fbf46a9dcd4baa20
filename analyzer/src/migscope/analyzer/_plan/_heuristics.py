"""Quick constructive plans: the greedy baseline, and warm starts for the MILP.

HiGHS proves optimality from a bound and an incumbent; handing it good plans before it starts
means it never returns anything worse than them, even when the time limit cuts it short, and
often closes the gap at the root. Two starts are built:

* :func:`first_fit_targets`: first-fit decreasing over the pool, the greedy baseline;
* :func:`keep_then_pack_targets`: keep every layout, count what the current layouts already
  cover, and pack only the rest into GPUs that cover nothing (few changes, like the default
  objective wants).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from migscope.analyzer._plan._engine import ANYWHERE, PoolKey, Prepared
from migscope.analyzer._plan.pool import Target
from migscope.core import Layout, is_valid


@dataclass
class Choice:
    """Targets in the MILP's terms: per class GPUs unchanged, per (pool, target) GPUs moved."""

    keep: dict[int, int]
    moves: dict[tuple[PoolKey, Target], int]


def choice_of(prep: Prepared, targets: Sequence[Target]) -> Choice:
    """Aggregate per-GPU targets into class and pool counts."""
    keep: Counter[int] = Counter()
    moves: Counter[tuple[PoolKey, Target]] = Counter()
    for gpu, target in zip(prep.gpus, targets, strict=True):
        if target == gpu.current:
            keep[gpu.cls] += 1
        else:
            moves[(gpu.pool, target)] += 1
    return Choice(dict(keep), dict(moves))


class _Packer:
    """First-fit decreasing into GPUs whose content starts from their kept instances."""

    def __init__(self, prep: Prepared) -> None:
        self.prep = prep
        self.contents: dict[int, Counter[str]] = {}
        self.bins: list[int] = []
        self._fits: dict[tuple[tuple[tuple[str, int], ...], PoolKey], bool] = {}

    def open(self, pos: int) -> None:
        self.contents[pos] = Counter(n for n, _ in self.prep.gpus[pos].kept)
        self.bins.append(pos)

    def fits(self, pos: int, name: str) -> bool:
        if self.prep.gpus[pos].frozen:
            return False  # it keeps exactly what it has: nothing is added
        grown = self.contents[pos] + Counter({name: 1})
        pool = self.prep.gpus[pos].pool
        key = (tuple(sorted(grown.items())), pool)
        if key not in self._fits:
            keep = [(n, s) for n, s in pool if s != ANYWHERE]
            self._fits[key] = is_valid(self.prep.model, grown, keep=keep).ok
        return self._fits[key]

    def pack(self, demand: Mapping[str, int], openable: Iterable[int]) -> dict[str, int]:
        """Pack ``demand`` largest first; return what did not fit."""
        model = self.prep.model
        unopened = deque(openable)
        left_over: dict[str, int] = {}
        order = sorted(
            demand,
            key=lambda n: (-model.profile(n).memory_slices, -model.profile(n).compute_slices, n),
        )
        for name in order:
            left = demand[name]
            for pos in self.bins:
                while left and self.fits(pos, name):
                    self.contents[pos][name] += 1
                    left -= 1
                if not left:
                    break
            while left and unopened:
                pos = unopened.popleft()
                self.open(pos)
                while left and self.fits(pos, name):
                    self.contents[pos][name] += 1
                    left -= 1
            if left:
                left_over[name] = left
        return left_over

    def target(self, pos: int) -> Target:
        return Target(Layout.of(self.prep.model, dict(self.contents[pos])))


def _after_in_use(prep: Prepared) -> dict[str, int]:
    """Demand left once every in-use instance serves its own profile."""
    remaining = dict(prep.demand)
    for gpu in prep.gpus:
        for name, _ in gpu.kept:
            if remaining.get(name, 0) > 0:
                remaining[name] -= 1
    return {n: c for n, c in remaining.items() if c > 0}


def first_fit_targets(prep: Prepared) -> list[Target]:
    """Greedy first-fit decreasing (see :func:`~migscope.analyzer._plan.greedy_first_fit`)."""
    packer = _Packer(prep)
    for gpu in prep.gpus:
        if gpu.busy:
            packer.open(gpu.pos)
    packer.pack(_after_in_use(prep), [g.pos for g in prep.gpus if not g.busy])
    targets = []
    for gpu in prep.gpus:
        if gpu.pos in packer.contents:
            targets.append(packer.target(gpu.pos))
        elif prep.park_free and not gpu.current.empty:
            targets.append(prep.parked)
        else:
            targets.append(gpu.current)
    return targets


def keep_then_pack_targets(prep: Prepared) -> list[Target]:
    """Keep every layout that serves demand; pack the rest into GPUs that serve none.

    Busy GPUs serve first (their in-use instances, then their other instances), then the
    other GPUs, those whose layout serves the most demanded compute first. GPUs left serving
    nothing are repartitioned by first-fit decreasing for what the kept layouts do not cover.
    """
    model = prep.model
    remaining = _after_in_use(prep)

    def serves(pos: int) -> int:
        counts = prep.gpus[pos].current.layout.as_dict()
        return sum(
            model.profile(n).compute_slices * min(c, remaining.get(n, 0)) for n, c in counts.items()
        )

    busy = [g.pos for g in prep.gpus if g.busy]
    others = sorted((g.pos for g in prep.gpus if not g.busy), key=lambda p: (-serves(p), p))
    free: list[int] = []
    for pos in busy + others:
        gpu = prep.gpus[pos]
        spare = Counter(gpu.current.layout.as_dict())
        spare.subtract(Counter(n for n, _ in gpu.kept))
        took = False
        for name, count in spare.items():
            take = min(count, remaining.get(name, 0))
            if take > 0:
                remaining[name] -= take
                took = True
        if not took and not gpu.busy:
            free.append(pos)
    packer = _Packer(prep)
    packer.pack({n: c for n, c in remaining.items() if c > 0}, sorted(free))
    return [packer.target(g.pos) if g.pos in packer.contents else g.current for g in prep.gpus]


def grown(prep: Prepared, targets: Sequence[Target]) -> list[Target]:
    """Fill every changed GPU's layout with demanded instances until none fits.

    The MILP only offers full layouts to changed GPUs (see ``_engine.prepare._candidates``); a
    start whose packed layouts are topped up the same way is one of its solutions, at the
    same cost (instances beyond demand count for nothing), so no extra columns are needed.
    """
    model = prep.model
    order = sorted(
        prep.demand,
        key=lambda n: (-model.profile(n).memory_slices, -model.profile(n).compute_slices, n),
    )
    out: list[Target] = []
    cache: dict[tuple[Target, PoolKey], Target] = {}
    for gpu, target in zip(prep.gpus, targets, strict=True):
        if target == gpu.current or target.empty:
            out.append(target)
            continue
        key = (target, gpu.pool)
        if key not in cache:
            keep = [(n, s) for n, s in gpu.pool if s != ANYWHERE]
            counts = Counter(target.layout.as_dict())
            for name in order:
                while is_valid(model, counts + Counter({name: 1}), keep=keep).ok:
                    counts[name] += 1
            cache[key] = Target(Layout.of(model, dict(counts)))
        out.append(cache[key])
    return out
