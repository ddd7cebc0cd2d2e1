"""The ``tidal activator`` process, end to end, with load from another process.

Covers:
- 2,000 concurrent requests held through a cold start (``max_buffered``
  raised to fit, load from a separate client process) are all answered 200
  once the replica starts listening, and the scaler was told (slow);
- ``--workers 2``: both workers serve one port, ``/metrics`` on the admin
  port sums them, and SIGTERM drains and exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.integration.activator.helpers import Backend, FakeScaler, free_port, wait_until

LOAD_CLIENT = Path(__file__).with_name("load_client.py")


@contextlib.asynccontextmanager
async def activator_process(
    routes: Path, scaler: FakeScaler, *extra: str
) -> AsyncIterator[tuple[int, int]]:
    port, admin = free_port(), free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scaler.cli", "activator",
        "--routes", str(routes), "--host", "127.0.0.1", "--port", str(port),
        "--admin-host", "127.0.0.1", "--admin-port", str(admin),
        "--scaler-url", scaler.url, "--scaler-token", "t0k",
        "--probe-interval-s", "0.05", "--log-level", "WARNING", *extra,
        stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(400):
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"http://127.0.0.1:{admin}/readyz") as resp:
                        if resp.status == 200:
                            break
                await asyncio.sleep(0.05)
            else:
                pytest.fail("the activator did not become ready")
        yield port, admin
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def metric(session: aiohttp.ClientSession, admin: int, name: str) -> float:
    async with session.get(f"http://127.0.0.1:{admin}/metrics") as resp:
        text = await resp.text()
    total = 0.0
    for match in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M):
        total += float(match.group(1))
    return total


@pytest.mark.slow
@pytest.mark.e2e
async def test_2000_held_requests_through_cold_start(tmp_path: Path) -> None:
    scaler = await FakeScaler().start()
    backend_port = free_port()
    routes = tmp_path / "routes.yaml"
    routes.write_text(
        "targets:\n  - name: default/llama\n    path_prefix: /\n"
        f'    endpoints: ["127.0.0.1:{backend_port}"]\n    max_buffered: 2500\n'
    )
    backend = Backend(name="late")
    client = None
    try:
        async with activator_process(routes, scaler) as (port, admin):
            client = await asyncio.create_subprocess_exec(
                sys.executable, str(LOAD_CLIENT), f"http://127.0.0.1:{port}/v1/completions",
                "2000", "90", stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            async with aiohttp.ClientSession() as session:
                for _ in range(1200):
                    held = await metric(session, admin, "tidal_activator_requests_buffered")
                    if held >= 2000:
                        break
                    await asyncio.sleep(0.05)
            assert held == 2000
            # Told at the first held request; the call may still be on its way
            # while the activator accepts 2,000 connections.
            with contextlib.suppress(TimeoutError):
                await wait_until(lambda: bool(scaler.activations), timeout_s=10)
            assert scaler.activations, "the scaler was not told"
            await backend.start(backend_port)
            out, _ = await asyncio.wait_for(client.communicate(), 90)
            result = json.loads(out)
        assert result["statuses"] == {"200": 2000}, result
        assert result["errors"] == 0
        assert len(backend.received) == 2000
    finally:
        if client is not None and client.returncode is None:
            client.kill()
            await client.wait()
        await backend.stop()
        await scaler.stop()


@pytest.mark.e2e
async def test_workers_share_port_and_metrics(tmp_path: Path) -> None:
    scaler = await FakeScaler().start()
    backend = await Backend().start()
    routes = tmp_path / "routes.yaml"
    routes.write_text(
        "targets:\n  - name: default/llama\n    path_prefix: /\n"
        f'    endpoints: ["{backend.endpoint}"]\n'
    )
    try:
        async with activator_process(routes, scaler, "--workers", "2") as (port, admin):
            # Separate connections so the kernel can spread them over workers.
            for _ in range(40):
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(f"http://127.0.0.1:{port}/x") as resp,
                ):
                    assert resp.status == 200
            async with aiohttp.ClientSession() as session:
                total = await metric(session, admin, "tidal_activator_requests_total")
            assert total == 40
            await asyncio.sleep(1.5)
            reporters = {body["activator"] for _, body, _ in scaler.stats}
            assert len(reporters) == 2, reporters  # each worker reports on its own
    finally:
        await backend.stop()
        await scaler.stop()
