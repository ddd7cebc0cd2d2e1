"""The import contracts of DESIGN §1 hold and really bite.

Covers: the tree as it is passes ``lint-imports``; each kind of violation
(I/O in ``scaler.policy``, kubernetes_asyncio outside the kube packages, the
scaler importing the activator, the activator importing the scaler, a scaler
module other than the actuator importing the Kubernetes write helpers) added to a
copy of the tree makes ``lint-imports`` fail and name the broken contract.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    for package in ("groundwork", "scaler", "activator", "loadtests"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_tree_as_is_keeps_contracts(tree_copy: Path) -> None:
    result = _lint_imports(tree_copy)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        pytest.param(
            "scaler/policy/_violation.py",
            "import aiohttp\n",
            "scaler.policy is pure",
            id="policy-imports-aiohttp",
        ),
        pytest.param(
            "scaler/policy/_violation.py",
            "import asyncio\n",
            "scaler.policy is pure",
            id="policy-imports-asyncio",
        ),
        pytest.param(
            "scaler/policy/_violation.py",
            "import scaler.signals\n",
            "scaler.policy is pure",
            id="policy-imports-other-tidal-code",
        ),
        pytest.param(
            "scaler/signals/_violation.py",
            "import kubernetes_asyncio\n",
            "only groundwork.kube, scaler.kube and activator.kube import kubernetes_asyncio",
            id="kubernetes-outside-kube",
        ),
        pytest.param(
            "scaler/_violation.py",
            "import activator\n",
            "the scaler does not import the activator",
            id="scaler-imports-activator",
        ),
        pytest.param(
            "activator/_violation.py",
            "import scaler\n",
            "the activator does not import the scaler",
            id="activator-imports-scaler",
        ),
        pytest.param(
            "scaler/_violation.py",
            "from scaler.kube.writer import KubeScaleTarget\n",
            "writes stay in the actuator",
            id="scaler-writes-outside-actuator",
        ),
        pytest.param(
            "scaler/signals/_violation.py",
            "import scaler.kube.writer\n",
            "writes stay in the actuator",
            id="signals-import-the-writer",
        ),
    ],
)
def test_violation_fails_lint(tree_copy: Path, module: str, source: str, contract: str) -> None:
    (tree_copy / module).write_text(source)
    result = _lint_imports(tree_copy)
    assert result.returncode != 0
    assert f"{contract}" in result.stdout
    assert "BROKEN" in result.stdout
