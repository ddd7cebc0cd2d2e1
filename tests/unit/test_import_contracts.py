"""The import contracts of docs/architecture.md, "Layout and import rules" hold and really bite.

Covers: the tree as it is passes ``lint-imports``; each kind of violation
(I/O in ``scaler.policy``, groundwork beyond its shared rules in the policy or
the balancers, I/O or other Tidal code in the shared rules, kubernetes_asyncio
outside the kube packages, the scaler importing the activator, a service
importing the simulator, the activator importing the scaler, a scaler module
other than the actuator, ``scaler.kube`` included, importing the Kubernetes
write helpers, I/O or another activator module in an activator module the
simulator runs, I/O in the EPP metrics reader, I/O in the GPU catalog,
groundwork beyond the rules and the catalog in ``scaler.policy``,
``groundwork`` importing a service, the replica side of the data path
importing the client side, the HTTP layer importing the proxy's holding or
the replica side) added to a copy of the tree makes ``lint-imports`` fail and
name the broken contract; an ignored import that matches nothing is an error;
the purity contract covers every activator module ``simulator`` imports and
names nothing it does not, so a new one cannot slip in unchecked; every
groundwork module but the shared rules and the GPU catalog (each pure under
its own contract) is forbidden to the pure packages, so a new one cannot slip
into them either; the hub, the combination and the reconcilers import no
demand source.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("groundwork", "scaler", "activator", "simulator", "loadtests")
SIM_PURITY = "the activator modules the simulator runs are pure"


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
    for package in PACKAGES:
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
            "scaler/signals/hub.py",
            "import scaler.signals.scrape\n",
            "the hub knows no source",
            id="hub-imports-a-source",
        ),
        pytest.param(
            "scaler/targets/_violation.py",
            "from scaler.signals.activator_reports import ActivatorReports\n",
            "the hub knows no source",
            id="reconciler-reaches-for-a-source",
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
        pytest.param(
            "scaler/kube/_violation.py",
            "import scaler.kube.companion_writes\n",
            "writes stay in the actuator",
            id="kube-imports-the-companion-writes",
        ),
        pytest.param(
            # Not imported by the simulator itself: the whole balancing
            # package is held pure, so a helper of a balancer is too.
            "activator/balancing/prefix_key.py",
            "import asyncio\n",
            SIM_PURITY,
            id="balancing-package-imports-asyncio",
        ),
        pytest.param(
            "activator/balancing/least_loaded.py",
            "import activator.proxy\n",
            SIM_PURITY,
            id="balancing-imports-the-proxy",
        ),
        pytest.param(
            "groundwork/fair_hold_queue.py",
            "import time\n",
            "the hold queue is pure",
            id="hold-queue-reads-a-clock",
        ),
        pytest.param(
            "groundwork/rules/priority.py",
            "import asyncio\n",
            "the shared rules are pure and a leaf",
            id="rules-import-asyncio",
        ),
        pytest.param(
            "groundwork/rules/durations.py",
            "import groundwork.settings_loading\n",
            "the shared rules are pure and a leaf",
            id="rules-import-other-groundwork",
        ),
        pytest.param(
            "groundwork/rules/stats_report.py",
            "import scaler.signals\n",
            "the shared rules are pure and a leaf",
            id="rules-import-a-service",
        ),
        pytest.param(
            "scaler/policy/_violation.py",
            "import groundwork.background_tasks\n",
            "scaler.policy is pure",
            id="policy-imports-groundwork-beyond-the-rules",
        ),
        pytest.param(
            "activator/balancing/_violation.py",
            "import groundwork.fair_hold_queue\n",
            SIM_PURITY,
            id="balancing-imports-groundwork-beyond-the-rules",
        ),
        pytest.param(
            "scaler/signals/_violation.py",
            "import simulator.engine\n",
            "the product never imports the simulator",
            id="scaler-imports-the-simulator",
        ),
        pytest.param(
            "activator/_violation.py",
            "import simulator\n",
            "the product never imports the simulator",
            id="activator-imports-the-simulator",
        ),
        pytest.param(
            "scaler/signals/epp_metrics.py",
            "import aiohttp\n",
            "the EPP metrics reader is pure",
            id="epp-metrics-reader-imports-aiohttp",
        ),
        pytest.param(
            "groundwork/gpu_catalog.py",
            "import groundwork.kube\n",
            "the GPU catalog is pure data",
            id="gpu-catalog-imports-kube",
        ),
        pytest.param(
            "groundwork/_violation.py",
            "import scaler\n",
            "groundwork imports neither service",
            id="groundwork-imports-scaler",
        ),
        pytest.param(
            "groundwork/_violation.py",
            "import kubernetes_asyncio\n",
            "only groundwork.kube, scaler.kube and activator.kube import kubernetes_asyncio",
            id="kubernetes-in-groundwork-outside-kube",
        ),
        pytest.param(
            "activator/http1/upstream.py",
            "import activator.http1.exchange\n",
            "the replica side never turns back into the HTTP layer",
            id="replica-side-imports-the-exchange",
        ),
        pytest.param(
            "activator/http1/client_connection.py",
            "import activator.holding.gate\n",
            "the HTTP layer knows nothing of what a request means",
            id="http-layer-imports-the-gate",
        ),
        pytest.param(
            "activator/http1/exchange.py",
            "import activator.http1.upstream\n",
            "the HTTP layer knows nothing of what a request means",
            id="http-layer-imports-the-replica-side",
        ),
    ],
)
def test_violation_fails_lint(tree_copy: Path, module: str, source: str, contract: str) -> None:
    path = tree_copy / module
    # Appended, so that a violation in an existing module keeps its own imports.
    path.write_text((path.read_text() if path.exists() else "") + source)
    result = _lint_imports(tree_copy)
    assert result.returncode != 0
    assert f"{contract}" in result.stdout
    assert "BROKEN" in result.stdout


def test_an_ignore_that_matches_nothing_fails_lint(tree_copy: Path) -> None:
    config = tree_copy / "pyproject.toml"
    text = config.read_text()
    ignores = '    "groundwork.kube.** -> kubernetes_asyncio",\n'
    assert ignores in text
    # The composition root loads subcommands through importlib: nothing to ignore.
    config.write_text(text.replace(ignores, ignores + '    "scaler.cli -> activator.cli",\n'))
    result = _lint_imports(tree_copy)
    assert result.returncode != 0
    assert "scaler.cli -> activator.cli" in result.stdout + result.stderr


def _contract(name_start: str) -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    found: list[dict[str, object]] = [c for c in contracts if c["name"].startswith(name_start)]
    assert len(found) == 1, name_start
    return found[0]


def test_purity_contract_names_every_activator_module_the_simulator_imports() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    imported = {
        target
        for module in graph.find_descendants("simulator") | {"simulator"}
        for target in graph.find_modules_directly_imported_by(module)
        if target.split(".")[0] == "activator"
    }
    assert imported, "the simulator runs the activator's balancing; has that changed?"
    sources = _contract(SIM_PURITY)["source_modules"]
    assert isinstance(sources, list)

    def within(module: str, source: str) -> bool:
        return module == source or module.startswith(source + ".")

    uncovered = {m for m in imported if not any(within(m, s) for s in sources)}
    assert not uncovered, f"the simulator imports {uncovered}: add them to the purity contract"
    unused = {s for s in sources if not any(within(m, s) for m in imported)}
    assert not unused, f"{unused} in the purity contract: the simulator no longer imports them"


# The groundwork modules the pure packages may import: each is pure under its own contract.
_PURE_GROUNDWORK = {
    "groundwork.rules": "the shared rules are pure and a leaf",
    "groundwork.gpu_catalog": "the GPU catalog is pure data",
}
# Per purity contract, the groundwork it may import (the shared rules are a leaf).
_MAY_IMPORT = {
    "scaler.policy is pure": set(_PURE_GROUNDWORK),
    SIM_PURITY: set(_PURE_GROUNDWORK),
    "the shared rules are pure and a leaf": {"groundwork.rules"},
}


@pytest.mark.parametrize("contract", sorted(_MAY_IMPORT))
def test_the_pure_packages_may_import_only_the_pure_groundwork(contract: str) -> None:
    groundwork = {
        f"groundwork.{path.stem}"
        for path in (ROOT / "groundwork").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    }
    forbidden = _contract(contract)["forbidden_modules"]
    assert isinstance(forbidden, list)
    unlisted = groundwork - _MAY_IMPORT[contract] - set(forbidden)
    assert not unlisted, f"{contract}: add {sorted(unlisted)} to its forbidden modules"
    assert "groundwork" not in forbidden


@pytest.mark.parametrize("module", sorted(_PURE_GROUNDWORK))
def test_the_groundwork_the_pure_packages_import_is_itself_pure(module: str) -> None:
    own = _contract(_PURE_GROUNDWORK[module])
    assert own["source_modules"] == [module]
    forbidden = own["forbidden_modules"]
    assert isinstance(forbidden, list)
    assert {"asyncio", "aiohttp", "socket", "time", "groundwork.kube"} <= set(forbidden)
