"""The policy package's public surface: what the controller codes against.

Covers: every name in each module's ``__all__`` exists (every module of the
package, found by walking it); the package
re-exports each module's public names that the controller needs; the
contract types in ``api`` keep the names the I/O side uses; nothing in the
package imports an I/O library (a cheap runtime echo of the import-linter
contract).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import pytest

import scaler.policy

# Every module of the package, its subpackages' too: one that declares
# ``__all__`` must keep it true.
MODULES = sorted(
    info.name.removeprefix("scaler.policy.")
    for info in pkgutil.walk_packages(scaler.policy.__path__, "scaler.policy.")
)


@pytest.mark.parametrize("module", MODULES)
def test_all_names_exist(module: str) -> None:
    mod = importlib.import_module(f"scaler.policy.{module}")
    for name in getattr(mod, "__all__", ()):
        assert hasattr(mod, name), f"{module}.__all__ lists missing {name}"


def test_package_reexports() -> None:
    for name in scaler.policy.__all__:
        assert hasattr(scaler.policy, name)
    needed = {
        "decide",
        "PolicyState",
        "SignalWindows",
        "parse_scaling_config",
        "InvalidAnnotation",
        "split",
        "Split",
        "Decision",
        "Observation",
        "Demand",
        "SignalReading",
        "SignalKind",
        "ScalingConfig",
        "PlacementConfig",
        "Reason",
        "Mode",
    }
    assert needed <= set(scaler.policy.__all__)


def test_no_io_modules_loaded_by_the_policy() -> None:
    for name in list(sys.modules):
        if name.startswith("scaler.policy"):
            module = sys.modules[name]
            for banned in ("asyncio", "aiohttp", "kubernetes_asyncio", "prometheus_client"):
                assert banned not in vars(module), f"{name} imports {banned}"
