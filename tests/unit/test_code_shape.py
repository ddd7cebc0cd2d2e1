"""The code's shape, checked on the syntax tree: small parts, and no reaching into another's.

The rules (docs/architecture.md, "Code shape"), over every package with code
in it (``activator/``, ``scaler/``, ``groundwork/``, ``simulator/``,
``loadtests/``, ``scripts/``):

- no module is over 600 lines, no class over 300 lines or 20 methods, no
  function over 100 lines;
- a module-level function whose first parameter is annotated as an instance
  of one of our classes counts as that class's method, wherever it is
  written: its lines and its count go to the class. Moving a method out of
  its class to pass the limit leaves the class doing the same jobs, only
  harder to find. Values and interfaces are the exceptions: a function of a
  frozen dataclass, a named tuple, an enum or a settings model cannot write
  it, so it does no owner's job (``decide(config, ...)`` is a function, not
  a method of the config); and a function of a ``Protocol`` is its client,
  for an interface has no body a method could have been moved out of;
- no code reads or calls another object's ``_private`` attribute: only
  ``self._x`` and ``cls._x`` are one's own (``os._exit``, the standard
  library's documented exit for a forked child, is public despite its name).

A part past these sizes is doing several jobs, and an object whose privates
others touch has no interface of its own.

``ALLOWED`` lists the parts that break a rule while another branch is
rewriting them (they are divided once it has merged); each entry is a
qualified name (``module`` for a module, ``module:Class``,
``module:function``, or ``module:expression`` for a private access). A
fixed part must leave the list: an entry that no longer
offends fails the test too.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("activator", "scaler", "groundwork", "simulator", "loadtests", "scripts")
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 300
MAX_METHODS = 20
MAX_FUNCTION_LINES = 100
# Bases that make a class a value or an interface (see the module docstring).
VALUE_BASES = frozenset(
    {
        "typing:NamedTuple",
        "typing:Protocol",
        "typing_extensions:Protocol",
        "enum:Enum",
        "enum:StrEnum",
        "enum:IntEnum",
        "enum:Flag",
        "enum:IntFlag",
        "pydantic:BaseModel",
        "pydantic_settings:BaseSettings",
    }
)
# Names with a leading underscore that their library documents as public.
PUBLIC_UNDERSCORED = frozenset({"os._exit"})

ALLOWED: frozenset[str] = frozenset()


@dataclass
class _Module:
    """One parsed module: its tree, and what its names stand for."""

    name: str
    tree: ast.Module
    lines: int
    # local name -> qualified name ("module:Class") of a class it may stand for
    imported: dict[str, str] = field(default_factory=dict)
    # local alias -> module it names ("import a.b as m")
    modules: dict[str, str] = field(default_factory=dict)


def _module_name(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _length(node: ast.stmt) -> int:
    end = node.end_lineno
    assert end is not None
    return end - node.lineno + 1


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def _parse(path: Path, root: Path) -> _Module:
    text = path.read_text()
    name = _module_name(path, root)
    parsed = _Module(name, ast.parse(text, filename=str(path)), len(text.splitlines()))
    is_package = path.name == "__init__.py"
    for node in ast.walk(parsed.tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(name, is_package, node.level, node.module)
            for alias in node.names:
                parsed.imported[alias.asname or alias.name] = f"{source}:{alias.name}"
                parsed.modules[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    parsed.modules[alias.asname] = alias.name
                else:
                    parsed.modules[alias.name.split(".")[0]] = alias.name.split(".")[0]
    return parsed


def _methods(node: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [i for i in node.body if isinstance(i, ast.FunctionDef | ast.AsyncFunctionDef)]


class _Tree:
    """Every module of the checked packages, and the classes they define."""

    def __init__(self, root: Path, packages: tuple[str, ...]) -> None:
        self.modules = {
            module.name: module
            for package in packages
            for path in sorted((root / package).rglob("*.py"))
            for module in [_parse(path, root)]
        }
        self.classes = {
            f"{module.name}:{node.name}": node
            for module in self.modules.values()
            for node in module.tree.body
            if isinstance(node, ast.ClassDef)
        }

    def resolve(self, qualified: str, hops: int = 5) -> str | None:
        """The class ``qualified`` (``module:Name``) stands for, following re-exports."""
        if qualified in self.classes:
            return qualified
        module, _, name = qualified.partition(":")
        found = self.modules.get(module)
        if hops == 0 or found is None or name not in found.imported:
            return None
        return self.resolve(found.imported[name], hops - 1)

    def is_value(self, qualified: str, hops: int = 5) -> bool:
        """Whether the class ``qualified`` is a value or an interface (see the module docstring)."""
        node = self.classes[qualified]
        if any(_is_frozen_dataclass(decorator) for decorator in node.decorator_list):
            return True
        module = self.modules[qualified.partition(":")[0]]
        for base in node.bases:
            if isinstance(base, ast.Subscript):  # Protocol[T], Generic[T]
                base = base.value
            ours = self.class_of(module, base)
            if ours is not None and hops and self.is_value(ours, hops - 1):
                return True
            if ours is None and _external_name(module, base) in VALUE_BASES:
                return True
        return False

    def class_of(self, module: _Module, annotation: ast.expr | None) -> str | None:
        """The class of ours an annotation names as a plain instance, if any."""
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(annotation, ast.Name):
            local = f"{module.name}:{annotation.id}"
            if local in self.classes:
                return local
            imported = module.imported.get(annotation.id)
            return self.resolve(imported) if imported else None
        if isinstance(annotation, ast.Attribute) and isinstance(annotation.value, ast.Name):
            named = module.modules.get(annotation.value.id)
            return self.resolve(f"{named}:{annotation.attr}") if named else None
        return None

    def functions_taking(self) -> dict[str, list[tuple[str, int]]]:
        """Class -> the module-level functions that take it first, as (name, lines)."""
        taking: dict[str, list[tuple[str, int]]] = {}
        for module in self.modules.values():
            for node in module.tree.body:
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                arguments = [*node.args.posonlyargs, *node.args.args]
                if not arguments:
                    continue
                owner = self.class_of(module, arguments[0].annotation)
                if owner is not None and not self.is_value(owner):
                    name = f"{module.name}:{node.name}"
                    taking.setdefault(owner, []).append((name, _length(node)))
        return taking


def offences(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Qualified name -> what is wrong, for every part of ``packages`` that breaks a rule."""
    tree = _Tree(root, packages)
    taking = tree.functions_taking()
    found: dict[str, str] = {}

    def visit(module: _Module, node: ast.AST, scope: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            name = scope
            if isinstance(child, ast.ClassDef):
                name = (*scope, child.name)
                qualified = f"{module.name}:{'.'.join(name)}"
                outside = taking.get(qualified, []) if not scope else []
                lines = _length(child) + sum(length for _, length in outside)
                methods = len(_methods(child)) + len(outside)
                if lines > MAX_CLASS_LINES or methods > MAX_METHODS:
                    why = f"class of {lines} lines and {methods} methods"
                    if outside:
                        names = ", ".join(function for function, _ in outside)
                        why += f" (counting the functions that take it first: {names})"
                    found[qualified] = why
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = (*scope, child.name)
                lines = _length(child)
                if lines > MAX_FUNCTION_LINES:
                    found[f"{module.name}:{'.'.join(name)}"] = f"function of {lines} lines"
            elif isinstance(child, ast.Attribute) and _is_foreign_private(child):
                found[f"{module.name}:{ast.unparse(child)}"] = "another object's private attribute"
            visit(module, child, name)

    for module in tree.modules.values():
        if module.lines > MAX_MODULE_LINES:
            found[module.name] = f"module of {module.lines} lines"
        visit(module, module.tree, ())
    return found


def _external_name(module: _Module, base: ast.expr) -> str | None:
    """``library:Name`` for a base named from outside (``typing:Protocol``), else None."""
    if isinstance(base, ast.Name):
        return module.imported.get(base.id)
    if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
        named = module.modules.get(base.value.id)
        return f"{named}:{base.attr}" if named else None
    return None


def _is_frozen_dataclass(decorator: ast.expr) -> bool:
    return (
        isinstance(decorator, ast.Call)
        and ast.unparse(decorator.func).split(".")[-1] == "dataclass"
        and any(
            k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in decorator.keywords
        )
    )


def _is_foreign_private(node: ast.Attribute) -> bool:
    attr = node.attr
    if not attr.startswith("_") or attr.startswith("__"):
        return False
    if ast.unparse(node) in PUBLIC_UNDERSCORED:
        return False
    return not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))


