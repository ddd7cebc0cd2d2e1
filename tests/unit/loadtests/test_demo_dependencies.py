"""``tidal demo`` runs on what ``make demo`` installs: the base dependencies and the sandbox extra.

Covers: every module of ``loadtests.demo`` and ``loadtests.sandbox`` (every
story, the emulated cluster, the fake servers) and the ``tidal`` command
import in a fresh interpreter where every package that only another extra
(``dev``, ``loadtest``) brings in is absent. Which packages those are is
worked out from ``pyproject.toml`` and the installed packages' own
requirements, not listed here, so a dependency added to an extra is covered
the day it is added.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_PROBE = r"""
import importlib, importlib.metadata as md, pkgutil, re, sys, tomllib

def name(req):
    return re.split(r"[ <>=!~;\[]", req, maxsplit=1)[0].strip().lower().replace("_", "-")

def closure(names):
    seen, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        try:
            requires = md.distribution(n).requires or []
        except md.PackageNotFoundError:
            continue
        todo += [name(r) for r in requires if "extra ==" not in r]
    return seen

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
demo = closure(name(r) for r in project["dependencies"] + extras["sandbox"])
others = closure(name(r) for k, v in extras.items() if k != "sandbox" for r in v)
absent = {
    module
    for module, dists in md.packages_distributions().items()
    if any(d.lower().replace("_", "-") in others - demo for d in dists)
}

class Absent:
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in absent:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None

sys.meta_path.insert(0, Absent())
import loadtests.demo, loadtests.sandbox, scaler.cli
failed = []
for package in (loadtests.demo, loadtests.sandbox):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            importlib.import_module(info.name)
        except ImportError as exc:
            failed.append(f"{info.name}: {exc}")
print("\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_the_demo_imports_nothing_that_make_demo_does_not_install() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
