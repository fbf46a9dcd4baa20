"""The idle thresholds that the analyzer, the dashboards and the alerts share: one value each.

"Idle" must mean the same in a report, on a dashboard and in an alert, or they disagree about
the same slice. So the numbers live here once: the analyzer's policy takes its defaults from
here (its packaged ``policy-default.yaml`` writes them out for users to read and override),
the dashboards build their queries from here, and the Prometheus rules
(``deploy/prometheus/migscope-rules.yaml``, which cannot import Python) spell the same number
in PromQL. ``tests/core/test_thresholds.py`` fails when the policy file or the rules disagree
with this module.
"""

from __future__ import annotations

IDLE_ACTIVITY_BELOW = 0.05
"""A held slice is idle when its activity (graphics engine active) stays below this ratio.

The analyzer compares the window's p95 (policy ``idle.activity_p95_below``); the dashboards
and the ``MigSliceIdle`` rule compare the last hour's mean. Memory held is not use, so it is
no part of this test."""

IDLE_MEMORY_BELOW = 0.10
"""Where activity is unknown (no GPM/DCGM profiling), the analyzer judges idle on memory: p95
memory use below this share of the slice's memory (policy ``idle.memory_p95_below``). The
dashboards and the rules never call a slice of unknown activity idle."""
