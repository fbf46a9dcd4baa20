"""Reports of an analysis: JSON (the documented schema), Markdown, CSV, HTML and the configs.

:func:`write_reports` writes everything a run produces into one directory: the report in
each format, the mig-parted config (``mig-parted-config.yaml``, what MIG Manager reads) and
the node → config plan (``node-plan.json``, what the applier and a human follow).
Every format renders from one data dict (:func:`~.data.report_data`: the analysis plus what
the report writer adds, :class:`~.data.ReportExtras`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, TextIO

from migscope.analyzer.report.csv_report import CSV_COLUMNS, render_csv
from migscope.analyzer.report.data import ReportExtras, report_data
from migscope.analyzer.report.html import render_html
from migscope.analyzer.report.json_report import (
    ReportV1,
    json_schema,
    json_text,
    render_json,
    validate_report,
    write_json,
)
from migscope.analyzer.report.markdown import render_markdown
from migscope.analyzer.result import AnalysisResult
from migscope.core.migparted import emit_config
from migscope.core.spec.v1 import NODE_PLAN_FILE, REPORT_FILE, validate_node_plan

__all__ = [
    "CSV_COLUMNS",
    "FILE_NAMES",
    "Format",
    "ReportExtras",
    "ReportV1",
    "json_schema",
    "render",
    "render_csv",
    "render_html",
    "render_json",
    "render_markdown",
    "report_data",
    "validate_report",
    "write_report",
    "write_reports",
]

Format = Literal["json", "md", "csv", "html"]

FILE_NAMES: dict[str, str] = {
    "json": REPORT_FILE,
    "md": "report.md",
    "csv": "slices.csv",
    "html": "report.html",
    "mig-parted": "mig-parted-config.yaml",
    "plan": NODE_PLAN_FILE,
}
"""File written for each output, inside the ``--out`` directory."""


def render(
    result: AnalysisResult,
    fmt: Format,
    *,
    data: dict[str, Any] | None = None,
    report: ReportV1 | None = None,
    extras: ReportExtras | None = None,
) -> str:
    """The report in one format.

    JSON, Markdown, HTML and CSV come from the report data: ``data``
    (:func:`report_data` of ``result`` and ``extras``) and ``report`` (it, validated) when
    the caller has them already, else built here.

    Raises:
        pydantic.ValidationError: the analysis breaks the report contract (a bug).
        GrafanaUrlError: ``extras.grafana_url`` is not a plain http(s) address.
    """
    if data is None:
        data = report_data(result, extras)
    if fmt == "csv":
        return render_csv(result, data)
    if report is None:
        report = validate_report(data)  # a contract break fails here, in the analyzer
    if fmt == "json":
        return json_text(data)
    return render_markdown(report) if fmt == "md" else render_html(report)


def write_report(
    result: AnalysisResult,
    fmt: Format,
    stream: TextIO,
    *,
    data: dict[str, Any] | None = None,
    report: ReportV1 | None = None,
    extras: ReportExtras | None = None,
) -> None:
    """:func:`render` into ``stream``, JSON piece by piece (:func:`write_json`).

    Why: the JSON as one string is most of a run's peak memory at fleet scale.
    """
    if fmt != "json":
        stream.write(render(result, fmt, data=data, report=report, extras=extras))
        return
    if data is None:
        data = report_data(result, extras)
    if report is None:
        validate_report(data)
    write_json(data, stream)


def write_reports(
    result: AnalysisResult,
    out: str | os.PathLike[str],
    *,
    formats: Iterable[Format] = ("json", "md", "csv", "html"),
    extras: ReportExtras | None = None,
    data: dict[str, Any] | None = None,
    report: ReportV1 | None = None,
) -> dict[str, Path]:
    """Write the reports, the mig-parted config and the node plan into ``out``.

    The directory is created if needed; existing files of the same names are replaced (a
    re-run updates a report in place). ``data`` and ``report`` as in :func:`render`: a
    caller that also prints a format passes them, so they are built once.

    Returns:
        ``{output: path}`` for every file written (keys as in :data:`FILE_NAMES`).

    Raises:
        OSError: the directory cannot be created or written.
        GrafanaUrlError: ``extras.grafana_url`` is not a plain http(s) address.
    """
    if data is None:
        data = report_data(result, extras)  # once for every format: it recomputes the plan
    if report is None:
        report = validate_report(data)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for fmt in formats:
        path = folder / FILE_NAMES[fmt]
        with path.open("w", encoding="utf-8") as stream:
            write_report(result, fmt, stream, data=data, report=report)
        written[fmt] = path
    if result.mig_parted is not None:
        path = folder / FILE_NAMES["mig-parted"]
        header = (
            "Generated by migscope analyze: one config per distinct node layout.\n"
            "Set each node's nvidia.com/mig.config label as node-plan.json says."
        )
        path.write_text(emit_config(result.mig_parted, header=header), encoding="utf-8")
        written["mig-parted"] = path
    path = folder / FILE_NAMES["plan"]
    plan = result.node_plan()
    validate_node_plan(plan)  # the applier's input: a contract break fails here, not there
    path.write_text(json.dumps(plan, indent=2) + "\n", encoding="utf-8")
    written["plan"] = path
    return written
