"""The window the server can evaluate: end on the step grid, a whole number of steps.

A source that evaluates PromQL snaps its window once, in ``window()``
(:class:`~migscope.analyzer._intake.prometheus_source.PrometheusSource`,
:class:`~migscope.analyzer._intake.embedded_prometheus.EmbeddedPrometheusSource`); the
analysis and :func:`~.evaluate.remote_slice_stats` take that window, and the latter refuses
one off the grid. The statistics computed from raw series must be given the same snapped window when
they are compared (``tests/analyzer/test_stats_agree.py``).
"""

from __future__ import annotations

import math


def snap_window(start: float, end: float, step: float) -> tuple[float, float]:
    """The window the server can evaluate: ``end`` on the step grid, a whole number of steps.

    Why: subquery evaluation points are multiples of ``step`` since the epoch, and
    ``analyzer.stats`` counts step intervals ending at ``end``; the two agree only when ``end`` is
    itself a multiple of ``step`` and the window a whole number of steps. Pass the snapped
    window to the embedded source too when comparing the two.

    Raises:
        ValueError: ``end`` is not after ``start`` or ``step`` is not a positive whole
            number of milliseconds.
    """
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        raise ValueError(f"window end ({end}) must be after its start ({start})")
    step_ms = round(step * 1000)
    if not math.isfinite(step) or step_ms <= 0 or abs(step_ms - step * 1000) > 1e-6:
        raise ValueError(f"step must be a positive whole number of ms, got {step!r} s")
    end_ms = (round(end * 1000) // step_ms) * step_ms
    steps = max(1, -(-(end_ms - round(start * 1000)) // step_ms))
    return (end_ms - steps * step_ms) / 1000.0, end_ms / 1000.0
