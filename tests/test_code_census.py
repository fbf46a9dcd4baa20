"""scripts/code-census counts what it says, on a small tree and on this one (issue 26)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "code-census"


def _script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("code_census", str(SCRIPT))
    spec = importlib.util.spec_from_loader("code_census", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_private_modules_promise_nothing(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "core/src/migscope/core/__init__.py": '"""Core."""\n\n__all__ = ["Thing"]\n',
            "core/src/migscope/core/_things.py": '__all__ = ["Thing", "other"]\n',
            "core/src/migscope/core/_inner/deep.py": '__all__ = ["deep"]\n',
        },
    )
    counts = _script().census(tmp_path)
    assert (counts["modules"], counts["names_in_all"]) == (3, 4)
    assert (counts["public_modules"], counts["public_names"]) == (1, 1)


def test_counts_of_a_small_tree(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "core/src/migscope/core/__init__.py": '"""Core."""\n',
            "core/src/migscope/core/things.py": (
                '"""Things.\n\nWhy its own module: things."""\n\n'
                'import os\n\n__all__ = [\n    "Thing",\n    "other",\n]\n\n\n'
                "class Thing:\n    pass\n\n\ndef other() -> str:\n    return os.sep\n"
            ),
            "core/src/migscope/core/front.py": (
                '"""A facade."""\n\nfrom migscope.core.things import Thing, other\n\n'
                '__all__ = ["Thing", "other"]\n'
            ),
            "sim/src/migscope/sim/things.py": (
                "from migscope.core import things\nfrom migscope.core.things import Thing\n"
                "from migscope.core.front import Thing as Again, other\n\n"
                "X = (things, Thing, Again)\n"
            ),
        },
    )
    counts = _script().census(tmp_path)
    assert counts["modules"] == 4
    assert counts["modules_with_all"] == 2
    assert counts["names_in_all"] == 4
    assert counts["public_modules"] == 4
    assert counts["public_names"] == 4
    # migscope.core.things (a module) is not a name; the rest are three (module, name) pairs.
    assert counts["names_crossing_distributions"] == 3
    assert counts["facades"] == 1
    assert counts["largest_facades"] == [{"module": "migscope.core.front", "names": 2}]
    assert counts["docstring_only_modules"] == 1
    assert counts["modules_arguing_for_themselves"] == 1
    assert counts["most_repeated_file_names"] == [{"name": "things.py", "count": 2}]
    # Code lines: 9 in things.py, 2 in front.py, 4 in sim's (the docstrings do not count);
    # wiring: 5 of things.py's (import, __all__ over 4 lines), both of front.py's, 3 of sim's.
    assert (counts["wiring_lines"], counts["code_lines"]) == (10, 15)
    assert counts["largest_modules"][0] == {"module": "migscope.core.things", "lines": 18}


def test_the_census_of_this_tree() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    counts = json.loads(result.stdout)
    assert counts["circles"] == 0, counts["circle_modules"]
    assert counts["modules"] > 100
    assert counts["grimp_modules"] >= counts["modules"]
    assert 0 < counts["median_module_lines"] <= counts["largest_modules"][0]["lines"]
    assert len(counts["largest_modules"]) == 10
    assert 0 < counts["modules_with_all"] <= counts["modules"]
    assert counts["names_in_all"] >= counts["modules_with_all"]
    assert 0 < counts["names_crossing_distributions"] < counts["names_in_all"]
    assert 0 <= counts["facades"] < counts["modules"]
    assert counts["repeated_file_names"] >= len(counts["most_repeated_file_names"]) > 0
    assert 0 < counts["wiring_share"] < 0.5
    assert "analyze_help_seconds" not in counts  # --quick leaves the timing out
