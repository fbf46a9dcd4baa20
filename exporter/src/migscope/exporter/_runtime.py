"""Assemble the exporter from settings: backend → sampler → collector → HTTP, plus pod owners.

This is the only module that knows how the pieces fit; each piece stays testable alone.
``build`` wires them, ``serve`` runs until SIGTERM, and ``render_once`` samples twice (GPM
needs a pair) and returns one exposition, which ``--once`` prints and tests lint with
``promtool``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from migscope.core import one_line
from migscope.exporter._attribution import DraResolver
from migscope.exporter._backends import Backend, BackendError
from migscope.exporter._backends.nvml import NvmlBackend
from migscope.exporter._collector import Owner, SnapshotCollector
from migscope.exporter._dcgm_compat import DcgmExposition, load_counters
from migscope.exporter._http import ExporterApp, ExporterServer, load_web_config
from migscope.exporter._sampler import Sampler
from migscope.exporter._settings import ExporterSettings, SettingsError
from migscope.exporter._snapshot import CollectorStatus, Snapshot

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from migscope.exporter._podresources import PodResourcesWatcher

OwnerMap = Mapping[str, Sequence[Owner]]


def _version() -> str:
    """This distribution's version: an exporter-only install has no ``migscope`` (the CLI)."""
    try:
        return metadata.version("migscope-exporter")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0+unknown"


@dataclass
class Exporter:
    """The assembled exporter; ``start``/``stop`` run the background parts."""

    settings: ExporterSettings
    backend: Backend
    sampler: Sampler
    registry: CollectorRegistry
    collector: SnapshotCollector
    owners: Callable[[], OwnerMap]
    watcher: PodResourcesWatcher | None = None
    advance: Callable[[float], None] | None = None
    """Moves simulated time (sim backend with a manual clock); None on real hardware."""
    simulation: Any = None
    """The :class:`migscope.sim.Simulation` behind the sim backend (None otherwise)."""

    def health(self) -> tuple[bool, str]:
        """Healthy while sampling goes on and the backend answers at all.

        One lost GPU or a failing kubelet is a metric (``migscope_collector_success``), not a
        reason for Kubernetes to restart the exporter; a sampler that stopped, or a backend
        that reads no GPU at all (driver gone), is.
        """
        snap = self.sampler.latest()
        if snap is None:
            return False, "no sample yet"
        age = time.time() - snap.taken_at
        limit = 3 * self.settings.interval + 5.0
        if self.advance is None and age > limit:
            return False, f"last sample is {age:.0f} s old"
        down = any(not c.success and c.name == self.backend.name for c in snap.collectors)
        if down and not snap.gpus:
            return False, f"backend {self.backend.name} reads no GPU"
        return True, "ok"

    def start(self) -> None:
        """Start sampling and pod attribution in the background."""
        if self.watcher is not None:
            self.watcher.start()
        self.sampler.start()

    def stop(self) -> None:
        """Stop everything that runs in the background."""
        self.sampler.stop()
        if self.watcher is not None:
            self.watcher.stop()


def _statuses(
    watcher: PodResourcesWatcher | None,
) -> Callable[[], Iterable[CollectorStatus]]:
    if watcher is None:
        return tuple

    def statuses() -> tuple[CollectorStatus, ...]:
        # An answer cut to the caps refreshed the owners, but not all of them: report the
        # collector as failed (its pod series are partly missing), with the note as error.
        s = watcher.status()
        success = s.ok and s.truncated is None
        error = s.last_error or s.truncated
        return (
            CollectorStatus("podresources", success, s.duration_seconds, s.last_success, error),
        )

    return statuses


def _sim_backend(settings: ExporterSettings, *, realtime: bool) -> tuple[NvmlBackend, Any]:
    """The NVML backend over a simulated node of the scenario (the ``sim`` backend)."""
    from migscope.sim import DEMO_SCENARIO, SimClock, Simulation, resolve_scenario

    try:
        scenario = resolve_scenario(settings.scenario or DEMO_SCENARIO)
    except FileNotFoundError as exc:
        raise SettingsError(f"--scenario: {exc}") from exc
    clock = SimClock(realtime=True) if realtime else None
    simulation = Simulation.from_scenario(scenario, clock=clock)
    names = list(simulation.nodes)
    wanted = settings.node or (settings.hostname if settings.hostname in names else names[0])
    if wanted not in names:
        raise SettingsError(f"scenario {scenario}: no node {wanted!r} (nodes: {', '.join(names)})")
    node = simulation.node(wanted)
    backend = NvmlBackend(
        node.nvml,
        name="sim",
        enumerate_interval=settings.enumerate_interval,
        gpm_interval=settings.gpm_interval,
        gpm_refresh=settings.gpm_refresh,
        clock=simulation.clock.elapsed,
    )
    return backend, (simulation, node)


