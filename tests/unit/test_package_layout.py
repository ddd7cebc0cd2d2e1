"""The services' top levels stay small enough to read at a glance.

Covers: at most 12 modules directly under ``scaler/`` and ``activator/``
(``__init__`` and ``__main__`` counted); every package under them has a
docstring that says what it holds, and every module of Tidal opens with
one; no module of Tidal imports the tests. A new module belongs in the
package of its job; when no package fits, that is the moment to make one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_TOP_LEVEL_MODULES = 12


@pytest.mark.parametrize("service", ["scaler", "activator"])
def test_a_service_has_at_most_twelve_modules_at_its_top(service: str) -> None:
    modules = sorted(p.name for p in (ROOT / service).glob("*.py"))
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, (
        f"{service}/ has {len(modules)} modules at its top ({', '.join(modules)}): "
        f"at most {MAX_TOP_LEVEL_MODULES}; move one into the package of its job"
    )


@pytest.mark.parametrize("service", ["scaler", "activator"])
def test_every_package_says_what_it_holds(service: str) -> None:
    silent = [
        str(init.relative_to(ROOT))
        for init in (ROOT / service).rglob("__init__.py")
        if not ast.get_docstring(ast.parse(init.read_text()))
    ]
    assert not silent, f"packages without a docstring: {silent}"


PACKAGES = ("groundwork", "scaler", "activator", "simulator", "loadtests", "scripts")


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_every_module_opens_with_a_docstring() -> None:
    silent = [
        str(p.relative_to(ROOT))
        for p in _modules()
        if not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert not silent, f"modules without a docstring saying their job: {silent}"


def test_nothing_imports_the_tests() -> None:
    importing = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "tests" or n.startswith("tests.") for n in names):
                importing.append(str(path.relative_to(ROOT)))
    assert not importing, f"modules importing the tests: {importing}"
