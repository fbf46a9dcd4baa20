"""Fixtures for the simulated-NVML tests (helpers live in ``simhelpers``)."""

from __future__ import annotations

import pytest
from simhelpers import started

from migscope.sim import SimNvml


@pytest.fixture
def probe_h200() -> SimNvml:
    """A simulated copy of the probed H200: MIG off, idle, at the probe's bus id."""
    _, nvml = started({"model": "H200", "pci_bus_id": "00000000:00:06.0"})
    return nvml
