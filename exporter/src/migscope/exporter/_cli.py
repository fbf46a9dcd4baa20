"""``migscope-exporter`` (also ``migscope exporter``): serve per-MIG-slice metrics for Prometheus.

The command lives in the exporter's own distribution so that an exporter image (core, sim,
exporter) has a working command and no analyzer code. The ``migscope`` command mounts the same
click command as its ``exporter`` subcommand. Errors a user can fix are
:class:`~migscope.core._errors.UserError` and print as one line.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

from migscope.core import UserError, one_line


class ListenError(UserError):
    """The address to serve on cannot be used (in use, not permitted, no such interface)."""


@click.command()
@click.version_option(package_name="migscope-exporter", prog_name="migscope-exporter")
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
@click.option("--interval", metavar="DURATION", help="Time between samples (default 1s).")
@click.option(
    "--gpm-interval",
    metavar="DURATION",
    help="Seconds the GPM activity averages, a window sliding every sample (default 10s).",
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
@click.option(
    "--dcgm-counters",
    type=click.Path(dir_okay=False, path_type=Path),
    help="dcgm-exporter collectors CSV choosing the --dcgm-compat families "
    "(default: dcgm-exporter's etc/default-counters.csv).",
)
@click.option(
    "--dcgm-host-label",
    type=click.Choice(["Hostname", "hostname", "none"]),
    help="Host label of --dcgm-compat series: Hostname (dcgm-exporter <= 4.8.2, default), "
    "hostname (4.8.3+) or none.",
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
    from migscope.exporter._malloc import limit_arenas
    from migscope.exporter._runtime import render_once, serve
    from migscope.exporter._settings import load_settings

    settings = load_settings(config_file=config_file, overrides=flags)
    logging.getLogger().setLevel(settings.log_level.upper())
    if once:
        sys.stdout.buffer.write(render_once(settings))
        return
    limit_arenas()  # before any thread starts: see .malloc
    try:
        code = serve(settings)
    except OSError as exc:  # cannot listen, socket in use
        raise ListenError(f"cannot serve on {settings.listen}: {one_line(exc)}") from exc
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """The ``migscope-exporter`` console script: one line for a :class:`UserError`, exit 1."""
    try:
        exporter.main(args=argv, prog_name="migscope-exporter", standalone_mode=True)
    except UserError as exc:
        if os.environ.get("MIGSCOPE_DEBUG"):
            raise
        click.echo(f"migscope-exporter: error: {one_line(exc)}", err=True)
        sys.exit(1)
