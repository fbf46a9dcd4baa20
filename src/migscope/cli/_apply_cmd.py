"""``migscope apply``: put a plan's layouts on the nodes through MIG Manager, dry run by default.

Without ``--apply`` nothing is written, resumed, waited for or locked: every planned node is
checked as the real run would check it and the exact ConfigMap key, label and pods that
would change are printed, with the reason for every node that would be skipped and every
change an interrupted run left unfinished. With ``--apply`` the per-node workflow of
:mod:`migscope.applier._applier` runs under a Lease; JSON audit lines go to stderr and the
summary to stdout.

Before any of that, the plan's provenance decides whether ``--apply`` may use it at all
(:meth:`migscope.applier._plan.ApplyPlan.refusal`): not from simulated data unless
``--allow-simulated``, not older than ``--max-plan-age``, not without provenance. ``--apply``
refuses such a plan with one line (exit 1) before reading the kubeconfig; a dry run still
describes it and says, as a note, what ``--apply`` would refuse (exit 0: it did what was
asked). Exit status: 0 when no node failed, 3 when one did, 1 for a usage error or a
refused plan.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING

import click

from migscope.applier import DEFAULT_MAX_PLAN_AGE_S, ApplySettings
from migscope.cli._errors import InvalidInput
from migscope.cli._params import Duration, chosen_format, deprecated_alias, format_option, seconds

if TYPE_CHECKING:  # the applier and the Kubernetes client load only when a command runs
    from migscope.applier import ApplyPlan

FAILED_EXIT = 3
DEFAULTS = ApplySettings()
"""The applier's defaults, which the options show: :class:`ApplySettings` is their only home
(its module is light, so ``--help`` reads it without loading the applier)."""


def parse_max_plan_age(text: str) -> float | None:
    """``--max-plan-age``: seconds, or None for ``0`` (no limit).

    ``0`` turns the limit off rather than refusing every plan (an age is never below zero
    seconds, so a limit of zero would be useless): for a plan reviewed and kept on purpose.

    Raises:
        InvalidInput: not a duration (90m, 24h, 7d, 1d12h).
    """
    from migscope.core import parse_duration

    value = text.strip()
    try:
        seconds = 0.0 if value == "0" else parse_duration(value, unit_required=True)
    except ValueError:
        raise InvalidInput(
            f"bad --max-plan-age {text!r}: expected a duration such as 90m, 24h or 7d (0: no limit)"
        ) from None
    return None if seconds == 0 else seconds


def run_apply(
    plan: ApplyPlan,
    settings: ApplySettings,
    *,
    kubeconfig: str | None,
    context: str | None,
    output: str,
) -> int:
    """Apply an :class:`~migscope.applier._plan.ApplyPlan`; print the outcome; the exit status.

    ``settings`` carries the provenance rules too (``allow_simulated``, ``max_plan_age_s``):
    a caller that leaves them at :class:`ApplySettings`' defaults gets the safe ones
    (``migscope analyze --apply`` does).

    Raises:
        InvalidInput: a plan ``--apply`` refuses (before the cluster is contacted), the API
            unreachable, another applier active.
    """
    from migscope.applier import Applier, ClusterRefused, LeaseHeld, LeaseLost, PlanRefused
    from migscope.kube import ApiError, Kube, KubeError, api_client

    why = plan.refusal(
        now=time.time(),
        allow_simulated=settings.allow_simulated,
        max_age_s=settings.max_plan_age_s,
    )
    if settings.apply and why:  # before the kubeconfig is even read: nothing to do with it
        raise InvalidInput(str(PlanRefused(plan.source, why)))
    try:
        api = api_client(kubeconfig, context=context)
    except KubeError as exc:
        raise InvalidInput(str(exc)) from exc
    with api:
        try:
            report = Applier(Kube(api), settings).run(plan)
        except (ClusterRefused, LeaseHeld, LeaseLost, PlanRefused) as exc:
            raise InvalidInput(str(exc)) from exc
        except ApiError as exc:
            raise InvalidInput(f"Kubernetes API: {exc}") from exc
    if output == "json":
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        mode = "apply" if settings.apply else "dry run (nothing changed; add --apply)"
        click.echo(f"{mode}: {len(report.outcomes)} node(s) in the plan")
        for note in report.notes:
            click.echo(f"note: {note}")
        for out in report.outcomes:
            click.echo(
                f"{out.node}: {out.result} ({out.target}){': ' + out.reason if out.reason else ''}"
            )
            for action in out.actions:
                click.echo(f"    {action}")
    return 0 if report.ok else FAILED_EXIT


@click.command("apply")
@click.option(
    "--plan", "plan_path", required=True, metavar="FILE", help="report.json or node-plan.json."
)
@click.option("--apply", "apply", is_flag=True, help="Change the cluster (default: dry run).")
@click.option("--drain", is_flag=True, help="Cordon and evict pods on GPUs the change re-creates.")
@click.option(
    "--max-nodes",
    type=click.IntRange(min=1),
    default=DEFAULTS.max_nodes,
    show_default=True,
    help="Nodes changed per run.",
)
@click.option(
    "--node-timeout",
    "node_timeout",
    type=Duration(),
    default=seconds(DEFAULTS.node_timeout_s),
    show_default=True,
    help="Per node: relabel to success/failed.",
)
@deprecated_alias("--timeout", "--node-timeout", "timeout", type=Duration())
@click.option(
    "--drain-timeout",
    type=Duration(),
    default=seconds(DEFAULTS.drain_timeout_s),
    show_default=True,
    help="Per node: evictions (PDBs) and pods going.",
)
@click.option(
    "--max-changes-per-day",
    type=click.IntRange(min=0),
    default=DEFAULTS.max_changes_per_day,
    show_default=True,
)
@click.option(
    "--max-changes-per-node-per-day",
    type=click.IntRange(min=0),
    default=DEFAULTS.max_changes_per_node_per_day,
    show_default=True,
)
@deprecated_alias("--window", "--maintenance-window", "old_windows", multiple=True)
@click.option(
    "--maintenance-window",
    "windows",
    multiple=True,
    metavar="SPEC",
    help=(
        "Maintenance window, e.g. 'sat-sun 01:00-05:00 Europe/Berlin' (zone as the tz "
        "database spells it; default UTC; repeatable; default: any time)."
    ),
)
@click.option(
    "--namespace", default=DEFAULTS.namespace, show_default=True, help="GPU Operator namespace."
)
@click.option(
    "--configmap", metavar="NAME", help="mig-parted ConfigMap (default: the ClusterPolicy's)."
)
@click.option(
    "--kubeconfig", metavar="FILE", help="Kubeconfig (default: in-cluster, then ~/.kube/config)."
)
@click.option("--context", metavar="NAME", help="Kubeconfig context.")
@click.option(
    "--lease-wait",
    type=Duration(positive=False),
    default=seconds(DEFAULTS.lease_wait_s),
    show_default=True,
    help="Wait this long for another applier.",
)
@click.option(
    "--allow-simulated",
    is_flag=True,
    help="Apply a plan made from simulated data (test clusters only).",
)
@click.option(
    "--allow-stranding",
    is_flag=True,
    help="With --drain, evict pods whose MIG request no node of their pool offers after the "
    "plan (they stay Pending until their request changes).",
)
@click.option(
    "--max-plan-age",
    default=seconds(DEFAULT_MAX_PLAN_AGE_S),
    show_default=True,
    metavar="DURATION",
    help="Refuse plans made longer ago (90m, 24h, 7d; 0: no limit).",
)
@format_option(["text", "json"], help_text="What to print: text (default) or json.")
def apply_command(
    plan_path: str,
    apply: bool,
    drain: bool,
    max_nodes: int,
    node_timeout: float,
    timeout: float | None,
    drain_timeout: float,
    max_changes_per_day: int,
    max_changes_per_node_per_day: int,
    old_windows: tuple[str, ...],
    windows: tuple[str, ...],
    namespace: str,
    configmap: str | None,
    kubeconfig: str | None,
    context: str | None,
    lease_wait: float,
    allow_simulated: bool,
    allow_stranding: bool,
    max_plan_age: str,
    format_: str | None,
    output: str | None,
) -> None:
    """Apply a plan's MIG layouts through the MIG Manager label workflow (dry run by default)."""
    from migscope.applier import load_plan, parse_window_spec

    max_age_s = parse_max_plan_age(max_plan_age)
    try:
        parsed = tuple(parse_window_spec(w) for w in (*old_windows, *windows))
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc
    plan = load_plan(plan_path)
    settings = ApplySettings(
        apply=apply,
        drain=drain,
        max_nodes=max_nodes,
        node_timeout_s=timeout if timeout is not None else node_timeout,
        drain_timeout_s=drain_timeout,
        max_changes_per_day=max_changes_per_day,
        max_changes_per_node_per_day=max_changes_per_node_per_day,
        windows=parsed,
        namespace=namespace,
        configmap=configmap,
        lease_wait_s=lease_wait,
        allow_simulated=allow_simulated,
        max_plan_age_s=max_age_s,
        allow_stranding=allow_stranding,
    )
    output_format = chosen_format(format_, output, "text") or "text"
    code = run_apply(plan, settings, kubeconfig=kubeconfig, context=context, output=output_format)
    sys.exit(code)
