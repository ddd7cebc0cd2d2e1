"""No import cycles among the project's modules (issue 10).

Covers: the graph of ``groundwork``, ``scaler``, ``activator`` and ``loadtests``, built by
grimp (which import-linter installs) with the imports inside functions and
under ``TYPE_CHECKING`` counted, has no cycle; when it has, the failure names
each cycle with the import lines that close it. A cycle hidden in a function
body or under ``TYPE_CHECKING`` in a throwaway package is found, so the check
really counts those imports.

Main decision: cycles are the strongly connected components of the module
graph (Tarjan), and each one is shown as one concrete loop (the shortest
chain from its first module to another and back), so a component of many
modules still reads as a path a reader can follow and break.
"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import grimp
import pytest

PACKAGES = ("groundwork", "scaler", "activator", "loadtests")


def _graph(*packages: str) -> grimp.ImportGraph:
    return grimp.build_graph(*packages, exclude_type_checking_imports=False, cache_dir=None)


def _components(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components with more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _edge(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    details = graph.get_import_details(importer=importer, imported=imported)
    where = ", ".join(f"line {d['line_number']}" for d in details) or "?"
    return f"{importer} -> {imported} ({where})"


def describe_cycles(graph: grimp.ImportGraph) -> list[str]:
    """One readable loop per cycle: each import that closes it, with its line."""
    described = []
    for component in _components(graph):
        start = component[0]
        # The shortest way out of ``start`` to a module of the component, and back.
        best: tuple[str, ...] | None = None
        for other in component[1:]:
            there = graph.find_shortest_chain(importer=start, imported=other)
            back = graph.find_shortest_chain(importer=other, imported=start)
            if there is None or back is None:
                continue
            loop = (*there, *back[1:])
            if best is None or len(loop) < len(best):
                best = loop
        assert best is not None, f"no loop found through {component}"
        edges = "; ".join(_edge(graph, a, b) for a, b in itertools.pairwise(best))
        described.append(f"{' -> '.join(best)}  [{edges}]  (component: {', '.join(component)})")
    return described


def test_no_import_cycles_among_the_projects_modules() -> None:
    cycles = describe_cycles(_graph(*PACKAGES))
    assert not cycles, f"{len(cycles)} import cycle(s):\n" + "\n".join(cycles)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.mark.parametrize(
    ("how", "b_source"),
    [
        ("at module level", "from cyclepkg import a\n"),
        ("inside a function", "def f():\n    from cyclepkg import a\n    return a\n"),
        (
            "under TYPE_CHECKING",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cyclepkg import a\n",
        ),
    ],
)
def test_a_cycle_is_found_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, b_source: str
) -> None:
    _write(
        tmp_path,
        {
            "cyclepkg/__init__.py": "",
            "cyclepkg/a.py": "from cyclepkg import b\n",
            "cyclepkg/b.py": b_source,
            "cyclepkg/c.py": "from cyclepkg import a\n",  # imports into the loop, not part of it
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cycles = describe_cycles(_graph("cyclepkg"))
    assert len(cycles) == 1, (how, cycles)
    assert cycles[0].startswith("cyclepkg.a -> cyclepkg.b -> cyclepkg.a"), cycles
    assert "cyclepkg.a -> cyclepkg.b (line 1)" in cycles[0]
    assert "cyclepkg.c" not in cycles[0]


def test_no_cycle_in_a_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(
        tmp_path,
        {
            "chainpkg/__init__.py": "",
            "chainpkg/a.py": "from chainpkg import b\n",
            "chainpkg/b.py": "def f():\n    from chainpkg import c\n    return c\n",
            "chainpkg/c.py": "",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert describe_cycles(_graph("chainpkg")) == []
