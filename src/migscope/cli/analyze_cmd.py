"""``migscope analyze``: classify every MIG slice over a window and plan better layouts.

One source per run: ``--prometheus URL`` (statistics computed by the server in PromQL),
``--source FILE`` (an OpenMetrics/text exposition of migscope's or dcgm-exporter's series)
or ``--simulate SCENARIO`` (the simulator's ground truth, no GPU needed). Every failure a
user can fix (unreachable server, no MIG series, bad window, unreadable file) is one line
on stderr and exit status 1; progress goes to stderr only when it is a terminal, so pipes
and CI logs get the report alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal

import click

from migscope.analyzer.dialect import NoMigSeriesError
from migscope.analyzer.embedded import load_fleet, read_openmetrics, simulate_slices
from migscope.analyzer.model import SliceStats
from migscope.analyzer.openmetrics import ExpositionError
from migscope.analyzer.pipeline import AnalysisResult, Objective, analyze, iso_utc
from migscope.analyzer.policy import Policy, PolicyError, load_policy
from migscope.analyzer.report import Format, render, write_reports
from migscope.analyzer.sources.kube_pending import (
    list_pending_pods,
    pending_demand,
)
from migscope.analyzer.sources.local_prometheus import LocalPrometheus, ServerStartError
from migscope.analyzer.sources.prometheus import (
    DEFAULT_TIMEOUT_SECONDS,
    PrometheusClient,
    PrometheusError,
)
from migscope.analyzer.sources.remote_stats import remote_slice_stats, snap_window
from migscope.analyzer.stats import HOURLY_PERIOD_SECONDS, SliceSeries
from migscope.cli.errors import InvalidInput
from migscope.core.migparted import ConfigError, MigPartedConfig, parse_config
from migscope.core.named_layouts import UnknownConfigError
from migscope.kube import Kube, KubeError, api_client
from migscope.sim import ScenarioError

__all__ = ["analyze_command", "parse_window", "progress_reporter", "run_analysis", "summary_lines"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_window(text: str) -> float:
    """A duration like ``7d``, ``36h``, ``1d12h`` or ``90m`` in seconds (Prometheus units).

    Raises:
        InvalidInput: anything else, or a zero duration.
    """
    value = text.strip()
    pos, total = 0, 0.0
    for match in _DURATION.finditer(value):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not value or pos != len(value) or total <= 0:
        raise InvalidInput(
            f"bad window {text!r}: expected a duration such as 7d, 24h, 90m or 1d12h"
        )
    return total


def progress_reporter(enabled: bool) -> Callable[[str], None] | None:
    """A stage printer for stderr with elapsed seconds, or None when progress is off.

    Only on a terminal: in a pipe or a CI log the lines would be noise around the report.
    """
    if not enabled:
        return None
    started = time.monotonic()

    def say(message: str) -> None:
        click.echo(f"[{time.monotonic() - started:5.1f}s] {message}", err=True)

    return say


def run_analysis(
    *,
    source: str | None,
    simulate: str | None,
    prometheus: str | None,
    window_s: float,
    step: float,
    policy: Policy,
    price: float | None,
    headroom: float,
    objective: Objective,
    time_limit_s: float,
    bearer_token_file: str | None = None,
    show_progress: bool = False,
    prometheus_embedded: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_SECONDS,
    what_if: Mapping[str, str] | None = None,
    what_if_config: MigPartedConfig | None = None,
    pending_pods: PendingMode = "off",
    kubeconfig: str | None = None,
    end: float | None = None,
) -> AnalysisResult:
    """Read the chosen source and analyse it; every expected failure is an InvalidInput.

    The window ends at ``end`` when given (a report on a past week), else at the source's
    newest sample (file), the simulation's end, or now (Prometheus); see
    :func:`_window_ending`. With ``prometheus_embedded`` the simulated or file history is
    first backfilled into a real Prometheus started for the run, and the statistics come
    from its PromQL, exactly as with ``--prometheus``. The result carries its provenance
    (:func:`provenance`), which the applier checks before it touches a cluster.
    """
    say = progress_reporter(show_progress)
    pending, pending_notes = read_pending(pending_pods, kubeconfig, timeout_s)
    slices: Iterable[SliceSeries | SliceStats]
    source_notes: Sequence[str] = ()
    origin_url: str | None = None
    if simulate is not None and end is not None:
        raise InvalidInput("--end goes with --source or --prometheus")
    try:
        with contextlib.ExitStack() as stack:
            if simulate is not None:
                names = [n.strip() for n in simulate.split(",") if n.strip()]
                sim = load_fleet(names)
                start = sim.clock.start
                window = (start, start + window_s)
                if say is not None:
                    say(f"simulating {', '.join(names)}: {window_s / 86400:g} days")
                slices = simulate_slices(sim, window_s=window_s, step_s=step)
            elif source is not None:
                found = read_openmetrics(source)
                window = _window_ending(found.last if end is None else end, window_s)
                slices = found.series
                source_notes = found.notes
            else:
                assert prometheus is not None
                client = _client(prometheus, bearer_token_file, timeout_s)
                origin_url = client.base_url.rstrip("/")
                window = _window_ending(time.time() if end is None else end, window_s)
            if prometheus_embedded:
                server = _local_prometheus(stack, slices, window_s, say)
                client = _client(server.url, None, timeout_s)
            if prometheus is not None or prometheus_embedded:
                stack.enter_context(client)
                run = remote_slice_stats(client, start=window[0], end=window[1], step=step)
                window = (run.window_start, run.window_end)
                slices = run
            result = analyze(
                slices,
                window=window,
                policy=policy,
                step=step,
                price_per_gpu_hour=price,
                headroom=headroom,
                objective=objective,
                time_limit_s=time_limit_s,
                progress=say,
                what_if=what_if,
                what_if_config=what_if_config,
                pending=pending,
            )
            remote = prometheus is not None or prometheus_embedded
            if remote:
                source_notes = run.notes  # complete once the run has been iterated
            extra = [*source_notes, *pending_notes]
            if extra:
                result = dataclasses.replace(result, notes=(*result.notes, *extra))
            if remote:
                result = _with_server_warnings(result, client.warnings)
    except (
        ExpositionError,
        NoMigSeriesError,
        ScenarioError,
        PrometheusError,
        UnknownConfigError,
    ) as exc:
        raise InvalidInput(str(exc)) from None
    except ServerStartError as exc:
        raise InvalidInput(f"embedded Prometheus: {exc}") from None
    except FileNotFoundError as exc:
        raise InvalidInput(str(exc).strip("'\"")) from None
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    if not any(s.stats.samples for s in result.slices):
        raise InvalidInput(_nothing_in_window(window, end))
    origin = provenance(source=source, simulate=simulate, prometheus=origin_url)
    return dataclasses.replace(result, provenance=origin)


def provenance(
    *, source: str | None, simulate: str | None, prometheus: str | None
) -> dict[str, object]:
    """Where a report's data came from and when it was made (report ``provenance``).

    Why: a plan is only as good as its data. The applier refuses plans from simulated data
    (they must never reach a cluster) and plans older than its limit, and a reader of an old
    report can tell what it rests on. ``prometheus`` is the client's base URL, which has
    its credentials removed.
    """
    now = time.time()
    origin: dict[str, object]
    if simulate is not None:
        names = [n.strip() for n in simulate.split(",") if n.strip()]
        origin = {"kind": "simulation", "scenarios": names}
    elif source is not None:
        origin = {"kind": "file", "path": source}
    else:
        origin = {"kind": "prometheus", "url": prometheus or ""}
    return {
        "source": origin,
        "simulated": simulate is not None,
        "created": iso_utc(now),
        "created_unix": round(now, 3),
    }


def _nothing_in_window(window: tuple[float, float], end: float | None) -> str:
    """Why there is nothing to report, and what to try (not "no MIG series" when it is time)."""
    span = f"{iso_utc(window[0])} .. {iso_utc(window[1])}"
    if end is not None:
        return f"no MIG samples in the window {span}: is --end right?"
    return (
        f"no MIG samples in the window {span}: the exporter may not have been scraped yet "
        "(a new install needs a scrape or two), or the series are named differently"
    )


def parse_end(text: str | None) -> float | None:
    """``--end``: ISO 8601 (``2026-11-30``, ``2026-11-30T06:00:00Z``) or Unix seconds.

    A time without a zone is UTC, so the same command gives the same window anywhere.

    Raises:
        InvalidInput: anything else.
    """
    if text is None:
        return None
    from datetime import datetime, timezone

    value = text.strip()
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"bad --end {text!r}: expected an ISO 8601 time (2026-11-30T06:00:00Z) or Unix seconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


PendingMode = Literal["auto", "on", "off"]
"""``auto``: read pending pods if cluster credentials are at hand; ``on``: must; ``off``."""


def read_pending(
    mode: PendingMode, kubeconfig: str | None, timeout_s: float
) -> tuple[list[tuple[str, int]], list[str]]:
    """Pending pods' MIG requests and the report notes about them.

    ``on`` (or a ``kubeconfig`` given) turns every failure into an InvalidInput; ``auto``
    turns it into a note, because a report without pending pods is still worth having.
    """
    if mode == "off":
        return [], []
    try:
        api = api_client(kubeconfig)
        with api:
            found = pending_demand(list_pending_pods(Kube(api, timeout_s=timeout_s)))
    except KubeError as exc:
        if mode == "on" or kubeconfig is not None:
            raise InvalidInput(f"pending pods: {exc}") from None
        return [], [f"pending pods not read: {exc}"]
    return found.as_pending(), found.notes()


def _pending_mode(chosen: str | None, kubeconfig: str | None, *, live: bool) -> PendingMode:
    """The default: ``auto`` against a live Prometheus or with a kubeconfig, else ``off``."""
    if chosen == "on":
        return "on"
    if chosen == "off":
        return "off"
    return "auto" if (live or kubeconfig is not None or chosen == "auto") else "off"


def _window_ending(end: float, window_s: float) -> tuple[float, float]:
    """The window of ``window_s`` that holds ``end`` (the newest sample, or now).

    Whole-hour windows lie on the hour grid, which per-hour use needs (the heatmap, the
    what-if replay): the end moves *forward* to the next full hour, so the newest samples,
    a single scrape's only one included, are always inside (moving it back would leave out
    the data the user gave). The part after ``end`` holds no samples and lowers coverage by
    less than an hour's worth.
    """
    if window_s % HOURLY_PERIOD_SECONDS == 0 and end - window_s > 0:
        hour = HOURLY_PERIOD_SECONDS
        top = math.ceil(end / hour) * hour
        return snap_window(top - window_s, top, hour)
    return (end - window_s, end)


def _client(url: str, bearer_token_file: str | None, timeout_s: float) -> PrometheusClient:
    try:
        return PrometheusClient(url, bearer_token_file=bearer_token_file, timeout=timeout_s)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def _with_server_warnings(result: AnalysisResult, warnings: Sequence[str]) -> AnalysisResult:
    """The result with the server's warnings (partial data) among its notes."""
    if not warnings:
        return result
    notes = [f"the server warned, so statistics may rest on partial data: {w}" for w in warnings]
    return dataclasses.replace(result, notes=(*result.notes, *notes))


