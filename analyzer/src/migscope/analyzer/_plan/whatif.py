"""Replay a window's demand, hour by hour, against a layout: would it have been served?

A plan sized from window statistics can still fall short in the hours when demand peaks
together, and a layout someone proposes by hand ("every node all-balanced") may look
plausible and strand half the pods. The replay answers both with the history itself: for
each hour, the demand for a profile is the number of slices of the pool that were busy at
that size and held by a pod during that hour (their held share of it, from
:attr:`~migscope.analyzer._model.SliceStats.hourly`), and the supply is the number of
instances of that profile the layout offers in the pool. What exceeds the supply is unmet.

The pool is the unit because the scheduler can put a pod on any node of the pool; a pod
asking for ``nvidia.com/mig-2g.35gb`` cannot use a ``3g.71gb`` instance (the resource names
differ), so profiles do not substitute for each other. Pending pods are today's demand, not
the window's, and are left out of the replay (the plan covers them separately).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from migscope.analyzer._model import JsonValue


@dataclass(frozen=True)
class ProfileReplay:
    """One profile over the window.

    Attributes:
        profile: GPU-instance profile.
        supply: Instances of it the layout offers in the pool.
        demand_peak: Highest hourly demand (held share summed over slices).
        demand_instance_hours: Demand summed over the hours.
        unmet_peak: Highest hourly demand above the supply.
        unmet_instance_hours: Demand above the supply, summed over the hours.
        hours_short: Hours in which demand exceeded the supply.
    """

    profile: str
    supply: int
    demand_peak: float
    demand_instance_hours: float
    unmet_peak: float
    unmet_instance_hours: float
    hours_short: int

    def as_dict(self) -> dict[str, JsonValue]:
        """The profile's figures as JSON values (rounded for reading)."""
        return {
            "profile": self.profile,
            "supply": self.supply,
            "demand_peak": round(self.demand_peak, 3),
            "demand_instance_hours": round(self.demand_instance_hours, 3),
            "unmet_peak": round(self.unmet_peak, 3),
            "unmet_instance_hours": round(self.unmet_instance_hours, 3),
            "hours_short": self.hours_short,
        }


@dataclass(frozen=True)
class Replay:
    """A layout replayed against a pool's hourly demand.

    Attributes:
        hours: Hours replayed.
        profiles: Every profile demanded or supplied, by name.
    """

    hours: int
    profiles: tuple[ProfileReplay, ...]

    @property
    def unmet_instance_hours(self) -> float:
        """Unmet demand over all profiles, instance-hours."""
        return sum(p.unmet_instance_hours for p in self.profiles)

    @property
    def demand_instance_hours(self) -> float:
        """Demand over all profiles, instance-hours."""
        return sum(p.demand_instance_hours for p in self.profiles)

    @property
    def served_share(self) -> float:
        """Share of the demand the layout would have served (1.0 with no demand)."""
        demand = self.demand_instance_hours
        return 1.0 - self.unmet_instance_hours / demand if demand > 0 else 1.0

    def as_dict(self) -> dict[str, JsonValue]:
        """The replay as JSON values."""
        return {
            "hours": self.hours,
            "served_share": round(self.served_share, 4),
            "unmet_instance_hours": round(self.unmet_instance_hours, 3),
            "demand_instance_hours": round(self.demand_instance_hours, 3),
            "profiles": [p.as_dict() for p in self.profiles],
        }


def replay(
    demand: Mapping[str, Sequence[float]], supply: Mapping[str, int], *, hours: int
) -> Replay:
    """Replay hourly demand per profile against a fixed supply per profile.

    Args:
        demand: ``{profile: per-hour demand}``, each of length ``hours`` (held shares
            summed over the pool's busy slices of that right size).
        supply: ``{profile: instances}`` the layout offers in the pool.
        hours: Window length in hours.

    Raises:
        ValueError: a demand series is not ``hours`` long, or a value is negative.
    """
    rows: list[ProfileReplay] = []
    for profile in sorted(set(demand) | {p for p, n in supply.items() if n}):
        series = list(demand.get(profile, [0.0] * hours))
        if len(series) != hours:
            raise ValueError(f"{profile}: {len(series)} hours of demand, expected {hours}")
        if any(v < 0 for v in series):
            raise ValueError(f"{profile}: negative demand")
        have = int(supply.get(profile, 0))
        short = [max(0.0, v - have) for v in series]
        rows.append(
            ProfileReplay(
                profile=profile,
                supply=have,
                demand_peak=max(series, default=0.0),
                demand_instance_hours=sum(series),
                unmet_peak=max(short, default=0.0),
                unmet_instance_hours=sum(short),
                hours_short=sum(1 for v in short if v > 1e-9),
            )
        )
    return Replay(hours, tuple(rows))
