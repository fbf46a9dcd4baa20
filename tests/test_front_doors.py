"""One front door per distribution (issue 26): what each exports, and that others use only it.

As httpx's ``test_exported_members.py``: each distribution's package ``__init__`` exports the
names other distributions and the CLI use, and the lists are held here, so a name added to or
dropped from a front door is a decision, not an accident. The names load on first use (PEP
562): importing a front door loads none of its modules.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

DISTRIBUTIONS = ["core", "sim", "kube", "exporter", "analyzer", "applier", "scheduler"]

EXPORTED: dict[str, list[str]] = {
    "core": [
        "BUILTIN_WORDING",
        "DASHBOARDS",
        "DCGM_COMPAT",
        "GPU_LABELS",
        "GPU_UUID",
        "IDLE_ACTIVITY_BELOW",
        "IDLE_MEMORY_BELOW",
        "METRICS",
        "MIG_LABELS",
        "NODE_PLAN_FILE",
        "NVIDIA_DRIVER",
        "OTHER",
        "PLAIN_FORM",
        "PREFIX",
        "REPORT_FILE",
        "SCHEMA_VERSION",
        "CatalogueError",
        "ClaimResizeV1",
        "ConfigCheck",
        "ConfigConflictError",
        "ConfigError",
        "ConfigReport",
        "ConfigSource",
        "DcgmCompatSpec",
        "DcgmType",
        "DeviceName",
        "Difference",
        "DriverVersion",
        "DriverVersionError",
        "DurationError",
        "EvidenceV1",
        "FileProblemError",
        "GiProfile",
        "GpuLayoutV1",
        "GpuLayouts",
        "GpuModel",
        "Layout",
        "LayoutCheck",
        "LayoutError",
        "Loc",
        "MetricSpec",
        "MigConfigEntry",
        "MigPartedConfig",
        "MigscopeError",
        "NameStatus",
        "NodePlanEntryV1",
        "NodePlanV1",
        "ObservedProfile",
        "PlacedInstance",
        "PlannedGpuV1",
        "PoolV1",
        "ProfileTable",
        "ProfileTableError",
        "ProvenanceV1",
        "RecommendationV1",
        "ReplayV1",
        "ReportV1",
        "SavingsV1",
        "SliceOnGpu",
        "SliceV1",
        "SourceV1",
        "TrendPointV1",
        "UnknownGpuError",
        "UnknownProfileError",
        "UserError",
        "WhatIfV1",
        "WindowV1",
        "Wording",
        "WorkloadV1",
        "YamlProblem",
        "all_models",
        "check_config",
        "compare",
        "compose_node",
        "compose_with_lines",
        "construct_strict",
        "describe_error",
        "describe_location",
        "describe_problem",
        "emit_config",
        "entry_applies_to",
        "entry_for_layout",
        "find_model",
        "first_problem",
        "first_validation_problem",
        "format_duration",
        "generated_configs",
        "gpu_instances",
        "gpu_recreated",
        "identify_model",
        "is_valid",
        "json_schema",
        "layout_for_gpu",
        "lazy_exports",
        "line_for",
        "load_strict",
        "maximal_layouts",
        "merge_configs",
        "metric",
        "model_for_name",
        "model_from_table",
        "normalise_profile_name",
        "one_line",
        "parse_config",
        "parse_device_name",
        "parse_duration",
        "parse_pci_device_id",
        "pods_losing_device",
        "profile_key",
        "read_config_sources",
        "recreated_gpus",
        "redact_argv",
        "redact_data",
        "redact_text",
        "report_json",
        "tables_from_nvidia_smi",
        "valid_layouts",
        "validate_node_plan",
        "validate_report",
        "violations",
    ],
    "sim": [
        "BUILTIN_SCENARIOS",
        "DEFAULT_START",
        "DEMO_SCENARIO",
        "MIG_RESERVED_BYTES",
        "ActivityMix",
        "Bursty",
        "Constant",
        "FaultInjector",
        "FixedMemory",
        "Idle",
        "InjectedError",
        "MemoryModel",
        "Periodic",
        "PodAssignment",
        "PodOwner",
        "Scenario",
        "ScenarioError",
        "SimClock",
        "SimGpu",
        "SimInstance",
        "SimNode",
        "SimNvml",
        "Simulation",
        "SlowCall",
        "Trace",
        "TraceError",
        "TraceMemory",
        "TraceSeries",
        "Workload",
        "WorkloadSample",
        "load_containers",
        "load_scenario",
        "load_series",
        "read_scenario_yaml",
        "resolve_scenario",
    ],
    "kube": [
        "ApiError",
        "Conflict",
        "DryRunWrite",
        "Kube",
        "KubeConfigError",
        "KubeError",
        "NotFound",
        "ReadOnlyKube",
        "TooManyRequests",
        "api_client",
        "now_rfc3339",
    ],
    "exporter": [
        "exporter",
    ],
    "analyzer": [
        "DEFAULT_HEADROOM",
        "DEFAULT_OBJECTIVE",
        "DEFAULT_STEP_SECONDS",
        "DEFAULT_TIMEOUT_SECONDS",
        "DEFAULT_TIME_LIMIT_SECONDS",
        "DEFAULT_WINDOW_SECONDS",
        "STATS_MODES",
        "AnalysisResult",
        "AnalyzeOptions",
        "EmbeddedPrometheusSource",
        "FileSource",
        "Format",
        "Objective",
        "OwnerLookup",
        "PodOwners",
        "Policy",
        "PrometheusClient",
        "PrometheusSource",
        "ReportExtras",
        "SimulationSource",
        "Source",
        "StatsMode",
        "build_report",
        "cluster_owners",
        "header_problem",
        "kube_state_metrics_owners",
        "list_pending_pods",
        "load_policy",
        "merge_owners",
        "normalise_base_url",
        "pending_demand",
        "read_trend",
        "run",
        "snapshot_sentence",
        "write_report",
        "write_reports",
    ],
    "applier": [
        "DEFAULT_MAX_PLAN_AGE_S",
        "Applier",
        "ApplyPlan",
        "ApplySettings",
        "ClusterRefused",
        "LeaseHeld",
        "LeaseLost",
        "PlanRefused",
        "load_plan",
        "parse_window_spec",
        "plan_from_report",
    ],
    "scheduler": [
        "DEFAULT_KILL_AFTER_SECONDS",
        "DEFAULT_SHUTDOWN_GRACE_SECONDS",
        "ArgsCheck",
        "JobArgsError",
        "JobConfig",
        "JobKind",
        "JsonLog",
        "RunResult",
        "Runner",
        "ScheduleConfig",
        "ScheduleError",
        "child_argv",
        "cron_trigger",
        "load_schedule",
        "next_fire_times",
        "parse_schedule",
        "run_once",
        "send_webhook",
        "serve",
        "update_latest",
        "zone",
    ],
}

ALLOWED_BACK_DOORS: dict[str, str] = {
    # "path/of/a/module.py": "why it still imports another distribution's submodule",
}
"""Modules that may still import past a front door, each with its reason (none today)."""


@pytest.mark.parametrize("dist", sorted(EXPORTED))
def test_the_front_door_exports_exactly_these_names(dist: str) -> None:
    assert importlib.import_module(f"migscope.{dist}").__all__ == EXPORTED[dist]


@pytest.mark.parametrize("dist", sorted(EXPORTED))
def test_every_name_resolves_to_where_it_is_defined(dist: str) -> None:
    package = importlib.import_module(f"migscope.{dist}")
    for name in EXPORTED[dist]:
        home = f"migscope.{dist}.{package._HOME[name]}"
        value = getattr(package, name)
        assert value is getattr(importlib.import_module(home), name), name
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == home, f"{name} is re-exported by {home}"
        assert name in dir(package)


@pytest.mark.parametrize("dist", sorted(EXPORTED))
def test_an_unknown_name_is_an_attribute_error(dist: str) -> None:
    package = importlib.import_module(f"migscope.{dist}")
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        package.nope  # noqa: B018


@pytest.mark.parametrize("dist", sorted(EXPORTED))
def test_no_exported_name_is_also_one_of_its_modules(dist: str) -> None:
    """Python sets a loaded submodule as an attribute of its package: a front-door name that
    is also a module's name (``run`` beside ``run.py``) would turn into the module as soon as
    anything imported it. Such a module is renamed (``analyzer/run.py`` is ``analysis.py``)."""
    package = importlib.import_module(f"migscope.{dist}")
    modules = {m.name for m in pkgutil.iter_modules(package.__path__)}
    assert not set(package.__all__) & modules


def test_run_stays_the_function_after_its_module_loads() -> None:
    importlib.import_module("migscope.analyzer._analysis")
    from migscope.analyzer import run

    assert inspect.isfunction(run)


def test_a_scheduler_default_loads_no_engine() -> None:
    """``migscope schedule --help`` reads the package's defaults only: no APScheduler,
    pydantic or YAML, and of the scheduler's modules only the one holding them."""
    code = (
        "import sys, migscope.scheduler\n"
        "from migscope.scheduler import DEFAULT_SHUTDOWN_GRACE_SECONDS\n"
        "print(sorted(m for m in sys.modules if m.startswith(('apscheduler', 'yaml',"
        " 'pydantic', 'migscope.scheduler.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['migscope.scheduler._defaults']"


def test_importing_a_front_door_loads_none_of_its_modules() -> None:
    """None but the loader they share (:mod:`migscope.core._front_door`, stdlib only)."""
    code = (
        "import importlib, json, sys\n"
        f"dists = {DISTRIBUTIONS!r}\n"
        "for d in dists:\n"
        "    importlib.import_module(f'migscope.{d}')\n"
        "print(json.dumps(sorted(m for m in sys.modules"
        " if any(m.startswith(f'migscope.{d}.') for d in dists))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["migscope.core._front_door"]


def _modules() -> list[tuple[str, Path]]:
    """Every product module as (its distribution, its path): ``*/src`` and the CLI."""
    found = [(d, p) for d in DISTRIBUTIONS for p in sorted((ROOT / d / "src").rglob("*.py"))]
    return found + [("cli", p) for p in sorted((ROOT / "src/migscope/cli").rglob("*.py"))]


def _is_submodule(dist: str, name: str) -> bool:
    package = ROOT / dist / "src" / "migscope" / dist
    return (package / f"{name}.py").exists() or (package / name / "__init__.py").exists()


def _back_doors(dist: str, tree: ast.Module) -> list[str]:
    """Imports past another distribution's front door, or through this one's own."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] != "migscope" or len(parts) < 2 or parts[1] not in DISTRIBUTIONS:
                continue
            if parts[1] != dist and len(parts) > 2:
                found.append(f"line {node.lineno}: {module} (use migscope.{parts[1]})")
            elif parts[1] == dist and len(parts) == 2 and isinstance(node, ast.ImportFrom):
                own = [a.name for a in node.names if not _is_submodule(dist, a.name)]
                if own:
                    found.append(f"line {node.lineno}: its own front door ({', '.join(own)})")
    return found


def test_other_distributions_import_only_through_the_front_door() -> None:
    problems = []
    for dist, path in _modules():
        where = path.relative_to(ROOT).as_posix()
        if where in ALLOWED_BACK_DOORS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), where)
        problems += [f"{where} {p}" for p in _back_doors(dist, tree)]
    assert not problems, "\n".join(problems)


def test_a_back_door_is_found() -> None:
    tree = ast.parse(
        "from migscope.core._spec.v1 import ReportV1\n"
        "import migscope.kube._client\n"
        "from migscope.core import UserError\n"
        "from migscope.analyzer import _report\n"
        "from migscope.analyzer import run as r, build_report\n"
    )
    assert _back_doors("analyzer", tree) == [
        "line 1: migscope.core._spec.v1 (use migscope.core)",
        "line 2: migscope.kube._client (use migscope.kube)",
        "line 5: its own front door (run, build_report)",
    ]


def test_no_allowed_back_door_is_stale() -> None:
    for where in ALLOWED_BACK_DOORS:
        assert (ROOT / where).exists(), where


def test_no_private_module_declares_all() -> None:
    """A front door says what is public; a private module's ``__all__`` would say it twice.

    Package ``__init__`` modules may keep one: a package's own door lists what it re-exports.
    The CLI's door is ``migscope.cli.main`` (the command); its other modules are private too.
    """
    found = []
    for path in (
        sorted(ROOT.glob("*/src/migscope/*/**/_*.py"))
        + sorted(ROOT.glob("*/src/migscope/*/_*/**/*.py"))
        + sorted(ROOT.glob("src/migscope/cli/_*.py"))
    ):
        if path.name == "__init__.py" or path.name.startswith("api_pb2"):
            continue
        if _declared_all(ast.parse(path.read_text())) is not None:
            found.append(str(path.relative_to(ROOT)))
    assert found == []


def _declared_all(tree: ast.Module) -> ast.expr | None:
    """The value a module assigns to ``__all__`` at its top level, None when it has none."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return node.value
    return None


def _importing_code() -> Iterator[tuple[Path, str, ast.Module]]:
    """Every Python file that imports migscope, with its dotted name and its tree.

    The product (``*/src``, the CLI), the tests, ``bench/`` and ``scripts/`` (shell scripts
    there are skipped); a file outside the ``migscope`` package is named by its path
    (``tests.analyzer.test_x``).
    """
    paths = [p for _, p in _modules()] + sorted((ROOT / "tests").rglob("*.py"))
    paths += sorted((ROOT / "bench").rglob("*.py"))
    paths += [p for p in sorted((ROOT / "scripts").iterdir()) if p.is_file()]
    for path in paths:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue  # a shell script
        parts = path.relative_to(ROOT).with_suffix("").parts
        named = parts[parts.index("migscope") :] if "migscope" in parts else parts
        yield path, ".".join(named), tree


def _package_doors() -> dict[str, set[str]]:
    """``{dotted private package: the names its __init__ exports}``, for packages with a door."""
    doors = {}
    for dist in DISTRIBUTIONS:
        src = ROOT / dist / "src"
        for init in sorted((src / "migscope" / dist).glob("_*/**/__init__.py")):
            declared = _declared_all(ast.parse(init.read_text(encoding="utf-8")))
            if declared is not None:
                package = ".".join(init.parent.relative_to(src).parts)
                doors[package] = set(ast.literal_eval(declared))
    return doors


def _door_bypasses(importer: str, tree: ast.Module, doors: dict[str, set[str]]) -> list[str]:
    """Names ``importer`` takes from inside a private package that the package's door offers.

    Code inside the package imports its siblings; code outside goes through the door, so a
    package's door is the one list of what it offers (issue 26: facades bypassed as often as
    used). A distribution's own ``__init__`` is exempt: its lazy map names defining modules.
    """
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and not node.level and node.module):
            continue
        for package, names in doors.items():
            inside = importer == package or importer.startswith(package + ".")
            if inside or not node.module.startswith(package + "."):
                continue
            offered = sorted(a.name for a in node.names if a.name in names)
            if offered:
                found.append(f"line {node.lineno}: {', '.join(offered)} (from {package})")
    return found


def test_a_private_package_is_entered_by_its_door() -> None:
    doors = _package_doors()
    problems = []
    for path, importer, tree in _importing_code():
        if importer.removesuffix(".__init__") in {f"migscope.{d}" for d in DISTRIBUTIONS}:
            continue
        problems += [f"{path.relative_to(ROOT)} {p}" for p in _door_bypasses(importer, tree, doors)]
    assert not problems, "\n".join(problems)


def test_a_door_bypass_is_found() -> None:
    doors = {"migscope.x._p": {"Thing"}}
    tree = ast.parse(
        "from migscope.x._p.mod import Thing, other\n"
        "from migscope.x._p import Thing\n"
        "from migscope.x._p.mod import other\n"
    )
    assert _door_bypasses("migscope.x._q", tree, doors) == ["line 1: Thing (from migscope.x._p)"]
    assert _door_bypasses("migscope.x._p.sibling", tree, doors) == []


def _taken_from_doors(doors: dict[str, set[str]]) -> dict[str, set[str]]:
    """The names code outside each private package takes from its door.

    Code is :func:`_importing_code`'s; a distribution's lazy front door takes a name from a
    package's door when its ``_HOME`` map names the package.
    """
    taken: dict[str, set[str]] = {door: set() for door in doors}
    for _, importer, tree in _importing_code():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and not node.level and node.module in doors):
                continue
            if not (importer == node.module or importer.startswith(node.module + ".")):
                taken[node.module].update(a.name for a in node.names)
    for dist in DISTRIBUTIONS:
        front = importlib.import_module(f"migscope.{dist}")
        for name, home in front._HOME.items():
            door = f"migscope.{dist}.{home}"
            if door in taken:
                taken[door].add(name)
    return taken


def test_a_private_door_offers_only_what_others_take() -> None:
    """A door is the list of what its package offers; a name nobody outside takes is not
    offered (its module keeps it), so the list stays what the package is used for."""
    doors = _package_doors()
    taken = _taken_from_doors(doors)
    unused = {door: sorted(names - taken[door]) for door, names in doors.items()}
    assert {door: names for door, names in unused.items() if names} == {}
