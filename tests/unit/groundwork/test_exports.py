"""groundwork's public surface: every module lists its names, and they exist.

Covers: each module of the package (found by walking it, so a new one is
included) has a non-empty ``__all__`` whose every name it defines.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import groundwork

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(groundwork.__path__, prefix="groundwork.")
    if not info.ispkg
)


def test_the_walk_finds_the_modules() -> None:
    assert "groundwork.kube.reflector" in MODULES
    assert "groundwork.settings_loading" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__, name
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ lists missing {missing}"
