"""Sleep levels and the node's host memory, two fake vLLMs sharing one node, over real HTTP.

Covers: a level-1 sleep takes the weights' size from the node's host
memory (``/sandbox/gpu`` shows ``host_mib`` and ``sleep_level``, the
metric ``vllm:engine_sleep_state`` says ``weights_offloaded``); a second
level-1 sleep that does not fit is refused with a 500 naming the node's
memory, and that server stays awake and serving; a level-2 sleep takes no
host memory (``discard_all``); waking the weights gives the room back, so
the second server, woken and reloaded, then sleeps at level 1. (The wakes' timings are
``simulator.engine.sleep_timing``'s, tested there.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadtests.sandbox.servers.server import ModelServer
from loadtests.sandbox.servers.sleep_mode import SleepParams
from tests.integration.loadtests.sandbox.servers.conftest import scrape, vllm_config

SPEEDUP = 20.0
WEIGHTS_MIB = 16_384
PARAMS = SleepParams(weights_mib=WEIGHTS_MIB, kv_cache_mib=8_192, residual_mib=512)
BODY = {"prompt": "hi", "max_tokens": 1}


async def call(session: aiohttp.ClientSession, method: str, url: str) -> tuple[int, str]:
    """One call; the body is a one-token completion, or the reload for collective_rpc."""
    body = {"method": "reload_weights"} if url.endswith("collective_rpc") else BODY
    async with session.request(method, url, json=body) as resp:
        return resp.status, await resp.text()


async def state(session: aiohttp.ClientSession, url: str) -> tuple[int, int, str]:
    """(sleep_level, host_mib, the state vllm:engine_sleep_state marks)."""
    async with session.get(f"{url}/sandbox/gpu") as resp:
        body: dict[str, Any] = await resp.json()
    samples = await scrape(session, url)
    marked = [
        s
        for s in ("awake", "weights_offloaded", "discard_all")
        if samples[f'vllm:engine_sleep_state{{model_name="m",sleep_state="{s}"}}'] == 1.0
    ]
    assert len(marked) == 1
    return int(body["sleep_level"]), int(body["host_mib"]), marked[0]


async def test_level_one_takes_host_memory_and_level_two_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")
    # Room on the node for one model's weights in host memory, not two.
    config = vllm_config(
        speedup=SPEEDUP,
        enable_sleep_mode=True,
        sleep=PARAMS,
        host_ledger_dir=str(tmp_path / "host"),
        host_memory_mib=WEIGHTS_MIB + 4_096,
    )
    async with (
        ModelServer(config) as a,
        ModelServer(config) as b,
        aiohttp.ClientSession() as session,
    ):
        assert await state(session, a.url) == (0, 0, "awake")
        assert (await call(session, "POST", f"{a.url}/sleep?level=1"))[0] == 200
        assert await state(session, a.url) == (1, WEIGHTS_MIB, "weights_offloaded")

        status, text = await call(session, "POST", f"{b.url}/sleep?level=1")
        assert status == 500
        assert "pinned allocation of 16384 MiB failed; 16384 MiB of the node's 20480 MiB" in text
        assert await state(session, b.url) == (0, 0, "awake")
        assert (await call(session, "POST", f"{b.url}/v1/completions"))[0] == 200

        assert (await call(session, "POST", f"{b.url}/sleep?level=2"))[0] == 200
        assert await state(session, b.url) == (2, 0, "discard_all")

        assert (await call(session, "POST", f"{a.url}/wake_up"))[0] == 200
        assert await state(session, a.url) == (0, 0, "awake")
        assert (await call(session, "POST", f"{a.url}/v1/completions"))[0] == 200

        # The room a's weights held is free again: b, back from level 2, fits at level 1.
        assert (await call(session, "POST", f"{b.url}/wake_up"))[0] == 200
        assert (await call(session, "POST", f"{b.url}/collective_rpc"))[0] == 200
        assert (await call(session, "POST", f"{b.url}/sleep?level=1"))[0] == 200
        assert await state(session, b.url) == (1, WEIGHTS_MIB, "weights_offloaded")
