"""Reports of an analysis: JSON (the documented schema), Markdown, CSV, HTML and the configs.

:func:`write_reports` writes everything a run produces into one directory: the report in
each format, the mig-parted config (``mig-parted-config.yaml``, what MIG Manager reads) and
the node → config plan (``node-plan.json``, what the applier and a human follow) and, when a
workload should ask for another profile, its patches (``request-changes.yaml``), swapped in
whole or not at all (:mod:`.files`).
Every file renders from one typed report (:func:`~.data.build_report`: the analysis plus what
the report writer adds, :class:`~.data.ReportExtras`, as
:class:`~migscope.core._spec.v1.ReportV1`), built once per run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Literal, TextIO

from migscope.analyzer._judge.workloads import REQUEST_CHANGES_FILE, patch_documents
from migscope.analyzer._report.csv_report import CSV_COLUMNS, render_csv
from migscope.analyzer._report.data import ReportExtras, build_report
from migscope.analyzer._report.files import replace_files
from migscope.analyzer._report.html import render_html
from migscope.analyzer._report.json_report import json_text, write_json
from migscope.analyzer._report.markdown import render_markdown
from migscope.analyzer._report.node_plan import node_plan
from migscope.analyzer._result import AnalysisResult
from migscope.core import (
    NODE_PLAN_FILE,
    REPORT_FILE,
    ReportV1,
    emit_config,
    validate_node_plan,
    validate_report,
)

__all__ = [
    "CSV_COLUMNS",
    "FILE_NAMES",
    "Format",
    "ReportExtras",
    "build_report",
    "render",
    "render_csv",
    "render_html",
    "render_markdown",
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
    "requests": REQUEST_CHANGES_FILE,
}
"""File written for each output, inside the ``--out`` directory."""


def _report_of(
    result: AnalysisResult,
    *,
    report: ReportV1 | None = None,
    extras: ReportExtras | None = None,
) -> ReportV1:
    """``report`` when given, else :func:`build_report` of ``result``."""
    return report if report is not None else build_report(result, extras)


def render(
    result: AnalysisResult,
    fmt: Format,
    *,
    report: ReportV1 | None = None,
    extras: ReportExtras | None = None,
) -> str:
    """The report in one format, from ``report`` (see :func:`_report_of`).

    Raises:
        pydantic.ValidationError: the analysis breaks the report contract (a bug).
        GrafanaUrlError: ``extras.grafana_url`` is not a plain http(s) address.
    """
    report = _report_of(result, report=report, extras=extras)
    if fmt == "csv":
        return render_csv(result, report)
    if fmt == "json":
        return json_text(report)
    return render_markdown(report) if fmt == "md" else render_html(report)


def write_report(
    result: AnalysisResult,
    fmt: Format,
    stream: TextIO,
    *,
    report: ReportV1 | None = None,
    extras: ReportExtras | None = None,
) -> None:
    """:func:`render` into ``stream``, JSON piece by piece (:func:`write_json`).

    Why: the JSON as one string is most of a run's peak memory at fleet scale.
    """
    report = _report_of(result, report=report, extras=extras)
    if fmt != "json":
        stream.write(render(result, fmt, report=report))
        return
    write_json(report, stream)


def write_reports(
    result: AnalysisResult,
    out: str | os.PathLike[str],
    *,
    formats: Iterable[Format] = ("json", "md", "csv", "html"),
    extras: ReportExtras | None = None,
    report: ReportV1 | None = None,
) -> dict[str, Path]:
    """Write the reports, the mig-parted config and the node plan into ``out``, whole.

    The directory is created if needed. The files are written aside and swapped in together
    (:func:`.files.replace_files`): a run that fails on the way (a full disk, a contract
    break) leaves the previous run's files exactly as they were; one that succeeds leaves
    exactly its own (an earlier run's file of a name it does not write, such as
    ``mig-parted-config.yaml`` or a format not asked for, goes), and files of other names
    alone. A link planted at a file's name is replaced, never followed. Files are created
    with mode 0640 less the umask (:data:`.files.FILE_MODE`). Every file is written from one
    report (:func:`_report_of`): a caller that also prints a format passes it, so it is built
    once.

    Returns:
        ``{output: path}`` for every file written (keys as in :data:`FILE_NAMES`).

    Raises:
        OSError: the directory cannot be created or written (it is then as it was).
        GrafanaUrlError: ``extras.grafana_url`` is not a plain http(s) address.
    """
    report = _report_of(result, report=report, extras=extras)
    plan = node_plan(result, report)
    validate_node_plan(plan)  # the applier's input: a contract break fails here, not there
    contents: dict[str, Callable[[TextIO], object]] = {}
    for fmt in formats:
        contents[fmt] = partial(write_report, result, fmt, report=report)
    if report.mig_parted_config is not None:
        header = (
            "Generated by migscope analyze: one config per distinct node layout.\n"
            "Set each node's nvidia.com/mig.config label as node-plan.json says."
        )
        config = emit_config(report.mig_parted_config, header=header)
        contents["mig-parted"] = lambda stream: stream.write(config)
    contents["plan"] = lambda stream: stream.write(json.dumps(plan, indent=2) + "\n")
    changes = report.request_changes
    if changes is not None and changes.workloads:
        patches = patch_documents(w.model_dump(exclude_unset=True) for w in changes.workloads)
        contents["requests"] = lambda stream: stream.write(patches)
    written = replace_files(
        out,
        {FILE_NAMES[key]: write for key, write in contents.items()},
        owned=FILE_NAMES.values(),
    )
    return {key: written[FILE_NAMES[key]] for key in contents}
