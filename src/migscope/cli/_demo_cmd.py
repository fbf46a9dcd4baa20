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

from migscope.analyzer import DEFAULT_TIMEOUT_SECONDS, AnalyzeOptions
from migscope.cli._analyze_inputs import choose_source, parse_window, progress_reporter
from migscope.cli._errors import InvalidInput
from migscope.cli._summary import summary_lines

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
    from migscope.analyzer import build_report, run, write_reports

    began = time.monotonic()
    window_s = parse_window(window)
    through = " through a local Prometheus" if prometheus_embedded else ""
    click.echo(
        f"Simulating {window} of {scenario.replace(',', ' + ')} and analysing it{through} ..."
    )
    say = progress_reporter(sys.stderr.isatty())
    source = choose_source(
        source=None,
        simulate=scenario,
        prometheus=None,
        embedded=prometheus_embedded,
        bearer_token_file=None,
        timeout_s=DEFAULT_TIMEOUT_SECONDS,
        progress=say,
    )
    options = AnalyzeOptions(window_s=window_s, price_per_gpu_hour=price_per_gpu_hour, progress=say)
    result = run(source, options)
    report = build_report(result)
    try:
        written = write_reports(result, out_dir, report=report)
    except OSError as exc:
        raise InvalidInput(f"{out_dir}: cannot write reports: {exc.strerror or exc}") from exc
    for line in summary_lines(report):
        click.echo(line)
    click.echo("Wrote:")
    for path in written.values():
        click.echo(f"  {path}")
    click.echo(f"Done in {time.monotonic() - began:.1f} s.")
