"""The Source protocol: every source implements it, and ``run`` works from any of them.

A source of one's own (here: a week of planted slice statistics, as a platform team might
feed from its own store) is analysed by the same ``run(source, options)`` as the built-in
ones, and the report's provenance is what the source says it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import pytest
from support.planted_slices import WEEK, planted_week

from migscope.analyzer._analysis import NothingInWindowError, run
from migscope.analyzer._intake.base import Origin, Slices, Source, SourceError, Window
from migscope.analyzer._intake.embedded_prometheus import EmbeddedPrometheusSource
from migscope.analyzer._intake.file import FileSource
from migscope.analyzer._intake.gpu_facts import GpuFacts
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.prometheus_source import PrometheusSource
from migscope.analyzer._intake.simulation import SimulationSource
from migscope.analyzer._options import AnalyzeOptions, BadOptionError
from migscope.core._catalogue import find_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCRAPE = FIXTURES / "migscope" / "sim-h200-node-once.txt"


class PlantedSource:
    """A week of statistics computed elsewhere: one idle slice and one busy slice."""

    simulated = False

    def __init__(self, *, empty: bool = False) -> None:
        self.empty = empty
        self.closed = False

    def origin(self) -> Origin:
        return {"kind": "planted", "store": "test"}

    def window(self, length_s: float, end: float | None, step_s: float) -> Window:
        return (0.0, WEEK)

    def slices(self, window: Window, step_s: float) -> Slices:
        if self.empty:
            return []
        model = find_model("H200-141GB")
        return [
            planted_week(model, "n1", 0, 3, "3g.71gb", 0, "idle")[0],
            planted_week(model, "n1", 0, 2, "3g.71gb", 4, "busy")[0],
        ]

    def gpus(self) -> Sequence[GpuFacts]:
        return []

    def notes(self) -> Sequence[str]:
        return ["read from the planted store"]

    def __enter__(self) -> PlantedSource:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.closed = True


def test_every_builtin_source_is_a_source() -> None:
    sim = SimulationSource(["h200-node"])
    sources = [
        FileSource(SCRAPE),
        sim,
        PrometheusSource(PrometheusClient("http://127.0.0.1:1")),
        EmbeddedPrometheusSource(sim),
        PlantedSource(),
    ]
    assert all(isinstance(s, Source) for s in sources)
    assert [s.simulated for s in sources] == [False, True, False, True, False]


def test_run_analyses_a_source_of_ones_own_and_closes_it() -> None:
    source = PlantedSource()
    result = run(source, AnalyzeOptions(time_limit_s=2.0))
    assert source.closed
    assert {s.status.value for s in result.slices} == {"idle", "healthy"}
    assert result.provenance is not None
    assert result.provenance["source"] == {"kind": "planted", "store": "test"}
    assert result.provenance["simulated"] is False
    assert "read from the planted store" in result.notes


def test_nothing_in_the_window_is_one_user_error() -> None:
    with pytest.raises(NothingInWindowError, match="no MIG samples in the window"):
        run(PlantedSource(empty=True))


def test_a_simulation_refuses_an_end_time() -> None:
    with pytest.raises(SourceError, match="--end goes with --source or --prometheus"):
        run(SimulationSource(["h200-node"]), AnalyzeOptions(end=0.0))


def test_a_file_window_ends_at_its_newest_sample_on_the_hour() -> None:
    source = FileSource(SCRAPE)
    start, end = source.window(86400.0, None, 60.0)
    assert end - start == 86400.0
    assert end % 3600 == 0
    assert end - 3600 < max(s.last for s in [source._read()]) <= end


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("window_s", 0.0, "window_s must be a number > 0"),
        ("step_s", float("nan"), "step_s must be a number > 0"),
        ("headroom", -0.1, "headroom must be a fraction >= 0"),
        ("price_per_gpu_hour", float("inf"), "price per GPU-hour must be a number >= 0"),
    ],
)
def test_options_refuse_what_no_analysis_can_use(field: str, value: float, message: str) -> None:
    with pytest.raises(BadOptionError, match=message):
        AnalyzeOptions(**{field: value})  # type: ignore[arg-type]
