"""No module of migscope imports itself back, however long the way round (issue 26).

A circle makes import order matter, hides which module owns a noun, and is usually dodged
with an import inside a function; it is found here instead, with the modules and lines that
close it. Imports under ``TYPE_CHECKING`` count: they are the same dependency, only unpaid.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The import circles of ``graph``: the modules each module both reaches and is reached by."""
    found: set[frozenset[str]] = set()
    for module in graph.modules:
        mutual = graph.find_upstream_modules(module) & graph.find_downstream_modules(module)
        if mutual:
            found.add(frozenset({module, *mutual}))
    return sorted(sorted(circle) for circle in found)


def describe(graph: grimp.ImportGraph, circle: list[str]) -> str:
    """A circle as its imports, one a line: ``a -> b (line 12)``."""
    members = set(circle)
    lines = [f"circle of {len(circle)} modules:"]
    for importer in circle:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            details = graph.get_import_details(importer=importer, imported=imported)
            at = ", ".join(str(d["line_number"]) for d in details)
            lines.append(f"  {importer} -> {imported} (line {at})")
    return "\n".join(lines)


def test_migscope_has_no_import_circles() -> None:
    graph = grimp.build_graph("migscope", cache_dir=None)
    found = circles(graph)
    assert not found, "\n".join(describe(graph, circle) for circle in found)


def test_a_circle_is_found_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "circlecheck"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circlecheck import b\n")
    (package / "b.py").write_text("from circlecheck import c\n")
    (package / "c.py").write_text(
        "import typing\nif typing.TYPE_CHECKING:\n    import circlecheck.a\n"
    )
    (package / "d.py").write_text("import circlecheck.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circlecheck", cache_dir=None)
    found = circles(graph)
    assert found == [["circlecheck.a", "circlecheck.b", "circlecheck.c"]]
    assert "circlecheck.c -> circlecheck.a (line 3)" in describe(graph, found[0])
