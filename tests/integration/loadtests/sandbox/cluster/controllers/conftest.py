"""Fixtures for the control-plane integration tests: real pod processes on loopback."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from loadtests.sandbox.cluster.addresses import lock_dir
from loadtests.sandbox.cluster.controllers.kubelet import KubeletSettings
from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.nodes import DEFAULT_POOL
from loadtests.sandbox.cluster.simple_launcher import SimpleLauncher
from loadtests.sandbox.cluster.store import Store
from loadtests.sandbox.servers.spec import ServerSpec
from tests.unit.loadtests.sandbox.cluster.controllers.support import Changes, make_plane, new_store

TINY = Path(__file__).with_name("tiny_server.py")
FAST = KubeletSettings(backoff_base_s=0.2, backoff_cap_s=0.8, tcp_probe_period_s=0.05)


def tiny_command(spec: ServerSpec) -> list[str]:
    return [
        sys.executable,
        str(TINY),
        "--host",
        spec.host,
        "--port",
        str(spec.port),
        "--startup-delay",
        str(spec.startup_delay_s),
        *spec.extra_args,
    ]


@pytest.fixture
def store() -> Store:
    return new_store()


@pytest.fixture
def changes(store: Store) -> Changes:
    return Changes(store)


@pytest_asyncio.fixture
async def plane(store: Store) -> AsyncIterator[ControlPlane]:
    launcher = SimpleLauncher(tiny_command)
    cp = make_plane(store, lock_dir(), launcher=launcher, settings=FAST)
    cp.add_nodes(DEFAULT_POOL)
    try:
        async with cp:
            yield cp
    finally:
        await launcher.close()
        cp.addresses.release()
