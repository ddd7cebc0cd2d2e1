"""The fake vLLM on a GPU shape serves at that shape's speed, over real HTTP.

Covers: built from ``tidal sandbox model-server`` flags, a server on an
H100 3g.40gb slice and one on an L4 take, in model time (the GPU busy time
``/sandbox/gpu`` reports, not wall-clock), 1/compute as long as the
reference for a prefill-bound request and 1/bandwidth as long for a
decode-bound one, and report the device they run on; without
``--gpu-shape`` the server is the reference, as before.
"""

from __future__ import annotations

import argparse
from typing import Any

import aiohttp
import pytest

from groundwork.gpu_catalog import device
from loadtests.sandbox.servers.cli import config_from_args, configure
from loadtests.sandbox.servers.server import ModelServer

SPEEDUP = 200.0
PREFILL = {"prompt": "x" * 24_000, "max_tokens": 1, "ignore_eos": True}  # 6,000 tokens
DECODE = {"prompt": "hi", "max_tokens": 300, "ignore_eos": True}


def flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(["--port", "0", "--speedup", str(SPEEDUP), "--seed", "1", *argv])


async def busy_after(url: str, session: aiohttp.ClientSession, body: dict[str, Any]) -> float:
    """Model seconds the GPU was busy serving ``body`` alone."""

    async def busy() -> float:
        async with session.get(f"{url}/sandbox/gpu") as resp:
            return float((await resp.json())["busy_s"])

    before = await busy()
    async with session.post(f"{url}/v1/completions", json=body) as resp:
        assert resp.status == 200, await resp.text()
        await resp.read()
    return await busy() - before


async def served(*argv: str) -> tuple[float, float, Any, Any]:
    """Busy seconds of the prefill and decode requests, the device reported, the config."""
    config = config_from_args(flags(*argv))
    async with ModelServer(config) as server, aiohttp.ClientSession() as session:
        prefill = await busy_after(server.url, session, PREFILL)
        decode = await busy_after(server.url, session, DECODE)
        async with session.get(f"{server.url}/sandbox/gpu") as resp:
            reported = (await resp.json()).get("device")
    return prefill, decode, reported, config


@pytest.mark.parametrize("shape", ["NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "NVIDIA-L4"])
async def test_a_shape_serves_at_its_speed(shape: str) -> None:
    ref_prefill, ref_decode, ref_device, ref = await served()
    prefill, decode, reported, there = await served("--gpu-shape", shape, "--max-model-len", "8192")
    assert (ref_device, reported) == (None, shape)
    dev = device(shape)
    # Prefill-bound: one step of base (bandwidth) plus the prompt (compute).
    ref_prompt = ref_prefill - ref.llm.step_base_s
    dev_prompt = prefill - there.llm.step_base_s
    assert ref_prompt / dev_prompt == pytest.approx(dev.compute_ratio, rel=0.01)
    # Decode-bound: 300 steps whose time is all bandwidth.
    assert ref_decode / decode == pytest.approx(dev.bandwidth_ratio, rel=0.01)
