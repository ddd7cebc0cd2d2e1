"""The scaler's Kubernetes access against the sandbox's API server: its cluster, and the
user's Deployment the companion tests start from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from loadtests.sandbox.cluster.cluster import SandboxCluster


@pytest_asyncio.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[SandboxCluster]:
    sandbox = SandboxCluster(tmp_path / "sandbox")
    try:
        await sandbox.start()
        yield sandbox
    finally:
        await sandbox.stop()