def _sim_owners(node: Any) -> Callable[[], OwnerMap]:
    """Owners straight from the scenario: its pod assignments carry the same four fields.

    The same map object comes back while the node's assignments are the same object, as a
    kubelet watcher answers between refreshes: the collector's render cache then knows the
    owners unchanged by identity, without comparing them (issue 24: rebuilding and comparing
    the map on every scrape was most of what kept the bench's p99 above a static server's).
    """
    last: tuple[object, OwnerMap] | None = None

    def owners() -> OwnerMap:
        nonlocal last
        assignments = node.pod_assignments()
        if last is not None and last[0] is assignments:
            return last[1]
        out: dict[str, list[Owner]] = {}
        for assignment in assignments:
            out.setdefault(assignment.device_id, []).append(assignment)
        last = (assignments, out)
        return out

    return owners


def _hardware_backend(settings: ExporterSettings) -> Backend:
    """NVML through the real pynvml, or DCGM through its Python bindings."""
    if settings.backend == "dcgm":
        from migscope.exporter._backends.dcgm import DcgmBackend

        return DcgmBackend(
            host=settings.dcgm_host,
            bindings=settings.dcgm_bindings,
            field_interval=settings.interval,
            energy_interval=settings.energy_interval,
            hierarchy_interval=settings.enumerate_interval,
        )
    import pynvml

    return NvmlBackend(
        pynvml,
        enumerate_interval=settings.enumerate_interval,
        gpm_interval=settings.gpm_interval,
        gpm_refresh=settings.gpm_refresh,
    )


def build(settings: ExporterSettings, *, realtime: bool = True) -> Exporter:
    """Wire an exporter for ``settings`` (nothing is started yet).

    Args:
        settings: Validated settings.
        realtime: For the sim backend: follow the wall clock (serving) or stand still until
            advanced (``--once``, tests).

    Raises:
        SettingsError: settings that name something unusable (scenario node, bindings).
        BackendError: the backend cannot be loaded at all.
    """
    advance: Callable[[float], None] | None = None
    watcher: PodResourcesWatcher | None = None
    owners: Callable[[], OwnerMap] = dict
    simulation: Any = None
    backend: Backend
    if settings.backend == "sim":
        backend, (simulation, node) = _sim_backend(settings, realtime=realtime)
        if settings.pod_attribution and settings.pod_source != "kubelet":
            owners = _sim_owners(node)
        clock, wall = simulation.clock.elapsed, simulation.clock.now
        if not realtime:
            advance = simulation.clock.advance
    else:
        backend = _hardware_backend(settings)
        clock, wall = time.monotonic, time.time
    use_kubelet = settings.pod_source == "kubelet" or (
        settings.pod_source == "auto" and settings.backend != "sim"
    )
    if settings.pod_attribution and use_kubelet:
        # Imported here: gRPC costs ~11 MiB of RSS, which a simulated node without a kubelet
        # need not pay.
        from migscope.exporter._podresources import PodResourcesWatcher

        watcher = PodResourcesWatcher(
            settings.kubelet_socket,
            interval=settings.kubelet_refresh,
            timeout=settings.kubelet_timeout,
        )
        owners = watcher.owners
        resolver = DraResolver()
        holders = watcher.dra_holders

        def dra(snap: Snapshot | None, base: OwnerMap) -> OwnerMap:
            merged = resolver.merged(snap, holders(), base)
            return merged  # type: ignore[return-value]

    sampler = Sampler(
        backend,
        interval=settings.interval,
        energy_interval=settings.energy_interval,
        idle_watts=settings.idle_power_watts,
        clock=clock,
        wall=wall,
    )
    # The collector has no describe(): its series depend on the node. Without
    # support_collectors_without_names, `?name[]=` (restricted_registry) would find no
    # collector for any name and answer an empty 200.
    registry = CollectorRegistry(auto_describe=False, support_collectors_without_names=True)
    collector = SnapshotCollector(
        snapshot=sampler.latest,
        owners=owners,
        statuses=_statuses(watcher),
        backend=backend.name,
        version=_version(),
        dcgm=_dcgm_exposition(settings),
        dra=dra if watcher is not None else None,
    )
    registry.register(collector)
    return Exporter(
        settings, backend, sampler, registry, collector, owners, watcher, advance, simulation
    )


