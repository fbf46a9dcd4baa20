"""The analyzer's data model: what a slice is, and what a window of its history says about it.

Every stage after the sources (statistics, classification, demand, reports) talks in these
types, whichever dialect (migscope's own series or dcgm-exporter's) and whichever source (the
Prometheus HTTP API or a file read by the embedded source) the numbers came from. They are
frozen so that a stage cannot quietly change what an earlier one decided, and each has a
``to_dict()`` that gives plain JSON values (``None`` where a number is unknown, never NaN,
which JSON cannot carry), because the JSON report is a documented, stable schema.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""A value ``json.dumps`` writes as is (floats finite)."""


Holder: TypeAlias = tuple[str, str] | tuple[str, str, str]
"""Who held a slice: ``(namespace, pod)``, or ``(namespace, pod, claim)`` when it was held
through a DRA ResourceClaim (``pod`` is "" when the series named only the claim).

Why two lengths: a device-plugin holder stays the ``(namespace, pod)`` pair every reader and
test knows; a claim is added only where there is one. A claim lives in its pod's namespace
(a pod can only reference claims of its own namespace), so one namespace serves both."""


def holder_claim(holder: Holder) -> str:
    """The claim a holder held the slice through ("" for a device-plugin holder)."""
    return holder[2] if len(holder) == 3 else ""


