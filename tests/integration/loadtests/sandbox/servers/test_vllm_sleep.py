"""The fake vLLM's sleep mode, over real HTTP.

Covers:
- the dev endpoints exist only with --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1;
- a level-1 sleep frees the GPU memory, answers inference with 503, and a
  wake takes the modelled time; the first request after it pays the penalty once;
- a level-2 wake follows vLLM's sequence (weights, reload_weights, kv_cache)
  and serving before the reload is refused;
- a busy server refuses to sleep;
- two servers on one GPU ledger: a wake that does not fit fails, and fits
  once the other sleeps; the DCGM-like exporter reports framebuffer used.
"""

from __future__ import annotations

import time
from pathlib import Path

import aiohttp
import pytest

from loadtests.sandbox.servers.dcgm import DcgmExporter, GpuTarget
from loadtests.sandbox.servers.server import ModelServer, ServerConfig
from loadtests.sandbox.servers.sleep_mode import SleepParams
from tests.integration.loadtests.sandbox.servers.conftest import scrape, vllm_config

SPEEDUP = 10.0
PARAMS = SleepParams(
    weights_mib=16_384, kv_cache_mib=8_192, residual_mib=512, gpu_memory_mib=40_960,
    first_request_penalty_s=3.0,
)  # fmt: skip
BODY = {"prompt": "hello", "max_tokens": 1, "ignore_eos": True}


def _config(**kw: object) -> ServerConfig:
    return vllm_config(speedup=SPEEDUP, enable_sleep_mode=True, sleep=PARAMS, **kw)


async def _post(session: aiohttp.ClientSession, url: str) -> tuple[int, float]:
    start = time.monotonic()
    async with session.post(url, json={"method": "reload_weights"}) as resp:
        await resp.read()
        return resp.status, time.monotonic() - start


async def _complete(
    session: aiohttp.ClientSession, url: str, max_tokens: int = 1
) -> tuple[int, float]:
    start = time.monotonic()
    body = {**BODY, "max_tokens": max_tokens}
    async with session.post(f"{url}/v1/completions", json=body) as resp:
        await resp.read()
        return resp.status, time.monotonic() - start