def _dcgm_exposition(settings: ExporterSettings) -> DcgmExposition | None:
    """dcgm-exporter's series for ``--dcgm-compat``, from its collectors file; None when off.

    Raises:
        CountersError: ``dcgm_counters`` cannot be read or is malformed (one line).
    """
    if not settings.dcgm_compat:
        return None
    exposition = DcgmExposition(
        load_counters(settings.dcgm_counters),
        hostname=settings.hostname,
        host_label=settings.dcgm_host_label,
    )
    if exposition.unsupported:
        log.info(
            "--dcgm-compat: %d field(s) of %s have no migscope reading and are left out: %s",
            len(exposition.unsupported),
            settings.dcgm_counters,
            ", ".join(exposition.unsupported),
        )
    return exposition


def render_once(settings: ExporterSettings) -> bytes:
    """Sample twice one interval apart (GPM needs a pair) and return one text exposition.

    The GPM window shrinks to that one interval and is computed at each of the two samples
    (``gpm_refresh`` 0, whatever is set: the default 2 s would skip the second), so ``--once``
    shows activity at once.
    Unlike serving, which keeps retrying a backend that cannot load (and says so on
    ``/healthz``), ``--once`` is a check: a backend that cannot be opened, or that read no GPU
    at all, is an error rather than an exposition of ``migscope_collector_success 0``.

    Raises:
        BackendError: The backend cannot be opened (NVML or DCGM missing, driver not
            loaded), or it read nothing; one line naming the backend.
    """
    if settings.web_config:
        load_web_config(settings.web_config)  # a broken file is reported even here
    settings = settings.model_copy(update={"gpm_interval": settings.interval, "gpm_refresh": 0.0})
    exporter = build(settings, realtime=False)
    try:
        _open_backend(exporter.backend)
        if exporter.watcher is not None:
            exporter.watcher.refresh()
        exporter.sampler.run_once()
        if exporter.advance is not None:
            exporter.advance(settings.interval)
        else:
            time.sleep(settings.interval)
        snapshot = exporter.sampler.run_once()
        _require_backend_reading(exporter.backend.name, snapshot)
        return exporter.collector.render_text()
    finally:
        exporter.stop()


def _open_backend(backend: Backend) -> None:
    """Open ``backend`` now, before anything is sampled or printed; one line if it cannot.

    Opening first (the sampler would open it on its first read, and log the failure) gives
    ``--once`` exactly one line on stderr for a missing library, and no kubelet warning
    before it.
    """
    try:
        backend.open()
    except BackendError as exc:
        raise BackendError(f"backend {backend.name}: {one_line(exc)}") from exc


def _require_backend_reading(name: str, snapshot: Snapshot) -> None:
    """Raise when the backend's own collector failed and no GPU was read (health's rule)."""
    status = next((c for c in snapshot.collectors if c.name == name), None)
    if status is not None and not status.success and not snapshot.gpus:
        raise BackendError(f"backend {name}: {status.error or 'read no GPU'}")


def serve(settings: ExporterSettings) -> int:
    """Serve /metrics until SIGTERM/SIGINT; returns the process exit status."""
    web = load_web_config(settings.web_config) if settings.web_config else None
    exporter = build(settings)
    app = ExporterApp(
        registry=exporter.registry,
        health=exporter.health,
        name="migscope exporter",
        version=_version(),
        max_concurrent_scrapes=settings.max_concurrent_scrapes,
        render_text=exporter.collector.render_text,
        cached_text=exporter.collector.cached_text,
    )
    server = ExporterServer(app, listen=settings.listen, web_config=web)
    exporter.start()
    try:
        server.start()
        log.info(
            "migscope exporter %s (%s backend) on %s://%s",
            _version(),
            exporter.backend.name,
            server.scheme,
            server.address,
        )
        server.serve_forever_until_signal()
    finally:
        exporter.stop()
    return 0