def json_safe(data: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """``data`` with every non-finite number (which JSON cannot hold) turned into None.

    The last guard before a report: the sources keep statistics finite, but one NaN left in
    a verdict's evidence would make ``report.json`` unwritable (``allow_nan=False``).
    """

    def clean(value: JsonValue) -> JsonValue:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return {k: clean(v) for k, v in data.items()}


def _rounded(value: float | None) -> float | None:
    """:func:`_finite`, to 6 decimals."""
    number = _finite(value)
    return round(number, 6) if number is not None else None


def _finite(value: float | None) -> float | None:
    """``value`` as a float, or None when it is missing or not finite (JSON has no NaN)."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


@dataclass(frozen=True, order=True)
class SliceKey:
    """Identifies one MIG slice (GPU instance) across the fleet.

    The GPU UUID, not the index, is what makes a GPU unique on a node (indices follow PCI
    order and can change when a GPU falls off the bus); the index is kept because people and
    the JSON report speak of "GPU 3". The GPU-instance id is NVML's, which dcgm-exporter calls
    ``GPU_I_ID``; it is unique per GPU at a time, and may be reused after a re-partition.

    Attributes:
        node: Kubernetes node name (from the series' ``node``, ``Hostname``/``hostname`` or
            ``instance`` label).
        gpu: GPU index on the node.
        gpu_uuid: The parent GPU's UUID (``GPU-...``).
        gpu_instance_id: NVML GPU-instance id.
    """

    node: str
    gpu: int
    gpu_uuid: str
    gpu_instance_id: int

    def to_dict(self) -> dict[str, JsonValue]:
        """The key as JSON values, with the report's field names."""
        return {
            "node": self.node,
            "gpu": self.gpu,
            "gpu_uuid": self.gpu_uuid,
            "gpu_instance_id": self.gpu_instance_id,
        }


@dataclass(frozen=True)
class SliceInfo:
    """What a slice is, as opposed to how it was used.

    Attributes:
        key: Which slice.
        model: Catalogue key of the GPU model (``"H200-141GB"``), or None when the GPU is not
            in the catalogue; without it no smaller profile can be suggested.
        profile: GPU-instance profile name as reported (``"3g.71gb"``).
        mig_uuid: The MIG device UUID (``MIG-...``); dcgm-exporter does not report it outside
            DRA mode, so it may be None.
        placement_start: First memory slice the instance occupies, when known (migscope
            reports it; dcgm-exporter does not). The planner keeps in-use instances in place.
    """

    key: SliceKey
    model: str | None
    profile: str
    mig_uuid: str | None = None
    placement_start: int | None = None

    def to_dict(self) -> dict[str, JsonValue]:
        """The slice's identity and shape as JSON values (the key's fields inlined)."""
        return {
            **self.key.to_dict(),
            "model": self.model,
            "profile": self.profile,
            "mig_uuid": self.mig_uuid,
            "placement_start": self.placement_start,
        }


class Owner(NamedTuple):
    """Who held a slice during part of the window: a pod, its DRA claim, or both.

    A named tuple, so that ``owner[:3]`` is the ``(namespace, pod, fraction)`` triple where
    one is handier (tables, CSV rows).

    Attributes:
        namespace: The pod's (and its claim's) namespace ("" when the source did not say).
        pod: The pod's name; "" when only the claim is known (a DRA series without pod
            labels): the slice is held, but no pod can be named, so its GPU is pinned.
        fraction: Share of the observed window in which this holder held the slice, 0..1.
        claim: The ResourceClaim it was held through under DRA; "" for a device plugin.
    """

    namespace: str
    pod: str
    fraction: float
    claim: str = ""

    @classmethod
    def of(cls, holder: Holder, fraction: float) -> Owner:
        """The owner a reader's holder key names, with its share of the window."""
        return cls(holder[0], holder[1], fraction, holder_claim(holder))

    @property
    def who(self) -> str:
        """How the report names it: ``ns/pod``, ``ns/pod (claim c)`` or ``claim ns/c``."""
        if not self.pod:
            return f"claim {self.namespace}/{self.claim}"
        pod = f"{self.namespace}/{self.pod}"
        return f"{pod} (claim {self.claim})" if self.claim else pod

    def to_dict(self) -> dict[str, JsonValue]:
        """The owner as JSON values (``claim`` only for a DRA holder)."""
        out: dict[str, JsonValue] = {
            "namespace": self.namespace,
            "pod": self.pod,
            "fraction": _finite(self.fraction),
        }
        if self.claim:
            out["claim"] = self.claim
        return out


@dataclass(frozen=True)
class HourlyUse:
    """A slice's use per period (an hour by default) of the window, oldest first.

    Why per hour on top of the window statistics: the report's heatmap shows *when* a slice
    works, and the what-if replay needs *when* each slice was held to tell whether a
    proposed layout would have served the demand hour by hour, not just at its peak.

    Attributes:
        period_seconds: Bucket length; bucket ``i`` is ``(start + i·period, start +
            (i+1)·period]``.
        activity: Mean of the per-step activity values in each bucket (the last sample of
            each step interval, NaN dropped), or None where the bucket has none.
        allocated: Share of each bucket's step intervals in which some pod held the slice.
    """

    period_seconds: float
    activity: tuple[float | None, ...]
    allocated: tuple[float, ...]

    def to_dict(self) -> dict[str, JsonValue]:
        """The buckets as JSON values (unknown activity as null), to 6 decimals.

        Why rounded: 168 buckets and two series per slice are most of ``report.json``; a
        mean's 17 significant digits are noise, and 1e-6 of a slice-hour is finer than any
        threshold, chart or sum the report makes (at 10,000 slices: 81 MB instead of 97).
        """
        return {
            "period_seconds": self.period_seconds,
            "activity": [_rounded(v) for v in self.activity],
            "allocated": [_rounded(v) for v in self.allocated],
        }


@dataclass(frozen=True)
class SliceStats:
    """One slice's use over one window: the evidence every decision is made from.

    Quantiles follow Prometheus's ``quantile_over_time`` exactly (see
    :func:`migscope.analyzer._intake.stats_local.prometheus_quantile`), so that the numbers are the
    same
    whether the server computed them in PromQL or the embedded source computed them from raw
    samples. ``None`` means *unknown*, never zero: an Ampere slice without DCGM has no
    activity series at all, and reporting 0 % would call a busy slice idle.

    Attributes:
        info: Which slice, and its profile.
        window_start: Start of the window, Unix seconds (exclusive, as PromQL ranges are).
        window_end: End of the window, Unix seconds (inclusive).
        samples: Distinct timestamps in the window at which the slice reported activity or
            memory.
        expected_samples: Step intervals in the window: what a source sampling once per step
            would have delivered.
        coverage: Share of those step intervals holding at least one sample, 0..1.
        activity_p50: Median graphics-engine activity ratio (0..1), or None if unknown.
        activity_p95: 95th percentile of activity, or None.
        activity_max: Highest activity seen, or None.
        memory_peak_bytes: Highest framebuffer use, or None if unknown.
        memory_p95_bytes: 95th percentile of framebuffer use, or None.
        memory_total_bytes: The slice's framebuffer size, or None if neither the source nor
            the catalogue knows it.
        allocated_fraction: Share of the observed window in which some pod held the slice.
        owners: The pods that held it, largest share first.
        energy_joules: Estimated energy over the window (migscope's per-slice estimate), or
            None where no per-slice estimate exists (dcgm-exporter only repeats the whole
            GPU's energy on every slice, which must not be attributed to one of them).
        hourly: Use per hour of the window, or None when the window is not a whole number
            of hours on the hour grid (or the source did not compute it).
        last_seen: The end of the step interval that holds the slice's newest activity or
            memory sample in the window, Unix seconds (None: none, or the source did not
            say); the one definition both ways of computing statistics use. After a
            re-partition in the window the instances seen last are the current ones; the
            planner must keep them, not the ones they replaced.
    """

    info: SliceInfo
    window_start: float
    window_end: float
    samples: int
    expected_samples: int
    coverage: float
    activity_p50: float | None
    activity_p95: float | None
    activity_max: float | None
    memory_peak_bytes: float | None
    memory_p95_bytes: float | None
    memory_total_bytes: float | None
    allocated_fraction: float
    owners: tuple[Owner, ...]
    energy_joules: float | None
    hourly: HourlyUse | None = None
    last_seen: float | None = None

    @property
    def key(self) -> SliceKey:
        """Shortcut for ``info.key``."""
        return self.info.key

    @property
    def observed_hours(self) -> float:
        """Hours of history behind the statistics: coverage x window length.

        Coverage is a share of the window, so three minutes fully covered are still three
        minutes; the minimum history a plan needs is measured in these hours.
        """
        return max(0.0, min(1.0, self.coverage)) * (self.window_end - self.window_start) / 3600

    @property
    def activity_known(self) -> bool:
        """Whether any activity sample was seen (False on Ampere without DCGM)."""
        return self.activity_p95 is not None

    @property
    def memory_known(self) -> bool:
        """Whether any memory-use sample was seen."""
        return self.memory_peak_bytes is not None

    @property
    def main_owner(self) -> Owner | None:
        """The pod that held the slice longest, or None if no pod held it."""
        return self.owners[0] if self.owners else None

    def to_dict(self) -> dict[str, JsonValue]:
        """Every field as JSON values; the slice's identity is inlined at the top level."""
        return {
            **self.info.to_dict(),
            "window_start": _finite(self.window_start),
            "window_end": _finite(self.window_end),
            "samples": self.samples,
            "expected_samples": self.expected_samples,
            "coverage": _finite(self.coverage),
            "activity_p50": _finite(self.activity_p50),
            "activity_p95": _finite(self.activity_p95),
            "activity_max": _finite(self.activity_max),
            "memory_peak_bytes": _finite(self.memory_peak_bytes),
            "memory_p95_bytes": _finite(self.memory_p95_bytes),
            "memory_total_bytes": _finite(self.memory_total_bytes),
            "allocated_fraction": _finite(self.allocated_fraction),
            "owners": [owner.to_dict() for owner in self.owners],
            "energy_joules": _finite(self.energy_joules),
            "hourly": self.hourly.to_dict() if self.hourly is not None else None,
        }