async def _gpu(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(f"{url}/sandbox/gpu") as resp:
        return int((await resp.json())["fb_used_mib"])


async def test_endpoints_need_the_flag_and_dev_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_SERVER_DEV_MODE", raising=False)
    async with ModelServer(_config()) as server, aiohttp.ClientSession() as session:
        status, _ = await _post(session, f"{server.url}/sleep?level=1")
        assert status == 404
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")
    config = vllm_config(speedup=SPEEDUP)
    async with ModelServer(config) as server, aiohttp.ClientSession() as session:
        status, _ = await _post(session, f"{server.url}/sleep?level=1")
        assert status == 404


async def test_level_one_sleep_and_wake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")
    async with ModelServer(_config()) as server, aiohttp.ClientSession() as session:
        url = server.url
        assert await _gpu(session, url) == PARAMS.awake_mib
        status, _ = await _post(session, f"{url}/sleep?level=1")
        assert status == 200
        async with session.get(f"{url}/is_sleeping") as resp:
            assert await resp.json() == {"is_sleeping": True}
        assert await _gpu(session, url) == PARAMS.residual_mib
        status, _ = await _complete(session, url)
        assert status == 503
        status, took = await _post(session, f"{url}/wake_up")
        assert status == 200
        expected = PARAMS.wake_s(1, ("weights", "kv_cache")) / SPEEDUP
        assert expected * 0.9 <= took < expected + 0.5
        async with session.get(f"{url}/is_sleeping") as resp:
            assert await resp.json() == {"is_sleeping": False}
        assert await _gpu(session, url) == PARAMS.awake_mib
        status, first = await _complete(session, url, max_tokens=256)
        assert status == 200
        assert first >= PARAMS.first_request_penalty_s / SPEEDUP * 0.9
        status, second = await _complete(session, url, max_tokens=256)
        assert status == 200
        assert second < first / 2
        # A one-token warm-up after a wake pays 1/256 of the penalty and takes it away.
        assert (await _post(session, f"{url}/sleep?level=1"))[0] == 200
        assert (await _post(session, f"{url}/wake_up"))[0] == 200
        status, warm_up = await _complete(session, url, max_tokens=1)
        assert status == 200 and warm_up < second
        status, after = await _complete(session, url, max_tokens=256)
        assert status == 200 and after < first / 2


async def test_level_two_wake_follows_vllms_sequence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")
    async with ModelServer(_config()) as server, aiohttp.ClientSession() as session:
        url = server.url
        assert (await _post(session, f"{url}/sleep?level=2"))[0] == 200
        status, _ = await _post(session, f"{url}/collective_rpc")
        assert status == 409  # no memory for the weights yet
        assert (await _post(session, f"{url}/wake_up?tags=weights"))[0] == 200
        assert await _gpu(session, url) == PARAMS.residual_mib + PARAMS.weights_mib
        assert (await _post(session, f"{url}/wake_up?tags=kv_cache"))[0] == 200
        status, _ = await _complete(session, url)
        assert status == 503  # awake, but the weights were never reloaded
        assert (await _post(session, f"{url}/collective_rpc"))[0] == 200
        status, _ = await _complete(session, url)
        assert status == 200
        status, _ = await _post(session, f"{url}/wake_up?tags=bogus")
        assert status == 400
        status, _ = await _post(session, f"{url}/sleep?level=3")
        assert status == 400


async def test_a_busy_server_refuses_to_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")
    async with ModelServer(_config()) as server, aiohttp.ClientSession() as session:
        long = {"prompt": "x", "max_tokens": 100_000, "ignore_eos": True, "stream": True}
        async with session.post(f"{server.url}/v1/completions", json=long) as resp:
            await resp.content.readline()
            status, _ = await _post(session, f"{server.url}/sleep?level=1")
            assert status == 409


async def test_shared_gpu_wake_fails_until_memory_frees(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")
    ledger = str(tmp_path / "gpu0")
    # Budget 40 GiB: one awake (24.5 GiB) plus one asleep (0.5 GiB) fit, two awake do not.
    a_config, b_config = _config(gpu_ledger_dir=ledger), _config(gpu_ledger_dir=ledger)
    async with (
        ModelServer(a_config) as a,
        ModelServer(b_config) as b,
        DcgmExporter(port=0, interval_s=3600) as exporter,
        aiohttp.ClientSession() as session,
    ):
        exporter.add(GpuTarget(url=a.url, pod="a-0", namespace="ml", uuid="GPU-x"))
        exporter.add(GpuTarget(url=b.url, pod="b-0", namespace="ml", uuid="GPU-x"))
        assert (await _post(session, f"{b.url}/sleep?level=1"))[0] == 200
        status, _ = await _post(session, f"{b.url}/wake_up")
        assert status == 500  # CUDA out of memory: a holds the GPU
        async with session.get(f"{b.url}/is_sleeping") as resp:
            assert await resp.json() == {"is_sleeping": True}
        await exporter.poll_once()
        samples = await scrape(session, exporter.url)
        fb = {
            pod: samples[
                f'DCGM_FI_DEV_FB_USED{{UUID="GPU-x",container="model",gpu="0",'
                f'namespace="ml",pod="{pod}"}}'
            ]
            for pod in ("a-0", "b-0")
        }
        assert fb == {"a-0": PARAMS.awake_mib, "b-0": PARAMS.residual_mib}
        free = samples[
            'DCGM_FI_DEV_FB_FREE{UUID="GPU-x",container="model",gpu="0",namespace="ml",pod="b-0"}'
        ]
        assert free == PARAMS.gpu_memory_mib - PARAMS.awake_mib - PARAMS.residual_mib
        assert (await _post(session, f"{a.url}/sleep?level=1"))[0] == 200
        assert (await _post(session, f"{b.url}/wake_up"))[0] == 200
        assert await _gpu(session, b.url) == PARAMS.awake_mib
