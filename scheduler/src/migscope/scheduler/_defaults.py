"""The scheduler's default limits, light to import: ``migscope schedule --help`` shows them."""

from __future__ import annotations

DEFAULT_KILL_AFTER_SECONDS = 10.0
"""How long a terminated child has between SIGTERM and SIGKILL."""

DEFAULT_SHUTDOWN_GRACE_SECONDS = 60.0
"""How long a running child may finish after SIGTERM/SIGINT before it is terminated."""
