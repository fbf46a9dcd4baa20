"""How carefully to apply: limits, windows, timeouts, where MIG Manager reads its config.

Defaults are the cautious ones: one node at a time, one change per node per day, ten per
cluster per day, no drain, any time of day unless windows are given, no plan from simulated
data nor older than a day. A platform team loosens them knowingly.

:class:`ApplySettings` is the only place they are written: ``migscope apply``'s options
show them (this module imports nothing heavy, so ``--help`` can read it) and
``migscope analyze --apply`` takes them as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

DEFAULT_NAMESPACE = "gpu-operator"
"""Where the GPU Operator (and so MIG Manager and its ConfigMap) usually lives."""

DEFAULT_CONFIGMAP = "migscope-mig-parted-config"
"""The custom mig-parted ConfigMap migscope creates when the ClusterPolicy names none."""

DEFAULT_MAX_PLAN_AGE_S = 24 * 3600.0
"""``--max-plan-age``: a day-old plan still describes the cluster; an older one may not."""

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# Case-insensitive for the day names; the time zone is kept as written (see parse_window_spec).
_SPEC = re.compile(
    r"^(?P<days>[a-z]{3}(?:-[a-z]{3})?(?:,[a-z]{3}(?:-[a-z]{3})?)*)?\s*"
    r"(?P<start>\d{2}:\d{2})-(?P<end>\d{2}:\d{2})(?:\s+(?P<tz>\S+))?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class MaintenanceWindow:
    """A weekly window: days, a start and end time of day, a time zone.

    ``end`` before ``start`` wraps past midnight (``22:00-04:00``). A change starts only
    inside a window; it may finish after it closes (stopping half way would be worse).
    """

    days: frozenset[int]
    start: time
    end: time
    tz: str = "UTC"

    def contains(self, when: datetime) -> bool:
        """Whether ``when`` (aware) is inside the window."""
        local = when.astimezone(ZoneInfo(self.tz))
        t = local.time().replace(tzinfo=None)
        if self.start <= self.end:
            return local.weekday() in self.days and self.start <= t < self.end
        if t >= self.start:
            return local.weekday() in self.days
        yesterday = (local - timedelta(days=1)).weekday()
        return t < self.end and yesterday in self.days


def _day_set(text: str) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        a, b = _DAYS.index(first), _DAYS.index(last or first)
        out.update(range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)])
    return frozenset(out)


def parse_window_spec(text: str) -> MaintenanceWindow:
    """``"sat-sun 01:00-05:00 Europe/Berlin"``, ``"mon,wed 22:00-04:00"``, ``"00:00-06:00"``.

    Day names (and ``UTC``) are accepted in any case. The time zone is otherwise used
    exactly as written: tz database names are file names, case-sensitive on Linux, so
    ``europe/berlin`` is not ``Europe/Berlin`` (the error suggests the right spelling).
    Without a zone the window is in UTC.

    Raises:
        ValueError: anything else (one line saying the expected form, or naming the zone).
    """
    match = _SPEC.match(text.strip() if text else "")
    if match is None:
        raise ValueError(
            f"bad maintenance window {text!r}: expected e.g. 'sat-sun 01:00-05:00 UTC'"
        )
    tz = match["tz"] or "UTC"
    if tz.upper() == "UTC":
        tz = "UTC"
    problem = _zone_problem(tz)
    if problem:
        raise ValueError(f"bad maintenance window {text!r}: {problem}")
    try:
        days = _day_set(match["days"].lower()) if match["days"] else frozenset(range(7))
        start = time.fromisoformat(match["start"])
        end = time.fromisoformat(match["end"])
    except ValueError as exc:
        raise ValueError(f"bad maintenance window {text!r}: bad day or time") from exc
    return MaintenanceWindow(days, start, end, tz)


def _zone_problem(tz: str) -> str:
    """Why ``tz`` is not a usable zone ("" when it is), suggesting the right case if any."""
    try:
        ZoneInfo(tz)
        return ""
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # Not found, not a relative key ("/etc/localtime", "../x"), or a directory ("Europe").
        pass
    folded = [z for z in available_timezones() if z.lower() == tz.lower()]
    hint = f" (names are case-sensitive: did you mean {folded[0]!r}?)" if folded else ""
    return f"unknown time zone {tz!r}{hint}"


@dataclass(frozen=True)
class ApplySettings:
    """Everything the applier needs besides the plan.

    Attributes:
        apply: Change the cluster (False: dry run, print what would change).
        drain: Cordon and evict pods holding devices the change destroys (else skip).
        max_nodes: Nodes changed per run, at most.
        max_changes_per_day: Changes per cluster in any 24 h, at most.
        max_changes_per_node_per_day: Changes per node in any 24 h, at most.
        windows: Maintenance windows; empty: always.
        node_timeout_s: From relabel to ``success``/``failed``, at most.
        drain_timeout_s: For evictions (PDBs answering 429) and pods to go.
        verify_timeout_s: For the device plugin to advertise the new resources.
        namespace: The GPU Operator's namespace (ConfigMap, Lease, Events default here).
        configmap: The mig-parted ConfigMap to write; None: the one the ClusterPolicy names,
            else :data:`DEFAULT_CONFIGMAP`.
        configmap_key: Key of the config in the ConfigMap.
        lease_name: The Lease that keeps appliers one at a time.
        lease_wait_s: How long to wait for another applier to finish.
        lease_duration_s: The Lease's ``leaseDurationSeconds``: how long a silent (dead)
            applier keeps others out.
        identity: This applier's name in the Lease and Events.
        poll_s: Interval for polls (evicted pods going, device plugin catching up).
        allow_simulated: Apply a plan made from simulated data (test clusters only).
        max_plan_age_s: Refuse to apply a plan made longer ago than this (None: no limit).
        allow_stranding: Evict a pod even when its MIG request is a profile no node of its
            pool offers after the plan (it stays Pending until its request changes).
    """

    apply: bool = False
    drain: bool = False
    max_nodes: int = 1
    max_changes_per_day: int = 10
    max_changes_per_node_per_day: int = 1
    windows: tuple[MaintenanceWindow, ...] = ()
    node_timeout_s: float = 20 * 60.0
    drain_timeout_s: float = 10 * 60.0
    verify_timeout_s: float = 120.0
    namespace: str = DEFAULT_NAMESPACE
    configmap: str | None = None
    configmap_key: str = "config.yaml"
    lease_name: str = "migscope-applier"
    lease_wait_s: float = 0.0
    lease_duration_s: int = 60
    identity: str | None = None
    poll_s: float = 2.0
    allow_simulated: bool = False
    max_plan_age_s: float | None = DEFAULT_MAX_PLAN_AGE_S
    allow_stranding: bool = False

    def in_window(self, when: datetime | None = None) -> bool:
        """Whether a change may start now."""
        if not self.windows:
            return True
        moment = when or datetime.now(timezone.utc)
        return any(w.contains(moment) for w in self.windows)
