"""``migscope demo``: the one-minute tour, with no GPU, no Prometheus and no cluster.

It simulates a week of a small mixed fleet from the built-in scenarios (``fleet-mixed``:
two H100 nodes and an A100 node with Alibaba inference traces and a re-partition on day 3;
``h200-node``: an HGX H200 node with idle, oversized, saturated and unallocated slices),
analyses it exactly as ``migscope analyze`` would, and writes every output into ``--out``.
With ``--prometheus-embedded`` the week is first backfilled into a real Prometheus started
for the run (``prometheus``/``promtool`` on the PATH) and the statistics come from PromQL.
The simulator's ground truth is sampled directly (no NVML calls, no text round trip), which
is what keeps a week of four nodes well under a minute on two cores.
"""

from __future__ import annotations

import sys
import time

import click

from migscope.analyzer.policy import default_policy
from migscope.analyzer.report import write_reports
from migscope.cli.analyze_cmd import parse_window, run_analysis, summary_lines
from migscope.cli.errors import InvalidInput

__all__ = ["DEMO_FLEET", "demo"]

DEMO_FLEET = "fleet-mixed,h200-node"
"""The built-in scenarios the demo runs together: 4 nodes, H100, A100 and H200."""


@click.command("demo")
@click.option(
    "--out",
    "out_dir",
    default="migscope-demo",
    show_default=True,
    metavar="DIR",
    help="Where to write the reports, the mig-parted config and the node plan.",
)
@click.option("--window", default="7d", show_default=True, help="Simulated window length.")
@click.option(
    "--scenario",
    default=DEMO_FLEET,
    show_default=True,
    help="Scenario(s) to simulate, comma-separated (built-in names or files).",
)
@click.option("--price-per-gpu-hour", type=float, default=None, help="Adds costs to savings.")
@click.option(
    "--prometheus-embedded",
    is_flag=True,
    help="Run the analysis through a real Prometheus (on PATH) backfilled with the week.",
)
def demo(
    out_dir: str,
    window: str,
    scenario: str,
    price_per_gpu_hour: float | None,
    prometheus_embedded: bool,
) -> None:
    """Simulate a week of a small MIG fleet, analyse it, and write the reports."""
    began = time.monotonic()
    window_s = parse_window(window)
    through = " through a local Prometheus" if prometheus_embedded else ""
    click.echo(
        f"Simulating {window} of {scenario.replace(',', ' + ')} and analysing it{through} ..."
    )
    result = run_analysis(
        source=None,
        simulate=scenario,
        prometheus=None,
        window_s=window_s,
        step=60.0,
        policy=default_policy(),
        price=price_per_gpu_hour,
        headroom=0.10,
        objective="consolidate",
        time_limit_s=5.0,
        show_progress=sys.stderr.isatty(),
        prometheus_embedded=prometheus_embedded,
    )
    try:
        written = write_reports(result, out_dir)
    except OSError as exc:
        raise InvalidInput(f"{out_dir}: cannot write reports: {exc.strerror or exc}") from None
    for line in summary_lines(result):
        click.echo(line)
    click.echo("Wrote:")
    for path in written.values():
        click.echo(f"  {path}")
    click.echo(f"Done in {time.monotonic() - began:.1f} s.")
