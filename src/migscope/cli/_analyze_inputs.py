"""What ``analyze`` and ``demo`` read besides their flags: the source, the policy, pending pods.

Each function turns one group of flags into the analyzer's terms (a
:class:`~migscope.analyzer._intake.base.Source`, a policy, pending demand) and says what is
wrong with them in one line; :mod:`migscope.cli._analyze_cmd` strings them together. What
they hand over to (the sources, the policy, the Kubernetes client) is imported when they are
called, so that importing this module for ``--help`` loads none of it.
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

import click

from migscope.cli._errors import InvalidInput
from migscope.cli._params import parse_duration_flag
from migscope.cli._progress import ProgressLog
from migscope.cli._server_access import ServerAccess

if TYPE_CHECKING:
    from migscope.analyzer import OwnerLookup, PodOwners, Policy, Source, StatsMode
    from migscope.core import MigPartedConfig

PendingMode = Literal["auto", "on", "off"]
"""``auto``: read pending pods if cluster credentials are at hand; ``on``: must; ``off``."""


def parse_headroom(text: str) -> float:
    """``--headroom``: a fraction from 0 to 1 (``0.1``) or a percentage (``10%``).

    A bare number above 1 is refused rather than read as a multiple (``5`` was 500 %): write
    ``500%`` if that is meant.

    Raises:
        InvalidInput: not a number, negative, or a bare number above 1.
    """
    value = text.strip()
    percent = value.endswith("%")
    try:
        number = float(value.removesuffix("%"))
    except ValueError:
        raise InvalidInput(
            f"bad --headroom {text!r}: a fraction from 0 to 1 (0.1) or a percentage (10%)"
        ) from None
    if not math.isfinite(number) or number < 0:
        raise InvalidInput(f"bad --headroom {text!r}: must be 0 or more")
    if percent:
        return number / 100.0
    if number > 1:
        raise InvalidInput(
            f"--headroom {text}: a bare number is a fraction from 0 to 1 (0.1 = 10%); "
            f"write {number * 100:g}% if that is meant"
        )
    return number


def parse_window(text: str) -> float:
    """``--window``: a duration like ``7d``, ``36h``, ``1d12h`` or ``90m``, in seconds.

    Raises:
        InvalidInput: not a duration, or zero.
    """
    return parse_duration_flag("--window", text, unit_required=True)


def progress_reporter(enabled: bool) -> ProgressLog | None:
    """A stage printer for a terminal (every stage, elapsed seconds), or None when off.

    ``migscope demo`` uses it as it is; ``analyze`` also logs progress when stderr is not a
    terminal (:class:`~migscope.cli._progress.ProgressLog`).
    """
    if not enabled:
        return None
    return ProgressLog(lambda line: click.echo(line, err=True), terminal=True)


def server_status(source: Source) -> Callable[[], str] | None:
    """What a progress heartbeat says about a server source: requests so far, bytes read.

    None for sources that read no server (a file, the simulator): they have nothing to add.
    """
    from migscope.analyzer import PrometheusSource

    if not isinstance(source, PrometheusSource):
        return None
    client = source.client

    def status() -> str:
        usage = client.usage
        plural = "" if usage.requests == 1 else "s"
        retries = f" ({usage.retries} retried)" if usage.retries else ""
        return (
            f"server: {usage.requests} request{plural}{retries}, "
            f"{usage.bytes_received / 2**20:.1f} MiB received"
        )

    return status


def choose_source(
    *,
    source: str | None,
    simulate: str | None,
    prometheus: str | None,
    embedded: bool,
    bearer_token_file: str | None = None,
    access: ServerAccess | None = None,
    timeout_s: float,
    progress: Callable[[str], None] | None,
    stats: StatsMode = "auto",
) -> Source:
    """The one source the flags name.

    Args:
        source: ``--source FILE``.
        simulate: ``--simulate SCENARIO[,...]``.
        prometheus: ``--prometheus URL``.
        embedded: ``--prometheus-embedded``.
        bearer_token_file: Shorthand for ``ServerAccess(bearer_token_file=...)`` (``demo``).
        access: How to reach ``prometheus`` (:mod:`migscope.cli._server_access`).
        timeout_s: Per request to a server.
        progress: Stage messages.
        stats: ``--stats``: how a server computes the statistics (``--prometheus`` only).

    Raises:
        InvalidInput: none or several named, ``--prometheus-embedded`` with a server, server
            access flags without a server, or options the client refuses.
    """
    from migscope.analyzer import (
        EmbeddedPrometheusSource,
        FileSource,
        PrometheusClient,
        PrometheusSource,
        SimulationSource,
    )

    if access is None:
        access = ServerAccess(bearer_token_file=bearer_token_file)
    elif bearer_token_file is not None:
        raise ValueError("give bearer_token_file inside access, not beside it")
    chosen = [x for x in (source, simulate, prometheus) if x is not None]
    if len(chosen) != 1:
        raise InvalidInput(
            "give exactly one of --source FILE, --simulate SCENARIO, --prometheus URL"
        )
    if embedded and prometheus is not None:
        raise InvalidInput(
            "--prometheus-embedded goes with --simulate or --source, not --prometheus"
        )
    if prometheus is not None:
        if _has_user(prometheus) and (
            access.basic_auth is not None or access.bearer_token_file is not None
        ):
            raise InvalidInput(
                "the --prometheus URL holds a user: drop it, or --basic-auth-user and "
                "--bearer-token-file"
            )
        try:
            client = PrometheusClient(prometheus, timeout=timeout_s, **access.client_options())
        except ValueError as exc:  # a URL that is not http(s)://host[:port][/prefix]
            raise InvalidInput(str(exc)) from exc
        except (ssl.SSLError, OSError) as exc:  # a TLS file changed since it was checked
            raise InvalidInput(f"TLS files for --prometheus: {exc}") from exc
        return PrometheusSource(client, stats=stats)
    if access.flags:
        raise InvalidInput(f"{', '.join(access.flags)}: only with --prometheus URL")
    if stats != "auto":
        raise InvalidInput(f"--stats {stats}: only with --prometheus URL")
    inner: FileSource | SimulationSource = (
        FileSource(source)
        if source is not None
        else SimulationSource((simulate or "").split(","), progress=progress)
    )
    if embedded:
        return EmbeddedPrometheusSource(inner, timeout_s=timeout_s, progress=progress)
    return inner


def _has_user(url: str) -> bool:
    """Whether ``url`` carries user info (which the client turns into basic auth)."""
    try:
        return urlsplit(url).username is not None
    except ValueError:  # not a URL: the client says what is wrong with it
        return False


def read_policy(path: str | None) -> Policy:
    """``--policy FILE`` (the packaged default without one).

    Raises:
        InvalidInput: unreadable (the policy's own errors are UserErrors already).
    """
    from migscope.analyzer import load_policy

    try:
        return load_policy(path)
    except OSError as exc:
        raise InvalidInput(f"{path}: {exc.strerror or exc}") from exc


def parse_end(text: str | None) -> float | None:
    """``--end``: ISO 8601 (``2026-11-30``, ``2026-11-30T06:00:00Z``) or Unix seconds.

    A time without a zone is UTC, so the same command gives the same window anywhere.

    Raises:
        InvalidInput: anything else.
    """
    if text is None:
        return None
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


def read_pending(
    mode: PendingMode, kubeconfig: str | None, timeout_s: float
) -> tuple[list[tuple[str, int]], list[str]]:
    """Pending pods' MIG requests and the report notes about them.

    ``on`` (or a ``kubeconfig`` given) turns every failure into an InvalidInput; ``auto``
    turns it into a note, because a report without pending pods is still worth having.
    """
    from migscope.analyzer import list_pending_pods, pending_demand
    from migscope.kube import Kube, KubeError, api_client

    if mode == "off":
        return [], []
    try:
        # A kubeconfig's exec plugin gets --timeout too: one that hangs ends the command.
        api = api_client(kubeconfig, exec_timeout_s=timeout_s)
        with api:
            found = pending_demand(list_pending_pods(Kube(api, timeout_s=timeout_s)))
    except KubeError as exc:
        if mode == "on" or kubeconfig is not None:
            raise InvalidInput(f"pending pods: {exc}") from exc
        return [], [f"pending pods not read: {exc}"]
    return found.as_pending(), found.notes()


def owner_lookup(
    mode: PendingMode, kubeconfig: str | None, timeout_s: float, source: Source
) -> OwnerLookup | None:
    """Where the pods' workloads are looked up: the cluster, then kube-state-metrics.

    The cluster is read as ``--pending-pods`` reads it (same mode, kubeconfig, timeout and
    failures: ``on`` or a kubeconfig makes a failure an error, ``auto`` a note); with
    ``--prometheus``, pods the cluster did not answer for are looked up in
    ``kube_pod_owner``. None when neither is at hand: owners are guessed from pod names.
    """
    from migscope.analyzer import (
        PodOwners,
        PrometheusSource,
        cluster_owners,
        kube_state_metrics_owners,
        merge_owners,
    )
    from migscope.kube import Kube, KubeError, api_client

    server = source.client if isinstance(source, PrometheusSource) else None
    if mode == "off" and server is None:
        return None

    def lookup(
        pods: Sequence[tuple[str, str]], nodes: Sequence[str], window: tuple[float, float]
    ) -> PodOwners:
        found = PodOwners()
        if mode != "off":
            try:
                api = api_client(kubeconfig, exec_timeout_s=timeout_s)
                with api:
                    found = cluster_owners(Kube(api, timeout_s=timeout_s), nodes)
            except KubeError as exc:
                if mode == "on" or kubeconfig is not None:
                    raise InvalidInput(f"workload owners: {exc}") from exc
                found = PodOwners(notes=(f"workload owners not read from the cluster: {exc}",))
        missing = [p for p in pods if p not in found.workloads]
        if server is not None and missing:
            found = merge_owners(found, kube_state_metrics_owners(server, missing, window))
        return found

    return lookup


def pending_mode(chosen: str | None, kubeconfig: str | None, *, live: bool) -> PendingMode:
    """The default: ``auto`` against a live Prometheus or with a kubeconfig, else ``off``."""
    if chosen == "on":
        return "on"
    if chosen == "off":
        return "off"
    return "auto" if (live or kubeconfig is not None or chosen == "auto") else "off"


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
    """The mig-parted file ``--what-if`` names come from (None: MIG Manager's generated ones).

    Raises:
        InvalidInput: unreadable (a bad config is a ConfigError, a UserError, naming the file).
    """
    from migscope.core import parse_config

    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise InvalidInput(f"{path}: {exc.strerror or exc}") from exc
    try:
        return parse_config(text)
    except ValueError as exc:
        raise InvalidInput(f"{path}: {exc}") from exc
