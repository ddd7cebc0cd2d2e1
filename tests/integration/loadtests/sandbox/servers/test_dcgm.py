"""The DCGM-like exporter.

Covers:
- GPU utilization reads near 100% while a server has work (even one small
  request: busy whenever anything runs, as real GPUs read) and 0 when idle;
- the labels are gpu, UUID, pod, namespace, container;
- a server that goes away drops out of /metrics instead of reading 0;
- a bad interval is refused.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from loadtests.sandbox.servers.dcgm import DcgmExporter, GpuTarget
from loadtests.sandbox.servers.server import ModelServer
from tests.integration.loadtests.sandbox.servers.conftest import scrape, vllm_config


async def test_utilization_follows_busy_time_and_drops_gone_servers() -> None:
    async with (
        ModelServer(vllm_config(speedup=1.0)) as busy,
        ModelServer(vllm_config(speedup=1.0)) as idle,
        DcgmExporter(port=0, interval_s=3600) as exporter,  # polled by hand below
        aiohttp.ClientSession() as session,
    ):
        exporter.add(GpuTarget(url=busy.url, pod="busy-0", namespace="ml", uuid="GPU-a"))
        exporter.add(GpuTarget(url=idle.url, pod="idle-0", namespace="ml", uuid="GPU-b", gpu=1))
        body = {"prompt": "x", "max_tokens": 100_000, "ignore_eos": True, "stream": True}

        async def generate() -> None:
            async with session.post(f"{busy.url}/v1/completions", json=body) as resp:
                await resp.read()

        request = asyncio.create_task(generate())
        try:
            await exporter.poll_once()  # baseline
            await asyncio.sleep(0.3)
            await exporter.poll_once()
            samples = await scrape(session, exporter.url)
        finally:
            request.cancel()
            await asyncio.gather(request, return_exceptions=True)
        busy_key = (
            'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-a",container="model",gpu="0",'
            'namespace="ml",pod="busy-0"}'
        )
        idle_key = (
            'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-b",container="model",gpu="1",'
            'namespace="ml",pod="idle-0"}'
        )
        # Busy all the 0.3 s but for the request's start, which a loaded machine
        # delays (79 % seen at a load average of 8 on two cores): well above idle.
        assert samples[busy_key] >= 50
        assert samples[idle_key] == 0
        active = busy_key.replace("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
        assert 0.5 <= samples[active] <= 1.0
        await idle.stop()
        await exporter.poll_once()
        samples = await scrape(session, exporter.url)
        assert idle_key not in samples
        assert busy_key in samples


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        DcgmExporter(interval_s=0)
