"""The exporter: per-MIG-slice metrics for Prometheus, from NVML, DCGM or the simulator.

The name below is this distribution's front door: the ``migscope`` command mounts the
exporter's click command as its ``exporter`` subcommand. It loads its module on first use
(PEP 562), so importing the package costs nothing: the CLI imports it to print ``--help``,
which must not load prometheus_client or pynvml (``tests/cli/test_lazy_commands.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migscope.core import lazy_exports

if TYPE_CHECKING:
    from migscope.exporter._cli import exporter

_HOME = {
    "exporter": "_cli",
}
"""Each exported name's module (under ``migscope.exporter``)."""

__all__ = ["exporter"]


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
