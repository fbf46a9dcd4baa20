"""Before any statistic: which engine answers, which dialect it holds, by which names, where.

These are the few cheap calls that run at once, so that a wrong
server, an empty window or a fleet without MIG fails before the first statistic is asked
for; they read the label index (``label_values``), never samples.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from migscope.analyzer._intake.dialect import (
    DCGM_FB_CAPACITY,
    DCGM_QUANTITIES,
    MIG_ACTIVE_SECONDS,
    MIG_INFO,
    NODE_LABELS,
    Dialect,
    NoMigSeriesError,
    dcgm_family,
    explain_no_mig,
    fields_of,
    presence_family,
)
from migscope.analyzer._intake.dialect.grouping import NodeMoves, node_moves
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.promql import Matcher, duration, selector
from migscope.analyzer._intake.stats_local import RangeSemantics
from migscope.analyzer._intake.stats_promql.queries import NON_EMPTY


def detect_semantics(client: PrometheusClient) -> RangeSemantics:
    """Which engine answers: Prometheus 2.x, 3.x, or VictoriaMetrics (no version reported).

    Why: window edges and ``increase()`` differ between them (see ``stats_local``), and the
    energy query must call ``increase_prometheus()`` on VictoriaMetrics. Front ends that
    report their own version (Thanos, Mimir) are taken as Prometheus 3 unless it starts
    with ``2.``; pass ``semantics=`` to override.
    """
    version = client.build_info().get("version", "")
    if not version:
        return "victoriametrics"
    return "prometheus2" if version.startswith("2.") else "prometheus3"


def detect_remote_dialect(client: PrometheusClient, *, start: float, end: float) -> Dialect:
    """Which exporter's series the server holds in ``(start, end]``.

    Mirrors :func:`migscope.analyzer._intake.dialect.detect_dialect`: ``migscope_mig_info`` wins;
    else any dcgm-exporter family (any letter case) with a ``GPU_I_ID``.

    Raises:
        NoMigSeriesError: neither is present; the message says what the server holds (the
            dcgm-exporter families found, or the names closest to the expected ones).
    """
    names = set(client.label_values("__name__", start=start, end=end))
    if MIG_INFO in names:
        return Dialect.MIGSCOPE
    if _gi_families(client, names, start=start, end=end):
        return Dialect.DCGM
    raise NoMigSeriesError(explain_no_mig(client.base_url, names, empty="no series in the window"))


def _gi_families(
    client: PrometheusClient, names: Iterable[str], *, start: float, end: float
) -> dict[str, tuple[str, ...]]:
    """dcgm-exporter families (upper case) with a ``GPU_I_ID``: the spellings of each.

    One label-values call over the index: the names of the series that carry the label.
    """
    dcgm = sorted(n for n in names if dcgm_family(n) is not None)
    if not dcgm:
        return {}
    with_gi = client.label_values(
        "__name__",
        match=[selector(None, GPU_I_ID=NON_EMPTY, **{"__name__": dcgm})],
        start=start,
        end=end,
    )
    out: dict[str, list[str]] = {}
    for name in sorted(with_gi):
        family = dcgm_family(name)
        if family is not None:
            out.setdefault(family, []).append(name)
    return {family: tuple(spellings) for family, spellings in out.items()}


def _spellings(names: Iterable[str], family: str) -> tuple[str, ...]:
    """Every name on the server that is ``family`` in some letter case (itself if none)."""
    found = tuple(sorted(n for n in names if dcgm_family(n) == family))
    return found or (family,)


def _quantity_spellings(names: Iterable[str], quantity: str) -> tuple[str, ...]:
    """Every name on the server that writes ``quantity``, newer generation first.

    Every letter case of every field of it (dcgm-exporter 4.8's and 4.9's names, see
    :data:`~migscope.analyzer._intake.dialect.names.DCGM_FIELDS`). Newer first because the queries
    join them with ``or``, which keeps the left side where both hold a slice, and the file
    reader reads the newer field there too. With none on the server: the quantity's own
    name, which matches nothing (or nothing at all for the capacity, which 4.8 lacks).
    """
    present = sorted(names)
    found = tuple(
        n
        for field in reversed(fields_of(quantity))
        for n in present
        if dcgm_family(n) == field.name
    )
    if found:
        return found
    return () if quantity == DCGM_FB_CAPACITY else (quantity,)


def dcgm_names(client: PrometheusClient, *, start: float, end: float) -> dict[str, tuple[str, ...]]:
    """Every spelling on the server of each dcgm-exporter quantity the queries read.

    Activity, the framebuffer's used and free (their 4.8 names when absent) and capacity
    (empty when absent), each under its 4.8 name (see :func:`_quantity_spellings`), and
    under ``"presence"`` the family that lists GPU instances without them, if any (see
    :func:`~migscope.analyzer._intake.dialect.presence_family`).
    """
    present = client.label_values("__name__", start=start, end=end)
    names: dict[str, tuple[str, ...]] = {}
    for quantity in DCGM_QUANTITIES:
        names[quantity] = _quantity_spellings(present, quantity)
    presence = presence_family(_gi_families(client, present, start=start, end=end))
    if presence is not None:
        names["presence"] = _spellings(present, presence)
    return names


def migscope_names(
    client: PrometheusClient, *, start: float, end: float
) -> dict[str, tuple[str, ...]]:
    """The optional migscope families the server holds: the active-seconds counter, if any.

    ``{MIG_ACTIVE_SECONDS: (MIG_ACTIVE_SECONDS,)}`` when some series of it lies in the
    window, else ``{}``: the activity queries then read the ratio gauge alone, as before the
    counters (:meth:`~.queries.Queries.per_interval`), instead of asking every step for a
    counter nobody writes. One label-values call over the index.
    """
    found = client.label_values(
        "__name__", match=[selector(MIG_ACTIVE_SECONDS)], start=start, end=end
    )
    return {MIG_ACTIVE_SECONDS: (MIG_ACTIVE_SECONDS,)} if MIG_ACTIVE_SECONDS in found else {}


def slice_selectors(
    dialect: Dialect, names: Mapping[str, tuple[str, ...]], **extra: str
) -> list[str]:
    """Selectors of the series that name slices: where the nodes are read from.

    dcgm-exporter: only series with a ``GPU_I_ID``, since whole-GPU series make no slice.
    ``extra`` adds label matchers (``label=""``: series without the label).
    """
    if dialect is Dialect.DCGM:
        return [
            selector(n, GPU_I_ID=NON_EMPTY, **extra)
            for spellings in names.values()
            for n in spellings
        ]
    return [selector(MIG_INFO, **extra)]


def find_nodes(
    client: PrometheusClient,
    dialect: Dialect,
    names: Mapping[str, tuple[str, ...]],
    *,
    start: float,
    end: float,
) -> tuple[tuple[str, ...], list[str]]:
    """The node labels, first one first, and their non-empty values on the slice series.

    As the file reader reads a series' node (:func:`~migscope.analyzer._intake.dialect.node_of`):
    the first of :data:`~migscope.analyzer._intake.dialect.NODE_LABELS` that a series has. So the
    first label with values, then each later one that has values on series without the
    labels before it: ``("Hostname", "hostname")`` where dcgm-exporter 4.8.2 and 4.8.3+
    both wrote in the window. ``((), [])`` when no series names a node. One label-values
    call per label.
    """
    labels: list[str] = []
    values: set[str] = set()
    for label in NODE_LABELS:
        matches = slice_selectors(dialect, names, **dict.fromkeys(labels, ""))
        found = {v for v in client.label_values(label, match=matches, start=start, end=end) if v}
        if found:
            labels.append(label)
            values |= found
    return tuple(labels), sorted(values)


def _slice_parts(
    dialect: Dialect,
    names: Mapping[str, tuple[str, ...]],
    node_labels: tuple[str, ...],
    expr: str,
) -> tuple[list[str], str]:
    """``expr`` (``{sel}`` for a selector) over every slice series, node under the first label.

    One part per slice metric and node label, each for the series without the labels
    before it, given the first label with ``label_replace`` (as :meth:`Queries.over` reads
    a node); each part aggregated ``max`` by the node and the slice, and tagged so that
    parts with the same labels survive ``or``. Returns the parts and the ``by`` clause.
    """
    first = node_labels[0]
    if dialect is Dialect.MIGSCOPE:
        ids: tuple[str, ...] = ("gpu", "gpu_uuid", "gpu_instance_id", "mig_uuid")
        metrics = [MIG_INFO]
        extra: dict[str, str | Matcher] = {}
    else:
        ids = ("gpu", "UUID", "uuid", "GPU_I_ID", "GPU_I_PROFILE")
        metrics = [n for spellings in names.values() for n in spellings]
        extra = {"GPU_I_ID": NON_EMPTY}
    by = "by (" + ", ".join((first, *ids)) + ")"
    parts: list[str] = []
    for m, metric in enumerate(metrics):
        absent: dict[str, str | Matcher] = {}
        for i, label in enumerate(node_labels):
            chosen = selector(metric, **{**extra, **absent, label: NON_EMPTY})
            inner = expr.format(sel=chosen)
            if i:
                inner = f'label_replace({inner}, "{first}", "$1", "{label}", "(.*)")'
            tagged = f'label_replace(max {by} ({inner}), "migscope_part", "{m}.{i}", "", "")'
            parts.append(tagged)
            absent[label] = ""
    return parts, by


def find_moves(
    client: PrometheusClient,
    dialect: Dialect,
    names: Mapping[str, tuple[str, ...]],
    node_labels: tuple[str, ...],
    *,
    start: float,
    end: float,
    step: float,
) -> tuple[NodeMoves | None, list[str]]:
    """GPUs whose slice series carry several node names, and the names no slice keeps.

    See :class:`~migscope.analyzer._intake.dialect.grouping.NodeMoves`.

    One cheap instant query over raw ranges lists each (node, slice); only when a GPU UUID
    has several names does a second one ask when each name last had a sample (the end of
    the newest step interval holding one), so that each GPU keeps its newest name, as the
    file readers choose it. ``(None, [])`` when nothing moved, when the series name no node,
    or when a slice series has no GPU UUID (nothing is merged then, on either path).
    """
    if not node_labels:
        return None, []
    window = duration(end - start)
    parts, _ = _slice_parts(dialect, names, node_labels, f"last_over_time({{sel}}[{window}])")
    first = node_labels[0]

    def rows(
        exprs: list[str], with_time: bool
    ) -> list[tuple[str, str, tuple[str, str, str], float]]:
        out = []
        for expr in exprs:
            for sample in client.query(expr, at=end):
                labels = sample.labels
                uuid = labels.get("gpu_uuid") or labels.get("UUID") or labels.get("uuid") or ""
                gi = labels.get("gpu_instance_id") or labels.get("GPU_I_ID") or ""
                ident = labels.get("mig_uuid") or labels.get("GPU_I_PROFILE") or ""
                t = sample.value if with_time else 0.0
                out.append((labels.get(first, ""), uuid, (labels.get("gpu", ""), gi, ident), t))
        return out

    listed = rows(parts, with_time=False)
    names_of: dict[str, set[str]] = {}
    for node, uuid, _, _ in listed:
        names_of.setdefault(uuid, set()).add(node)
    if "" in names_of or all(len(v) < 2 for v in names_of.values()):
        return None, []
    interval = duration(step)
    stamped, _ = _slice_parts(
        dialect,
        names,
        node_labels,
        f"max_over_time(timestamp(last_over_time({{sel}}[{interval}]))[{window}:{interval}])",
    )
    moves = node_moves(rows(stamped, with_time=True))
    if moves is None:
        return None, []
    kept = set(moves.canonical.values())
    return moves, moves.aliases_only(sorted({n for n, *_ in listed}), kept)
