"""Grafana's dashboard model (schemaVersion 39), as the few builders the dashboards need.

Panels, targets, table columns and template variables are dictionaries of Grafana's JSON;
building them here keeps every panel's data source, ids and defaults the same, so the
dashboard modules say only what differs: titles, queries and places on the grid.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from migscope.core._dashboards.promql import GPU_INFO, MIG_POD_INFO

Json = dict[str, Any]

DS = {"type": "prometheus", "uid": "${datasource}"}
"""Every panel's and variable's data source: the dashboard's ``datasource`` variable."""


def target(expr: str, legend: str = "", *, instant: bool = False, table: bool = False) -> Json:
    """A Prometheus query of a panel: a range query, or ``instant`` (as a ``table``)."""
    out: Json = {
        "datasource": DS,
        "expr": expr,
        "refId": "A",
        "legendFormat": legend or "__auto",
        "range": not instant,
        "instant": instant,
    }
    if table:
        out["format"] = "table"
    return out


def panel(
    kind: str,
    title: str,
    targets: Sequence[Json],
    *,
    x: int,
    y: int,
    w: int = 6,
    h: int = 6,
    unit: str = "short",
    description: str = "",
    options: Json | None = None,
    transformations: Sequence[Json] = (),
    overrides: Sequence[Json] = (),
) -> Json:
    """A panel of ``kind`` at ``x``, ``y`` on Grafana's 24-column grid; targets get A, B, ..."""
    refs = "ABCDEFGH"
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": [{**t, "refId": refs[i]} for i, t in enumerate(targets)],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": list(overrides)},
        "options": options or {},
        "transformations": list(transformations),
    }


def column(field: str, name: str, unit: str = "") -> Json:
    """A table override: show ``field`` (``Value #B``) as ``name``, in ``unit`` if given."""
    properties: list[Json] = [{"id": "displayName", "value": name}]
    if unit:
        properties.append({"id": "unit", "value": unit})
    return {"matcher": {"id": "byName", "options": field}, "properties": properties}


def _variable(name: str, query: str, *, label: str, include_all: bool = True) -> Json:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": {"query": query, "refId": f"{name}-var"},
        "definition": query,
        "refresh": 2,
        "includeAll": include_all,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def variables(*names: str) -> list[Json]:
    """The data source variable, then the query variables ``names`` (cluster, node, ...)."""
    out: list[Json] = [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
        }
    ]
    queries = {
        "cluster": (f"label_values({GPU_INFO}, cluster)", "Cluster"),
        "node": (f'label_values({GPU_INFO}{{cluster=~"$cluster"}}, node)', "Node"),
        "gpu": (f'label_values({GPU_INFO}{{cluster=~"$cluster", node=~"$node"}}, gpu)', "GPU"),
        "namespace": (
            f'label_values({MIG_POD_INFO}{{cluster=~"$cluster"}}, namespace)',
            "Namespace",
        ),
    }
    for name in names:
        query, label = queries[name]
        out.append(_variable(name, query, label=label))
    return out


def dashboard(uid: str, title: str, panels: Sequence[Json], variables: Sequence[Json]) -> Json:
    """A Grafana dashboard model (schemaVersion 39) with ids assigned to its panels."""
    return {
        "uid": uid,
        "title": title,
        "tags": ["migscope", "mig", "gpu"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "time": {"from": "now-24h", "to": "now"},
        "refresh": "1m",
        "templating": {"list": list(variables)},
        "annotations": {"list": []},
        "links": [
            {
                "title": "migscope dashboards",
                "type": "dashboards",
                "tags": ["migscope"],
                "asDropdown": True,
            }
        ],
        "panels": [{**p, "id": i + 1} for i, p in enumerate(panels)],
    }


def panel_queries(model: Json) -> list[tuple[str, str]]:
    """``(panel title, expr)`` of every query in a dashboard model."""
    return [(p["title"], t["expr"]) for p in model["panels"] for t in p.get("targets", [])]
