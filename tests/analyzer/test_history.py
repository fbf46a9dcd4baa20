"""Slice history written as exposition text reads back to the same statistics, in both dialects.

``--prometheus-embedded`` and anyone backfilling their own Prometheus from a simulated week
rely on the writer: what it writes must be what the exporters publish, so the analyzer's
own reader (the one the tests hold to a real Prometheus) must recover the same evidence.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from migscope.analyzer._intake.backfill import write_openmetrics
from migscope.analyzer._intake.dialect import MIB, Dialect, iter_slice_series
from migscope.analyzer._intake.openmetrics import parse_exposition
from migscope.analyzer._intake.simulation import load_fleet, simulate_slices
from migscope.analyzer._intake.stats_local import SliceSeries, TimeSeries, slice_stats
from migscope.analyzer._model import SliceInfo, SliceKey, SliceStats

WINDOW = 6 * 3600.0
STEP = 60.0


def _direct() -> tuple[list[SliceStats], float, float]:
    sim = load_fleet(["h200-node"])
    start = sim.clock.start
    stats = [
        slice_stats(s, start=start, end=start + WINDOW, step=STEP)
        for s in simulate_slices(sim, window_s=WINDOW, step_s=STEP)
    ]
    return stats, start, start + WINDOW


def _round_trip(dialect: Dialect) -> tuple[list[SliceStats], str]:
    sim = load_fleet(["h200-node"])
    start = sim.clock.start
    out = io.StringIO()
    written = write_openmetrics(
        simulate_slices(sim, window_s=WINDOW, step_s=STEP), out, dialect=dialect
    )
    text = out.getvalue()
    assert written.samples == text.count("\n") - 1
    assert written.first == start + STEP
    assert written.last == start + WINDOW
    series = parse_exposition(text, default_timestamp=start + WINDOW)
    stats = [
        slice_stats(s, start=start, end=start + WINDOW, step=STEP)
        for s in iter_slice_series(series)
    ]
    return stats, text


def _by_key(stats: list[SliceStats]) -> dict[tuple[str, int, int], SliceStats]:
    return {(s.key.node, s.key.gpu, s.key.gpu_instance_id): s for s in stats}


def test_migscope_dialect_round_trips_exactly() -> None:
    want, _, _ = _direct()
    got, text = _round_trip(Dialect.MIGSCOPE)
    assert text.endswith("# EOF\n")
    assert "migscope_gpu_info{" in text
    assert _by_key(got).keys() == _by_key(want).keys()
    for key, a in _by_key(want).items():
        b = _by_key(got)[key]
        assert b.info == a.info
        for field in (
            "samples",
            "coverage",
            "activity_p50",
            "activity_p95",
            "activity_max",
            "memory_peak_bytes",
            "memory_total_bytes",
            "allocated_fraction",
            "energy_joules",
        ):
            assert getattr(b, field) == pytest.approx(getattr(a, field), rel=1e-12), (key, field)
        assert [(o.namespace, o.pod) for o in b.owners] == [(o.namespace, o.pod) for o in a.owners]


def test_dcgm_dialect_reads_back_as_dcgm_exporter_data() -> None:
    want, _, _ = _direct()
    got, text = _round_trip(Dialect.DCGM)
    assert "migscope_" not in text
    assert 'modelName="NVIDIA H200"' in text
    assert _by_key(got).keys() == _by_key(want).keys()
    for key, a in _by_key(want).items():
        b = _by_key(got)[key]
        assert b.info.profile == a.info.profile
        assert b.info.model == a.info.model
        assert b.info.placement_start is None  # dcgm-exporter does not publish it
        assert b.activity_p95 == pytest.approx(a.activity_p95, rel=1e-12)
        assert b.allocated_fraction == a.allocated_fraction
        assert a.memory_peak_bytes is not None
        assert b.memory_peak_bytes is not None
        assert abs(b.memory_peak_bytes - a.memory_peak_bytes) <= MIB / 2  # whole MiB
        assert b.energy_joules is None  # DCGM's energy is the whole GPU's, not the slice's
        assert [(o.namespace, o.pod) for o in b.owners] == [(o.namespace, o.pod) for o in a.owners]


def test_labels_with_quotes_and_owner_changes_survive() -> None:
    stamps = [1000.0 + 60 * k for k in range(10)]
    ms = np.round(np.array(stamps) * 1000).astype(np.int64)
    tricky = SliceSeries(
        info=SliceInfo(SliceKey('n"1\\x', 0, "GPU-1", 3), "H200-141GB", "2g.35gb", "MIG-1", 0),
        activity=TimeSeries.of(stamps, [0.5] * 5 + [math.nan] * 5),
        memory_used=TimeSeries.of(stamps, [float(MIB)] * 10),
        memory_total_bytes=35.0 * 2**30,
        holders={("a", "p1"): ms[:4], ("b", "p2"): ms[6:]},
    )
    for dialect in Dialect:
        out = io.StringIO()
        write_openmetrics([tricky], out, dialect=dialect)
        [back] = list(iter_slice_series(parse_exposition(out.getvalue())))
        assert back.info.key.node == 'n"1\\x'
        assert back.info.profile == "2g.35gb"
        assert sorted(back.holders) == [("a", "p1"), ("b", "p2")]
        assert back.activity is not None
        assert int(math.isnan(back.activity.values[-1])) == 1  # NaN stays NaN


def test_nothing_to_write_is_an_empty_exposition() -> None:
    out = io.StringIO()
    written = write_openmetrics([], out)
    assert out.getvalue() == "# EOF\n"
    assert written.samples == written.series == 0
    assert math.isnan(written.first)