def _local_prometheus(
    stack: contextlib.ExitStack,
    slices: Iterable[SliceSeries | SliceStats],
    window_s: float,
    say: Callable[[str], None] | None,
) -> LocalPrometheus:
    """Start a real Prometheus backfilled with ``slices``, closed with ``stack``."""
    series = (s for s in slices if isinstance(s, SliceSeries))
    if say is not None:
        say("writing the history and backfilling a local Prometheus with promtool")
    server = LocalPrometheus(slices=series, span_seconds=window_s)
    stack.enter_context(server)
    if say is not None and server.written is not None:
        written = server.written
        say(f"Prometheus at {server.url}: {written.series} series, {written.samples:,} samples")
    return server


def summary_lines(result: AnalysisResult) -> list[str]:
    """The few lines printed after a run: what was found and what the plan frees."""
    s = result.savings
    lines = [
        f"{len([x for x in result.slices if x.current])} slices on "
        f"{s['gpus_planned']} MIG GPUs over {result.window_hours:g} h: "
        f"{s['idle_slices']} idle, {s['unallocated_slices']} unallocated, "
        f"{s['oversized_slices']} oversized",
        f"wasted: {s['wasted_gpu_hours']:.1f} GPU-hours "
        f"(idle {s['idle_gpu_hours']:.1f}, unallocated {s['unallocated_gpu_hours']:.1f}, "
        f"oversized {s['oversized_gpu_hours']:.1f})",
        _plan_line(result),
    ]
    if s.get("price_per_gpu_hour") is not None:
        lines.append(
            f"cost: {s['wasted_cost']:,.2f} wasted, {s['freed_cost']:,.2f} freed per window"
        )
    what_if = result.what_if_summary()
    if what_if is not None:
        configs = ",".join(f"{k}={v}" for k, v in what_if["configs"].items())
        lines.append(
            f"what-if {configs}: serves {what_if['served_share']:.1%} of the window's demand, "
            f"{what_if['unmet_instance_hours']:g} instance-hours unmet (proposed plan: "
            f"{what_if['proposed']['served_share']:.1%})"
        )
    return lines


