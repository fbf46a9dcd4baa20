"""No module of migscope imports itself back, however long the way round (issue 26).

A circle makes import order matter, hides which module owns a noun, and is usually dodged
with an import inside a function; it is found here instead, with the modules and lines that
close it. Imports under ``TYPE_CHECKING`` count: they are the same dependency, only unpaid.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import grimp
import pytest


def circles(graph: grimp.ImportGraph, modules: Iterable[str]) -> list[list[str]]:
    """The import circles among ``modules``: strongly connected sets of two or more, sorted.

    Tarjan's algorithm, iterative (the graph has a few hundred modules, no recursion needed).
    """
    wanted = sorted(modules)
    inside = set(wanted)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in wanted:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & inside)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, imported = work[-1]
            step = next(imported, None)
            if step is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif step not in index:
                index[step] = low[step] = len(index)
                stack.append(step)
                on_stack.add(step)
                work.append(
                    (step, iter(sorted(graph.find_modules_directly_imported_by(step) & inside)))
                )
            elif step in on_stack:
                low[module] = min(low[module], index[step])
    return sorted(found)


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
    found = circles(graph, graph.modules)
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
    found = circles(graph, graph.modules)
    assert found == [["circlecheck.a", "circlecheck.b", "circlecheck.c"]]
    assert "circlecheck.c -> circlecheck.a (line 3)" in describe(graph, found[0])
