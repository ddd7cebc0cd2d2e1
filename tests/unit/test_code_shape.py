"""The code's shape, checked on the syntax tree: small parts, and no reaching into another's.

The rules (docs/architecture.md, "Code shape"): in ``activator/`` and
``scaler/`` no class is over 300 lines or has over 20 methods, no function
is over 100 lines, and no code reads or calls another object's ``_private``
attribute: only ``self._x`` and ``cls._x`` are one's own. A part past these
sizes is doing several jobs, and an object whose privates others touch has
no interface of its own.

``ALLOWED`` lists the parts that break a rule while they are being split (none now); each
entry is a qualified name (``module:Class``, ``module:function``, or
``module:expression`` for a private access). A fixed part must leave the
list: an entry that no longer offends fails the test too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("activator", "scaler")
MAX_CLASS_LINES = 300
MAX_METHODS = 20
MAX_FUNCTION_LINES = 100

ALLOWED: frozenset[str] = frozenset()


def _module(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _methods(node: ast.ClassDef) -> int:
    return sum(isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in node.body)


def _length(node: ast.AST) -> int:
    end = node.end_lineno
    assert end is not None
    return end - node.lineno + 1


def offences_in(path: Path, root: Path = ROOT) -> dict[str, str]:
    """Qualified name -> what is wrong, for every part of ``path`` that breaks a rule."""
    module = _module(path, root)
    found: dict[str, str] = {}

    def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            name = scope
            if isinstance(child, ast.ClassDef):
                name = (*scope, child.name)
                lines, methods = _length(child), _methods(child)
                if lines > MAX_CLASS_LINES or methods > MAX_METHODS:
                    found[f"{module}:{'.'.join(name)}"] = (
                        f"class of {lines} lines and {methods} methods"
                    )
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = (*scope, child.name)
                lines = _length(child)
                if lines > MAX_FUNCTION_LINES:
                    found[f"{module}:{'.'.join(name)}"] = f"function of {lines} lines"
            elif isinstance(child, ast.Attribute) and _is_foreign_private(child):
                found[f"{module}:{ast.unparse(child)}"] = "another object's private attribute"
            visit(child, name)

    visit(ast.parse(path.read_text(), filename=str(path)), ())
    return found


def _is_foreign_private(node: ast.Attribute) -> bool:
    attr = node.attr
    if not attr.startswith("_") or attr.startswith("__"):
        return False
    return not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))


def all_offences() -> dict[str, str]:
    found: dict[str, str] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found.update(offences_in(path))
    return found


def test_no_part_is_too_large_or_reaches_into_another() -> None:
    found = all_offences()
    new = {name: why for name, why in found.items() if name not in ALLOWED}
    assert new == {}, f"parts that break the code-shape rules: {new}"


def test_the_allowlist_names_only_parts_that_still_offend() -> None:
    stale = sorted(ALLOWED - set(all_offences()))
    assert stale == [], f"fixed: remove from ALLOWED: {stale}"


def test_the_check_finds_each_kind_of_offence(tmp_path: Path) -> None:
    # The rules, checked on a file made to break each once (a check that
    # cannot fail proves nothing).
    body = "\n".join(f"    def m{i}(self) -> None: ..." for i in range(MAX_METHODS + 1))
    long_function = "def f() -> None:\n" + "    x = 1\n" * MAX_FUNCTION_LINES
    source = f"class C:\n{body}\n\n{long_function}\n\ndef g(o: C) -> None:\n    o._hidden()\n"
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "mod.py").write_text(source)
    found = offences_in(package / "mod.py", tmp_path)
    assert set(found) == {"pkg.mod:C", "pkg.mod:f", "pkg.mod:o._hidden"}