def _plan_line(result: AnalysisResult) -> str:
    """What the plan frees, or why there is no plan (too little history)."""
    if result.history is not None and not result.history.enough:
        return f"plan: {result.history.sentence()}"
    s = result.savings
    return (
        f"plan: {s['gpus_freed']} GPU(s) freeable ({s['gpu_hours_freed']:.1f} GPU-hours per "
        f"window), {s['gpus_changed']} GPU(s) changed on {s['nodes_changed']} node(s), "
        f"unmet demand {s['unmet_demand']}"
    )


def parse_what_if(values: Sequence[str]) -> dict[str, str]:
    """``--what-if`` values (``CONFIG`` for every node, ``NODE=CONFIG`` for one) as a map.

    Raises:
        InvalidInput: an empty name, or a node given twice.
    """
    out: dict[str, str] = {}
    for value in values:
        node, sep, config = value.rpartition("=")
        node = node.strip() if sep else "*"
        config = config.strip()
        if not config or (sep and not node):
            raise InvalidInput(f"bad --what-if {value!r}: expected CONFIG or NODE=CONFIG")
        if node in out:
            raise InvalidInput(f"--what-if names {node!r} twice")
        out[node] = config
    return out


def load_what_if_config(path: str | None) -> MigPartedConfig | None:
    """The mig-parted file ``--what-if`` names come from (None: MIG Manager's generated ones)."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return parse_config(fh.read())
    except OSError as exc:
        raise InvalidInput(f"{path}: {exc.strerror or exc}") from None
    except ConfigError as exc:
        raise InvalidInput(f"{path}: {exc}") from None


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
@click.option(
    "--bearer-token-file",
    metavar="FILE",
    help="Bearer token for --prometheus, re-read on every request.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=DEFAULT_TIMEOUT_SECONDS,
    show_default=True,
    help="Seconds to wait for each Prometheus request.",
)
@click.option("--window", "window", default="7d", show_default=True, help="Window length.")
@click.option(
    "--end",
    "end",
    metavar="TIME",
    help="Window end, ISO 8601 or Unix seconds (default: the newest sample of --source, or "
    "now for --prometheus).",
)
@click.option(
    "--step", default=60.0, show_default=True, type=float, help="Sample interval, seconds."
)
@click.option("--policy", "policy_file", metavar="FILE", help="Classification policy file.")
@click.option(
    "--output",
    "-o",
    type=click.Choice(["json", "md", "csv", "html"]),
    default=None,
    help="Report printed on stdout (default: md, or none with --out).",
)
@click.option("--out", "out_dir", metavar="DIR", help="Write every report and the configs here.")
@click.option("--price-per-gpu-hour", type=float, default=None, help="Adds costs to savings.")
@click.option(
    "--headroom", type=float, default=0.10, show_default=True, help="Spare share per profile."
)
@click.option(
    "--objective",
    type=click.Choice(["consolidate", "minimal-change"]),
    default="consolidate",
    show_default=True,
    help="After covering demand: free GPUs first, or change as few GPUs as possible.",
)
@click.option(
    "--time-limit", type=float, default=5.0, show_default=True, help="Solver seconds per pool."
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
    help="Add unscheduled pods' nvidia.com/mig-* requests to demand [default: auto with "
    "--prometheus (skipped without credentials), off otherwise].",
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
def analyze_command(
    source: str | None,
    simulate: str | None,
    prometheus: str | None,
    prometheus_embedded: bool,
    bearer_token_file: str | None,
    timeout: float,
    window: str,
    step: float,
    policy_file: str | None,
    output: str | None,
    out_dir: str | None,
    price_per_gpu_hour: float | None,
    headroom: float,
    objective: str,
    time_limit: float,
    what_if: tuple[str, ...],
    what_if_config: str | None,
    pending_pods: str | None,
    kubeconfig: str | None,
    apply: bool,
    drain: bool,
    end: str | None = None,
) -> None:
    """Find idle and mis-sized MIG slices and recommend layouts.

    Exactly one of --source, --simulate or --prometheus. With --out, writes report.json,
    report.md, slices.csv, report.html, mig-parted-config.yaml and node-plan.json there.
    """
    chosen = [x for x in (source, simulate, prometheus) if x is not None]
    if len(chosen) != 1:
        raise InvalidInput(
            "give exactly one of --source FILE, --simulate SCENARIO, --prometheus URL"
        )
    if prometheus_embedded and prometheus is not None:
        raise InvalidInput(
            "--prometheus-embedded goes with --simulate or --source, not --prometheus"
        )
    if apply and simulate is not None:
        raise InvalidInput(
            "--apply with --simulate: a plan from simulated data is never applied to a cluster"
        )
    window_s = parse_window(window)
    end_at = parse_end(end)
    what_if_map = parse_what_if(what_if)
    what_if_file = load_what_if_config(what_if_config)
    if what_if_file is not None and not what_if_map:
        raise InvalidInput("--what-if-config needs --what-if CONFIG to say which layout to replay")
    try:
        policy = load_policy(policy_file)
    except PolicyError as exc:
        raise InvalidInput(str(exc)) from None
    except OSError as exc:
        raise InvalidInput(f"{policy_file}: {exc.strerror or exc}") from None
    result = run_analysis(
        source=source,
        simulate=simulate,
        prometheus=prometheus,
        window_s=window_s,
        step=step,
        policy=policy,
        price=price_per_gpu_hour,
        headroom=headroom,
        objective="consolidate" if objective == "consolidate" else "minimal-change",
        time_limit_s=time_limit,
        bearer_token_file=bearer_token_file,
        show_progress=sys.stderr.isatty(),
        prometheus_embedded=prometheus_embedded,
        timeout_s=timeout,
        what_if=what_if_map or None,
        what_if_config=what_if_file,
        pending_pods=_pending_mode(pending_pods, kubeconfig, live=prometheus is not None),
        kubeconfig=kubeconfig,
        end=end_at,
    )
    fmt: Format | None = None
    if output in ("json", "md", "csv", "html"):
        fmt = output  # type: ignore[assignment]
    elif out_dir is None:
        fmt = "md"
    if out_dir is not None:
        try:
            written = write_reports(result, out_dir)
        except OSError as exc:
            raise InvalidInput(f"{out_dir}: cannot write reports: {exc.strerror or exc}") from None
        if fmt is None:
            for line in summary_lines(result):
                click.echo(line)
            for path in written.values():
                click.echo(f"  {path}")
    if fmt is not None:
        click.echo(render(result, fmt), nl=False)
    if apply:
        _apply(result, kubeconfig=kubeconfig, drain=drain)


def _apply(result: AnalysisResult, *, kubeconfig: str | None, drain: bool) -> None:
    """Hand the plan to the applier with its default safety settings."""
    from migscope.applier.plan import PlanError, plan_from_report
    from migscope.cli.apply_cmd import run_apply

    try:
        plan = plan_from_report(result.to_json(), "the analysis")
    except PlanError as exc:
        raise InvalidInput(str(exc)) from None
    code = run_apply(
        plan,
        apply=True,
        drain=drain,
        max_nodes=1,
        node_timeout_s=20 * 60.0,
        drain_timeout_s=10 * 60.0,
        max_changes_per_day=10,
        max_changes_per_node_per_day=1,
        windows=(),
        namespace="gpu-operator",
        configmap=None,
        kubeconfig=kubeconfig,
        context=None,
        lease_wait_s=0.0,
        output="text",
    )
    if code:
        sys.exit(code)
