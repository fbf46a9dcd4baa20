"""The exporter: per-MIG-slice metrics for Prometheus, from NVML, DCGM or the simulator.

The name below is this distribution's front door: the ``migscope`` command mounts the
exporter's click command as its ``exporter`` subcommand. It loads its module on first use
(PEP 562), so importing the package costs nothing: the CLI imports it to print ``--help``,
which must not load prometheus_client or pynvml (``tests/cli/test_lazy_commands.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from migscope.exporter.cli import exporter

_HOME = {
    "exporter": "cli",
}
"""Each exported name's module (under ``migscope.exporter``)."""

__all__ = ["exporter"]


def __getattr__(name: str) -> Any:
    """Load an exported name's module on first use, then keep the name here."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