@functools.cache
def _repository_offences() -> dict[str, str]:
    return offences()


def test_no_part_is_too_large_or_reaches_into_another() -> None:
    found = _repository_offences()
    new = {name: why for name, why in found.items() if name not in ALLOWED}
    assert new == {}, f"parts that break the code-shape rules: {new}"


def test_the_allowlist_names_only_parts_that_still_offend() -> None:
    stale = sorted(ALLOWED - set(_repository_offences()))
    assert stale == [], f"fixed: remove from ALLOWED: {stale}"


def _methods_source(count: int, name: str = "C") -> str:
    body = "\n".join(f"    def m{i}(self) -> None: ..." for i in range(count))
    return f"class {name}:\n{body}\n"


def _lines(count: int) -> str:
    return "    x = 1\n" * count


# Each row: the files of a small package, and the one offence the check must
# name in it (None: nothing offends). A check that cannot fail proves nothing.
SHAPES: list[tuple[str, dict[str, str], str | None]] = [
    ("a class with too many methods", {"mod.py": _methods_source(MAX_METHODS + 1)}, "pkg.mod:C"),
    ("a class at the method limit", {"mod.py": _methods_source(MAX_METHODS)}, None),
    (
        "a class too long",
        {"mod.py": f"class C:\n{_lines(MAX_CLASS_LINES)}"},
        "pkg.mod:C",
    ),
    (
        "a function too long",
        {"mod.py": f"def f() -> None:\n{_lines(MAX_FUNCTION_LINES)}"},
        "pkg.mod:f",
    ),
    (
        "a function at the limit",
        {"mod.py": f"def f() -> None:\n{_lines(MAX_FUNCTION_LINES - 1)}"},
        None,
    ),
    (
        "a module too long",
        {"mod.py": "x = 1\n" * (MAX_MODULE_LINES + 1)},
        "pkg.mod",
    ),
    ("a module at the limit", {"mod.py": "x = 1\n" * MAX_MODULE_LINES}, None),
    (
        "another object's private attribute",
        {"mod.py": "def g(o: object) -> None:\n    o._hidden()\n"},
        "pkg.mod:o._hidden",
    ),
    (
        "one's own private attribute",
        {"mod.py": "class C:\n    def m(self) -> None:\n        self._x = 1\n"},
        None,
    ),
    (
        "a method moved to module level beside its class",
        {"mod.py": _methods_source(MAX_METHODS) + "\n\ndef moved(c: C) -> None:\n    c.m0()\n"},
        "pkg.mod:C",
    ),
    (
        "a method moved to another module, the class named as a string",
        {
            "mod.py": _methods_source(MAX_METHODS),
            "helpers.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from pkg.mod import C\n\n"
                "def moved(c: 'C', n: int) -> None:\n    c.m0()\n"
            ),
        },
        "pkg.mod:C",
    ),
    (
        "a method moved to another module, the class reached through a package",
        {
            "__init__.py": "from .mod import C\n",
            "mod.py": _methods_source(MAX_METHODS),
            "helpers.py": "from . import mod\n\ndef moved(c: mod.C) -> None:\n    c.m0()\n",
        },
        "pkg.mod:C",
    ),
    (
        "moved functions whose lines put the class over its length",
        {
            "mod.py": f"class C:\n{_lines(MAX_CLASS_LINES - 5)}",
            "helpers.py": (f"from pkg.mod import C\n\ndef moved(c: C) -> None:\n{_lines(10)}"),
        },
        "pkg.mod:C",
    ),
    (
        "functions of a value are no methods",
        {
            "mod.py": "from dataclasses import dataclass\n\n@dataclass(frozen=True)\n"
            + _methods_source(MAX_METHODS)
            + "\n\ndef f(c: C) -> None: ...\n"
        },
        None,
    ),
    (
        "functions of a mutable dataclass are its methods",
        {
            "mod.py": "from dataclasses import dataclass\n\n@dataclass\n"
            + _methods_source(MAX_METHODS)
            + "\n\ndef f(c: C) -> None: ...\n"
        },
        "pkg.mod:C",
    ),
    (
        "functions of a settings model, through a base of ours, are no methods",
        {
            "base.py": "from pydantic_settings import BaseSettings\n\nclass S(BaseSettings): ...\n",
            "mod.py": "from pkg.base import S\n\n"
            + _methods_source(MAX_METHODS).replace("class C:", "class C(S):")
            + "\n\ndef f(c: C) -> None: ...\n",
        },
        None,
    ),
    (
        "functions of an interface are its clients",
        {
            "mod.py": "from typing import Protocol\n\n"
            + _methods_source(MAX_METHODS).replace("class C:", "class C(Protocol):")
            + "\n\ndef f(c: C) -> None: ...\n"
        },
        None,
    ),
    (
        "an asyncio.Protocol is no interface",
        {
            "mod.py": "import asyncio\n\n"
            + _methods_source(MAX_METHODS).replace("class C:", "class C(asyncio.Protocol):")
            + "\n\ndef f(c: C) -> None: ...\n"
        },
        "pkg.mod:C",
    ),
    ("os._exit is public", {"mod.py": "import os\n\nos._exit(0)\n"}, None),
    (
        "a function taking one of ours second, or not ours, is no method",
        {
            "mod.py": _methods_source(MAX_METHODS)
            + "\n\ndef f(n: int, c: C) -> None: ...\n\ndef g(p: 'list[C]') -> None: ...\n"
        },
        None,
    ),
]


@pytest.mark.parametrize(
    ("files", "offender"), [(f, o) for _, f, o in SHAPES], ids=[s[0] for s in SHAPES]
)
def test_the_check_finds_each_kind_of_offence(
    tmp_path: Path, files: dict[str, str], offender: str | None
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    for name, source in files.items():
        (package / name).write_text(source)
    found = offences(tmp_path, ("pkg",))
    assert set(found) == ({offender} if offender else set()), found
