"""Fixtures for the control-plane unit tests: a store and a running control plane."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.nodes import DEFAULT_POOL
from loadtests.sandbox.cluster.store import Store
from tests.unit.loadtests.sandbox.cluster.controllers.support import Changes, make_plane, new_store


@pytest.fixture
def store() -> Store:
    return new_store()


@pytest.fixture
def changes(store: Store) -> Changes:
    return Changes(store)


@pytest_asyncio.fixture
async def plane(store: Store, tmp_path: Path) -> AsyncIterator[ControlPlane]:
    """The control plane over the default pool; pods are process-less unless a test says so."""
    cp = make_plane(store, tmp_path)
    cp.add_nodes(DEFAULT_POOL)
    try:
        async with cp:
            yield cp
    finally:
        cp.addresses.release()
