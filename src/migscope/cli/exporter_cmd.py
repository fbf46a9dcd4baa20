"""``migscope exporter``: serve per-MIG-slice metrics for Prometheus.

The exporter's modules (prometheus-client, gRPC) are imported only when this command runs, so
the rest of the CLI works on an install without the ``exporter`` extra.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from migscope.cli.errors import InvalidInput

__all__ = ["exporter"]


@click.command()
@click.option(
    "--backend",
    type=click.Choice(["nvml", "dcgm", "sim"]),
    help="Where readings come from: NVML (default), DCGM's hostengine, or the simulator.",
)
@click.option(
    "--scenario", metavar="FILE|NAME", help="Scenario for --backend sim (default: h200-node)."
)
@click.option("--node", help="Scenario node to simulate (default: $NODE_NAME or the first).")
@click.option("--listen", metavar="[HOST]:PORT", help="Address to serve on (default :9400).")
@click.option(
    "--web-config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Prometheus exporter-toolkit web config: TLS and basic auth.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML file of settings (keys as in docs/exporter.md).",
)
@click.option("--interval", type=float, help="Seconds between samples (default 1).")
@click.option(
    "--gpm-interval", type=float, help="Seconds of each GPM activity window (default 10)."
)
@click.option("--kubelet-socket", type=click.Path(path_type=Path), help="PodResources socket.")
@click.option(
    "--pod-attribution/--no-pod-attribution",
    default=None,
    help="Ask the kubelet which pod holds each device (default on).",
)
@click.option(
    "--dcgm-compat/--no-dcgm-compat",
    default=None,
    help="Also emit dcgm-exporter's metric names (default off).",
)
@click.option("--dcgm-host", metavar="HOST[:PORT]", help="nv-hostengine to connect to.")
@click.option(
    "--dcgm-bindings",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory of DCGM's Python bindings.",
)
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), help="Log level."
)
@click.option("--once", is_flag=True, help="Sample twice, print one exposition and exit.")
def exporter(config_file: Path | None, once: bool, **flags: Any) -> None:
    """Serve per-MIG-slice utilisation, memory, power and pod metrics on /metrics.

    Settings come from flags, then MIGSCOPE_EXPORTER_* environment variables, then --config.
    """
    from migscope.exporter.backends.base import BackendError
    from migscope.exporter.http import WebConfigError
    from migscope.exporter.runtime import render_once, serve
    from migscope.exporter.settings import SettingsError, load_settings
    from migscope.sim import ScenarioError

    try:
        settings = load_settings(config_file=config_file, overrides=flags)
    except SettingsError as exc:
        raise InvalidInput(str(exc)) from None
    logging.getLogger().setLevel(settings.log_level.upper())
    try:
        if once:
            sys.stdout.buffer.write(render_once(settings))
            return
        code = serve(settings)
    except (SettingsError, WebConfigError, ScenarioError, BackendError) as exc:
        raise InvalidInput(str(exc)) from None
    except OSError as exc:  # cannot listen, socket in use
        raise InvalidInput(str(exc)) from None
    sys.exit(code)
