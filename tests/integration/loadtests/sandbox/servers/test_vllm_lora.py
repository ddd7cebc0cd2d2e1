"""The fake vLLM's LoRA adapters, over real HTTP.

Covers:
- the runtime endpoints exist only with VLLM_ALLOW_RUNTIME_LORA_UPDATING
  (FastAPI's 404 otherwise) and loading needs --enable-lora;
- load, unload and their errors in vLLM's bodies; /v1/models lists adapters
  with their parent; a request for an adapter not loaded is a 404;
- a load takes the load time; --max-loras distinct adapters run at once and
  another waits (seen in vllm:lora_requests_info); --max-cpu-loras evicts the
  least recently used from memory, and its next request reads it again.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from activator.replicas.lora_state import LoraInfo, loaded_adapters, lora_info
from loadtests.sandbox.servers.lora import RUNTIME_UPDATING_ENV, LoraParams
from loadtests.sandbox.servers.server import ModelServer
from loadtests.sandbox.servers.vllm import VllmApp
from tests.integration.loadtests.sandbox.servers.conftest import vllm_config

SPEEDUP = 20.0
LOAD_S = 2.0  # model time: 0.1 s of wall time


def _lora(**kw: object) -> LoraParams:
    base = {"enable_lora": True, "load_time_s": LOAD_S, "allow_runtime_updating": True}
    return LoraParams(**{**base, **kw})  # type: ignore[arg-type]


async def _post(session: aiohttp.ClientSession, url: str, body: object) -> tuple[int, str]:
    async with session.post(url, json=body) as resp:
        return resp.status, await resp.text()


async def _lora_info(session: aiohttp.ClientSession, url: str) -> LoraInfo | None:
    """The metric as the activator reads it."""
    async with session.get(f"{url}/metrics") as resp:
        return lora_info(await resp.text())


def test_runtime_updating_is_read_from_vllms_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUNTIME_UPDATING_ENV, "True")
    assert LoraParams.runtime_updating_from_env()
    monkeypatch.setenv(RUNTIME_UPDATING_ENV, "0")
    assert not LoraParams.runtime_updating_from_env()
    with pytest.raises(ValueError, match=r"max_cpu_loras \(1\) must be >= max_loras \(2\)"):
        LoraParams(enable_lora=True, max_loras=2, max_cpu_loras=1)


async def test_endpoints_need_runtime_updating_and_lora() -> None:
    off = vllm_config(speedup=SPEEDUP, lora=_lora(allow_runtime_updating=False))
    no_lora = vllm_config(speedup=SPEEDUP, lora=LoraParams(allow_runtime_updating=True))
    body = {"lora_name": "a", "lora_path": "org/a"}
    async with aiohttp.ClientSession() as session:
        async with ModelServer(off) as server:
            status, text = await _post(session, f"{server.url}/v1/load_lora_adapter", body)
            assert (status, text) == (404, '{"detail": "Not Found"}')
            assert await _lora_info(session, server.url) is not None
        async with ModelServer(no_lora) as server:
            status, text = await _post(session, f"{server.url}/v1/load_lora_adapter", body)
            assert status == 400 and "--enable-lora" in text


async def test_load_serve_unload_and_the_batch_limit() -> None:
    config = vllm_config(speedup=SPEEDUP, lora=_lora(max_loras=1, max_cpu_loras=2))
    async with ModelServer(config) as server, aiohttp.ClientSession() as session:
        url = server.url
        load, unload = f"{url}/v1/load_lora_adapter", f"{url}/v1/unload_lora_adapter"
        start = time.monotonic()
        assert await _post(session, load, {"lora_name": "a", "lora_path": "org/a"}) == (
            200,
            "Success: LoRA adapter 'a' added successfully.",
        )
        assert time.monotonic() - start >= LOAD_S / SPEEDUP
        status, text = await _post(session, load, {"lora_name": "a", "lora_path": "org/a"})
        assert status == 400 and "has already been loaded" in text and "InvalidUserInput" in text
        status, text = await _post(session, load, {"lora_name": "z", "lora_path": "/no/such"})
        assert status == 404 and "No adapter found" in text
        status, text = await _post(session, load, {"lora_name": "b"})
        assert status == 400 and "Both 'lora_name' and 'lora_path'" in text
        async with session.get(f"{url}/v1/models") as resp:
            listing = await resp.json()
        assert loaded_adapters(listing) == {"a"}
        cards = {c["id"]: c for c in listing["data"]}
        assert cards["a"]["parent"] == "m" and cards["a"]["root"] == "org/a"
        assert cards["m"]["parent"] is None
        completion = f"{url}/v1/completions"
        status, text = await _post(session, completion, {"model": "b", "prompt": "x"})
        assert status == 404 and "The model `b` does not exist." in text
        await _post(session, load, {"lora_name": "b", "lora_path": "org/b"})
        # One batch slot: b waits while a runs, and the metric says so.
        long = {"model": "a", "prompt": "x", "max_tokens": 3000, "ignore_eos": True}
        first = asyncio.create_task(_post(session, completion, long))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(_post(session, completion, {"model": "b", "prompt": "x"}))
        await asyncio.sleep(0.05)
        assert await _lora_info(session, url) == LoraInfo(1, frozenset("a"), frozenset("b"))
        assert (await first)[0] == 200 and (await second)[0] == 200
        # Host memory holds two: loading c evicts a (least recently used); a is read again.
        await _post(session, load, {"lora_name": "c", "lora_path": "org/c"})
        engine = server.engine
        assert isinstance(engine, VllmApp)
        loads = engine.lora.loads
        assert (await _post(session, completion, {"model": "a", "prompt": "x"}))[0] == 200
        assert engine.lora.loads == loads + 1
        assert (await _post(session, unload, {"lora_name": "a"}))[0] == 200
        status, text = await _post(session, unload, {"lora_name": "a"})
        assert status == 404 and "cannot be found" in text
