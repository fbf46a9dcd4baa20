"""What the client's calls return: samples, series as numpy arrays, and the server's timings.

Why a module of its own: these are the types callers hold (the analyzer's Prometheus source
reads :class:`Sample` and :class:`Series`; the benchmark reads :class:`QueryStats`), while
everything else in the package is how they are fetched.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

_T = TypeVar("_T")


def _opt_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _opt_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


@dataclass(frozen=True, slots=True)
class QueryStats:
    """The server's own account of a query (Prometheus ``stats=all``), in seconds.

    Why: the benchmark compares the analyzer's wall time with the time the server spent
    evaluating, so the analyzer's own overhead (HTTP, JSON, numpy) can be measured. Fields
    the server did not report are ``None``; VictoriaMetrics reports none of them.

    Attributes:
        eval_total_time: ``timings.evalTotalTime``: the whole evaluation.
        exec_total_time: ``timings.execTotalTime``: evaluation plus queueing.
        exec_queue_time: ``timings.execQueueTime``: waiting for a query slot.
        query_preparation_time: ``timings.queryPreparationTime``: selecting series.
        inner_eval_time: ``timings.innerEvalTime``: the PromQL engine's inner loop.
        result_sort_time: ``timings.resultSortTime``.
        total_queryable_samples: ``samples.totalQueryableSamples``: samples touched.
        peak_samples: ``samples.peakSamples``: the most samples held at once.
    """

    eval_total_time: float | None = None
    exec_total_time: float | None = None
    exec_queue_time: float | None = None
    query_preparation_time: float | None = None
    inner_eval_time: float | None = None
    result_sort_time: float | None = None
    total_queryable_samples: int | None = None
    peak_samples: int | None = None

    @classmethod
    def from_json(cls, stats: object) -> QueryStats | None:
        """Read ``data.stats``; ``None`` when absent or not an object (engines without it)."""
        if not isinstance(stats, dict):
            return None
        timings = stats.get("timings")
        samples = stats.get("samples")
        timings = timings if isinstance(timings, dict) else {}
        samples = samples if isinstance(samples, dict) else {}
        return cls(
            eval_total_time=_opt_float(timings.get("evalTotalTime")),
            exec_total_time=_opt_float(timings.get("execTotalTime")),
            exec_queue_time=_opt_float(timings.get("execQueueTime")),
            query_preparation_time=_opt_float(timings.get("queryPreparationTime")),
            inner_eval_time=_opt_float(timings.get("innerEvalTime")),
            result_sort_time=_opt_float(timings.get("resultSortTime")),
            total_queryable_samples=_opt_int(samples.get("totalQueryableSamples")),
            peak_samples=_opt_int(samples.get("peakSamples")),
        )

    def merge(self, other: QueryStats) -> QueryStats:
        """Combine the stats of two requests of one logical query (its chunks).

        Times and samples add up, the peak is the larger; a field unknown in either stays
        unknown.
        """

        def add(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + b

        def add_int(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a + b

        return QueryStats(
            eval_total_time=add(self.eval_total_time, other.eval_total_time),
            exec_total_time=add(self.exec_total_time, other.exec_total_time),
            exec_queue_time=add(self.exec_queue_time, other.exec_queue_time),
            query_preparation_time=add(self.query_preparation_time, other.query_preparation_time),
            inner_eval_time=add(self.inner_eval_time, other.inner_eval_time),
            result_sort_time=add(self.result_sort_time, other.result_sort_time),
            total_queryable_samples=add_int(
                self.total_queryable_samples, other.total_queryable_samples
            ),
            peak_samples=None
            if self.peak_samples is None or other.peak_samples is None
            else max(self.peak_samples, other.peak_samples),
        )


class QueryResult(list[_T]):
    """A list of results plus what the server said about producing them.

    It is a plain ``list`` (of :class:`Sample`, :class:`Series`, label sets or strings), so
    callers that only want the data can ignore the rest.

    Attributes:
        result_type: ``vector``, ``scalar`` or ``matrix`` for queries; ``""`` otherwise.
        warnings: The envelope's ``warnings`` (partial data from Thanos stores, failed remote
            reads, ...): the data may be incomplete. Also logged once per client.
        infos: The envelope's ``infos`` (Prometheus 2.50+ query annotations).
        stats: The server's timings, or ``None`` when it reports none (VictoriaMetrics).
        elapsed: Client-side wall time of the call in seconds: requests, retries, parsing.
        requests: HTTP requests the call made (chunks and retries included).
    """

    result_type: str
    warnings: tuple[str, ...]
    infos: tuple[str, ...]
    stats: QueryStats | None
    elapsed: float
    requests: int

    def __init__(
        self,
        items: Iterable[_T] = (),
        *,
        result_type: str = "",
        warnings: Sequence[str] = (),
        infos: Sequence[str] = (),
        stats: QueryStats | None = None,
        elapsed: float = 0.0,
        requests: int = 0,
    ) -> None:
        super().__init__(items)
        self.result_type = result_type
        self.warnings = tuple(warnings)
        self.infos = tuple(infos)
        self.stats = stats
        self.elapsed = elapsed
        self.requests = requests


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of an instant query.

    Attributes:
        labels: The series' labels, ``__name__`` included when the result keeps it.
        timestamp: Evaluation time, Unix seconds.
        value: The value; NaN and ±Inf are kept as floats.
    """

    labels: Mapping[str, str]
    timestamp: float
    value: float


@dataclass(frozen=True, slots=True, eq=False)
class Series:
    """One series of a range query: labels and two aligned float64 arrays.

    Why arrays instead of a list of pairs: a week at 60 s is 10,080 points per slice; as
    numpy arrays that is 160 kB, as Python tuples of floats about 1 MB, and statistics over it
    are one vectorised call.

    Attributes:
        labels: The series' labels.
        timestamps: Unix seconds, strictly increasing.
        values: One value per timestamp (NaN and ±Inf kept).
    """

    labels: Mapping[str, str]
    timestamps: npt.NDArray[np.float64]
    values: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.timestamps.shape[0])

    def points(self) -> Iterator[tuple[float, float]]:
        """Iterate over ``(timestamp, value)`` pairs as Python floats."""
        return zip(self.timestamps.tolist(), self.values.tolist(), strict=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Series):
            return NotImplemented
        return (
            dict(self.labels) == dict(other.labels)
            and np.array_equal(self.timestamps, other.timestamps)
            and np.array_equal(self.values, other.values, equal_nan=True)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable arrays inside: not hashable
