"""The server × dialect combinations the agreement tests run on, as pytest params.

Why one list: every suite that compares remote statistics with the reference runs on both
PromQL engines (Prometheus, VictoriaMetrics) and both metric dialects (migscope's,
dcgm-exporter's); a suite that copied the list could silently drop a combination.
"""

from __future__ import annotations

import pytest

from migscope.analyzer._intake.dialect import Dialect
from support.prometheus import requires_prometheus
from support.victoria import requires_victoria

__all__ = ["ENGINES_AND_DIALECTS"]

ENGINES_AND_DIALECTS = [
    pytest.param(("prometheus", Dialect.MIGSCOPE), marks=requires_prometheus, id="prom-mig"),
    pytest.param(("prometheus", Dialect.DCGM), marks=requires_prometheus, id="prom-dcgm"),
    pytest.param(("victoria", Dialect.MIGSCOPE), marks=requires_victoria, id="vm-mig"),
    pytest.param(("victoria", Dialect.DCGM), marks=requires_victoria, id="vm-dcgm"),
]
"""``(engine, dialect)`` per param, each skipped where its server is not installed."""
