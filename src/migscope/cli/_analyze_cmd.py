"""``migscope analyze``: classify every MIG slice over a window and plan better layouts.

One source per run: ``--prometheus URL`` (statistics computed by the server in PromQL),
``--source FILE`` (an OpenMetrics/text exposition of migscope's or dcgm-exporter's series)
or ``--simulate SCENARIO`` (the simulator's ground truth, no GPU needed); each is a
:class:`~migscope.analyzer._intake.base.Source` and the analysis is
:func:`migscope.analyzer.run`. Every failure a user can fix (unreachable server, no MIG
series, bad window, unreadable file) is one line on stderr and exit status 1. Progress goes to
stderr: every stage on a terminal; in a log (a CronJob, the scheduler) a timestamped line every
few seconds once a run lasts that long (:mod:`migscope.cli._progress`), so stdout stays the
report alone. How ``--prometheus`` is reached (tenant, headers, TLS, auth) is
:mod:`migscope.cli._server_access`. The analyzer's engine (the sources, the run, the reports)
is imported when the command runs, not for ``--help`` (issue 26).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING, cast, get_args

import click

from migscope.analyzer import (
    DEFAULT_HEADROOM,
    DEFAULT_OBJECTIVE,
    DEFAULT_STEP_SECONDS,
    DEFAULT_TIME_LIMIT_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_WINDOW_SECONDS,
    STATS_MODES,
    AnalyzeOptions,
    Objective,
)
from migscope.cli._analyze_inputs import (
    choose_source,
    load_what_if_config,
    owner_lookup,
    parse_end,
    parse_headroom,
    parse_what_if,
    parse_window,
    pending_mode,
    read_pending,
    read_policy,
    server_status,
)
from migscope.cli._errors import InvalidInput
from migscope.cli._params import Duration, chosen_format, format_option, seconds
from migscope.cli._progress import DEFAULT_PROGRESS_INTERVAL_SECONDS, Heartbeat, ProgressLog
from migscope.cli._server_access import ServerAccess, server_access_options
from migscope.cli._summary import summary_lines

if TYPE_CHECKING:
    from migscope.analyzer import AnalysisResult, Format, ReportExtras, StatsMode
    from migscope.core import ReportV1


@click.command("analyze")
@click.option("--source", metavar="FILE", help="OpenMetrics/text exposition file to analyse.")
@click.option(
    "--simulate",
    metavar="SCENARIO",
    help="Simulate a scenario (built-in name or file; several comma-separated form one fleet).",
)
@click.option("--prometheus", metavar="URL", help="Prometheus-compatible HTTP API root.")
@click.option(
    "--prometheus-embedded",
    is_flag=True,
    help="With --simulate or --source: backfill a local Prometheus (on PATH) and query it.",
)
@server_access_options
@click.option(
    "--timeout",
    type=Duration(),
    default=seconds(DEFAULT_TIMEOUT_SECONDS),
    show_default=True,
    help=(
        "How long to wait for each Prometheus or Kubernetes request and a kubeconfig's exec "
        "plugin (a duration; bare numbers are seconds)."
    ),
)
@click.option(
    "--stats",
    type=click.Choice(list(STATS_MODES)),
    default="auto",
    show_default=True,
    help="With --prometheus: exact (one aggregation per field over [W:step] subqueries), fast "
    "(the same numbers from a few reads per series) or auto (exact up to 64 slices).",
)
@click.option(
    "--window",
    "window",
    default=seconds(DEFAULT_WINDOW_SECONDS),
    show_default=True,
    help="Length of the analysed window (7d, 36h, 90m).",
)
@click.option(
    "--end",
    "end",
    metavar="TIME",
    help="Window end, ISO 8601 or Unix seconds (default: the newest sample of --source, or "
    "now for --prometheus).",
)
@click.option(
    "--step",
    type=Duration(),
    default=seconds(DEFAULT_STEP_SECONDS),
    show_default=True,
    help="Sample interval (the exporter's scrape interval).",
)
@click.option("--policy", "policy_file", metavar="FILE", help="Classification policy file.")
@format_option(
    ["json", "md", "csv", "html"],
    help_text="Report printed on stdout (default: md, or none with --out).",
)
@click.option("--out", "out_dir", metavar="DIR", help="Write every report and the configs here.")
@click.option(
    "--previous-reports",
    metavar="DIR",
    help="Earlier runs' directories (DIR/*/report.json, as the report CronJob and `migscope "
    "schedule` keep them): the report shows the waste trend across them.",
)
@click.option(
    "--grafana-url",
    metavar="URL",
    help="Grafana's address: the HTML report links to migscope's dashboards there.",
)
@click.option("--price-per-gpu-hour", type=float, default=None, help="Adds costs to savings.")
@click.option(
    "--headroom",
    default=f"{DEFAULT_HEADROOM:g}",
    show_default=True,
    help="Spare share per profile: a fraction from 0 to 1 (0.1) or a percentage (10%).",
)
@click.option(
    "--objective",
    type=click.Choice(list(get_args(Objective))),
    default=DEFAULT_OBJECTIVE,
    show_default=True,
    help="After covering demand: free GPUs first, or change as few GPUs as possible.",
)
@click.option(
    "--time-limit",
    type=Duration(),
    default=seconds(DEFAULT_TIME_LIMIT_SECONDS),
    show_default=True,
    help="Solver time per pool.",
)
@click.option(
    "--what-if",
    "what_if",
    multiple=True,
    metavar="[NODE=]CONFIG",
    help="Replay the window against this layout (repeat per node; no NODE= means every node).",
)
@click.option(
    "--pending-pods",
    type=click.Choice(["auto", "on", "off"]),
    default=None,
    help="Add unscheduled pods' nvidia.com/mig-* requests to demand, and read the owners of "
    "the fleet's pods from the cluster [default: auto with --prometheus (skipped without "
    "credentials), off otherwise].",
)
@click.option("--kubeconfig", metavar="FILE", help="Kubeconfig for --pending-pods and --apply.")
@click.option(
    "--apply",
    "apply",
    is_flag=True,
    help="Then apply the plan (as `migscope apply --apply`: one node, daily limits, no drain).",
)
@click.option(
    "--drain", is_flag=True, help="With --apply: evict pods on GPUs the change re-creates."
)
@click.option(
    "--what-if-config",
    metavar="FILE",
    help="mig-parted config the --what-if names come from (default: MIG Manager's generated).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr (errors still).")
@click.option(
    "--progress-interval",
    type=Duration(positive=False),
    default=seconds(DEFAULT_PROGRESS_INTERVAL_SECONDS),
    show_default=True,
    help="When stderr is not a terminal (a CronJob log): at most one timestamped progress "
    "line per this long, none in a run shorter than it; 0: every line.",
)
def analyze_command(
    source: str | None,
    simulate: str | None,
    prometheus: str | None,
    prometheus_embedded: bool,
    access: ServerAccess,
    timeout: float,
    window: str,
    step: float,
    policy_file: str | None,
    format_: str | None,
    output: str | None,
    out_dir: str | None,
    price_per_gpu_hour: float | None,
    headroom: str,
    objective: str,
    time_limit: float,
    what_if: tuple[str, ...],
    what_if_config: str | None,
    pending_pods: str | None,
    kubeconfig: str | None,
    apply: bool,
    drain: bool,
    quiet: bool,
    progress_interval: float,
    end: str | None = None,
    previous_reports: str | None = None,
    grafana_url: str | None = None,
    stats: str = "auto",
) -> None:
    """Find idle and mis-sized MIG slices and recommend layouts.

    Exactly one of --source, --simulate or --prometheus. With --out, writes report.json,
    report.md, slices.csv, report.html, mig-parted-config.yaml and node-plan.json there.
    """
    from migscope.analyzer import run

    if apply and simulate is not None:
        raise InvalidInput(
            "--apply with --simulate: a plan from simulated data is never applied to a cluster"
        )
    window_s = parse_window(window)
    what_if_map = parse_what_if(what_if)
    what_if_file = load_what_if_config(what_if_config)
    if what_if_file is not None and not what_if_map:
        raise InvalidInput("--what-if-config needs --what-if CONFIG to say which layout to replay")
    extras = _report_extras(previous_reports, grafana_url, out_dir)
    say = _progress_log(quiet=quiet, interval_s=progress_interval)
    with Heartbeat(say) if say is not None and not say.terminal else contextlib.nullcontext():
        origin = choose_source(
            source=source,
            simulate=simulate,
            prometheus=prometheus,
            embedded=prometheus_embedded,
            access=access,
            timeout_s=timeout,
            progress=say,
            stats=cast("StatsMode", stats),
        )
        if say is not None:
            say.status = server_status(origin)
        mode = pending_mode(pending_pods, kubeconfig, live=prometheus is not None)
        pending, pending_notes = read_pending(mode, kubeconfig, timeout)
        options = AnalyzeOptions(
            window_s=window_s,
            end=parse_end(end),
            step_s=step,
            policy=read_policy(policy_file),
            headroom=parse_headroom(headroom),
            price_per_gpu_hour=price_per_gpu_hour,
            objective=cast(Objective, objective),
            time_limit_s=time_limit,
            what_if=what_if_map or None,
            what_if_config=what_if_file,
            pending=pending,
            pending_notes=pending_notes,
            progress=say,
            owners=owner_lookup(mode, kubeconfig, timeout, origin),
        )
        result = run(origin, options)
        if say is not None and out_dir is not None:
            say(f"writing the reports to {out_dir}")
        fmt = chosen_format(format_, output, None if out_dir is not None else "md")
        report = write_outputs(
            result, out_dir=out_dir, fmt=cast("Format | None", fmt), extras=extras
        )
    if apply:
        _apply(report, kubeconfig=kubeconfig, drain=drain)


def _progress_log(*, quiet: bool, interval_s: float) -> ProgressLog | None:
    """Progress to stderr: every stage on a terminal, rate-limited and timestamped in a log."""
    if quiet:
        return None
    return ProgressLog(
        lambda line: click.echo(line, err=True),
        terminal=sys.stderr.isatty(),
        interval_s=interval_s,
    )


def _report_extras(
    previous_reports: str | None, grafana_url: str | None, out_dir: str | None
) -> ReportExtras:
    """The trend and the Grafana address, checked before the analysis runs (fail fast)."""
    from migscope.analyzer import ReportExtras, normalise_base_url, read_trend

    if grafana_url is not None:
        grafana_url = normalise_base_url(grafana_url)
    trend = None
    if previous_reports is not None:
        if not os.path.isdir(previous_reports):
            raise InvalidInput(f"--previous-reports {previous_reports}: no such directory")
        trend = read_trend(previous_reports, exclude=[out_dir] if out_dir is not None else [])
    return ReportExtras(trend=trend, grafana_url=grafana_url)


def write_outputs(
    result: AnalysisResult,
    *,
    out_dir: str | None,
    fmt: Format | None,
    extras: ReportExtras | None = None,
) -> ReportV1:
    """Write the reports into ``out_dir`` (with a summary) and print ``fmt`` on stdout.

    Returns:
        The report every file was written from (built once: at fleet scale it is not cheap).
    """
    from migscope.analyzer import build_report, write_report, write_reports

    report = build_report(result, extras)
    if out_dir is not None:
        try:
            written = write_reports(result, out_dir, report=report)
        except OSError as exc:
            raise InvalidInput(f"{out_dir}: cannot write reports: {exc.strerror or exc}") from exc
        if fmt is None:
            for line in summary_lines(report):
                click.echo(line)
            for path in written.values():
                click.echo(f"  {path}")
    if fmt is not None:
        write_report(result, fmt, sys.stdout, report=report)
    return report


def _apply(report: ReportV1, *, kubeconfig: str | None, drain: bool) -> None:
    """Hand the report's plan to the applier with its default safety settings.

    They are :class:`ApplySettings`' own: one node, daily limits, no drain unless asked, no
    plan from simulated data nor older than a day. The applier reads the report as
    ``report.json`` has it (:func:`~migscope.core._spec.v1.report_json`).
    """
    from migscope.applier import ApplySettings, plan_from_report
    from migscope.cli._apply_cmd import run_apply
    from migscope.core import report_json

    plan = plan_from_report(report_json(report), "the analysis")
    settings = ApplySettings(apply=True, drain=drain)
    code = run_apply(plan, settings, kubeconfig=kubeconfig, context=None, output="text")
    if code:
        sys.exit(code)
