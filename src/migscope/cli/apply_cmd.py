"""``migscope apply``: put a plan's layouts on the nodes through MIG Manager, dry run by default.

Without ``--apply`` nothing is written: every planned node is checked as the real run would
check it and the exact ConfigMap key, label and pods that would change are printed, with the
reason for every node that would be skipped. With ``--apply`` the per-node workflow of
:mod:`migscope.applier.applier` runs under a Lease; JSON audit lines go to stderr and the
summary to stdout. Exit status: 0 when no node failed, 3 when one did, 1 for a usage error.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from migscope.cli.errors import InvalidInput

if TYPE_CHECKING:  # the applier and the Kubernetes client load only when a command runs
    from migscope.applier.plan import ApplyPlan

__all__ = ["apply_command", "run_apply"]

FAILED_EXIT = 3


def run_apply(
    plan: ApplyPlan,
    *,
    apply: bool,
    drain: bool,
    max_nodes: int,
    node_timeout_s: float,
    drain_timeout_s: float,
    max_changes_per_day: int,
    max_changes_per_node_per_day: int,
    windows: tuple[str, ...],
    namespace: str,
    configmap: str | None,
    kubeconfig: str | None,
    context: str | None,
    lease_wait_s: float,
    output: str,
) -> int:
    """Apply an :class:`~migscope.applier.plan.ApplyPlan`; print the outcome; the exit status."""
    from migscope.analyzer.sources.kube_pending import KubeError, api_client
    from migscope.applier.applier import Applier, LeaseLost
    from migscope.applier.kube import ApiError, Kube
    from migscope.applier.lease import LeaseHeld
    from migscope.applier.settings import ApplySettings, parse_window_spec

    try:
        parsed = tuple(parse_window_spec(w) for w in windows)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    settings = ApplySettings(
        apply=apply,
        drain=drain,
        max_nodes=max_nodes,
        node_timeout_s=node_timeout_s,
        drain_timeout_s=drain_timeout_s,
        max_changes_per_day=max_changes_per_day,
        max_changes_per_node_per_day=max_changes_per_node_per_day,
        windows=parsed,
        namespace=namespace,
        configmap=configmap,
        lease_wait_s=lease_wait_s,
    )
    try:
        api = api_client(kubeconfig, context=context)
    except KubeError as exc:
        raise InvalidInput(str(exc)) from None
    with api:
        try:
            report = Applier(Kube(api), settings).run(plan)
        except (LeaseHeld, LeaseLost) as exc:
            raise InvalidInput(str(exc)) from None
        except ApiError as exc:
            raise InvalidInput(f"Kubernetes API: {exc}") from None
    if output == "json":
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        mode = "apply" if apply else "dry run (nothing changed; add --apply)"
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
    default=1,
    show_default=True,
    help="Nodes changed per run.",
)
@click.option(
    "--timeout",
    "timeout",
    default="20m",
    show_default=True,
    help="Per node: relabel to success/failed.",
)
@click.option(
    "--drain-timeout",
    default="10m",
    show_default=True,
    help="Per node: evictions (PDBs) and pods going.",
)
@click.option("--max-changes-per-day", type=click.IntRange(min=0), default=10, show_default=True)
@click.option(
    "--max-changes-per-node-per-day", type=click.IntRange(min=0), default=1, show_default=True
)
@click.option(
    "--window",
    "windows",
    multiple=True,
    metavar="SPEC",
    help="Maintenance window, e.g. 'sat-sun 01:00-05:00 UTC' (repeatable; default: any time).",
)
@click.option(
    "--namespace", default="gpu-operator", show_default=True, help="GPU Operator namespace."
)
@click.option(
    "--configmap", metavar="NAME", help="mig-parted ConfigMap (default: the ClusterPolicy's)."
)
@click.option(
    "--kubeconfig", metavar="FILE", help="Kubeconfig (default: in-cluster, then ~/.kube/config)."
)
@click.option("--context", metavar="NAME", help="Kubeconfig context.")
@click.option(
    "--lease-wait", default="0s", show_default=True, help="Wait this long for another applier."
)
@click.option(
    "--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def apply_command(
    plan_path: str,
    apply: bool,
    drain: bool,
    max_nodes: int,
    timeout: str,
    drain_timeout: str,
    max_changes_per_day: int,
    max_changes_per_node_per_day: int,
    windows: tuple[str, ...],
    namespace: str,
    configmap: str | None,
    kubeconfig: str | None,
    context: str | None,
    lease_wait: str,
    output: str,
) -> None:
    """Apply a plan's MIG layouts through the MIG Manager label workflow (dry run by default)."""
    from migscope.applier.plan import PlanError, load_plan
    from migscope.cli.analyze_cmd import parse_window

    try:
        plan = load_plan(plan_path)
    except PlanError as exc:
        raise InvalidInput(str(exc)) from None
    lease_s = 0.0 if lease_wait.strip() in ("0", "0s") else parse_window(lease_wait)
    code = run_apply(
        plan,
        apply=apply,
        drain=drain,
        max_nodes=max_nodes,
        node_timeout_s=parse_window(timeout),
        drain_timeout_s=parse_window(drain_timeout),
        max_changes_per_day=max_changes_per_day,
        max_changes_per_node_per_day=max_changes_per_node_per_day,
        windows=windows,
        namespace=namespace,
        configmap=configmap,
        kubeconfig=kubeconfig,
        context=context,
        lease_wait_s=lease_s,
        output=output,
    )
    sys.exit(code)
