"""The LoRA tour a new user takes, replayed in the sandbox: nothing waits in silence.

One sandbox stack (emulated cluster, the real scaler and activator as
processes) and the example model: one ready fake-vLLM replica started
without ``--enable-lora``, as docs/adapters.md's reader would first try it.

1. The Deployment is annotated with two adapters
   (``routing.tidal.dev/adapters``); ``GET /v1/models`` lists both with
   their parent.
2. A request for one of them is answered within a few seconds (not held to
   its 10-minute cold-start timeout) with a 503 whose message names
   ``--enable-lora`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``, and the
   scaler raises a Warning Event on the Deployment saying the same.
3. The annotation is removed: a request for the base model is answered 200
   at once, and so is every later one.

The stack stops every process even when an assertion fails.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadtests.sandbox.cluster.errors import Conflict
from loadtests.sandbox.stack import SandboxStack, StackSettings
from tests.e2e.scaler.helpers import DEPLOYMENTS, apply, events, model, running_stack, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ADAPTERS = "sql-lora=/models/loras/sql, chat-lora=org/chat-lora"


def _annotate(stack: SandboxStack, name: str, key: str, value: str | None) -> None:
    """Set (or, with None, remove) one annotation of Deployment ``name``, as kubectl does."""
    assert DEPLOYMENTS is not None
    store = stack.cluster.store
    for _ in range(10):
        obj = store.get(DEPLOYMENTS, "default", name)
        notes = obj["metadata"].setdefault("annotations", {})
        if value is None:
            notes.pop(key, None)
        else:
            notes[key] = value
        try:
            store.update(DEPLOYMENTS, obj)
            return
        except Conflict:  # the scaler wrote its status meanwhile: read it again
            continue
    raise AssertionError(f"could not annotate {name}: 10 conflicts in a row")


async def _models(session: aiohttp.ClientSession, url: str) -> list[dict[str, Any]]:
    async with session.get(f"{url}/v1/models") as resp:
        assert resp.status == 200
        cards: list[dict[str, Any]] = (await resp.json())["data"]
        return cards


async def _complete(session: aiohttp.ClientSession, url: str, model: str) -> tuple[int, Any, float]:
    started = time.monotonic()
    body = {"model": model, "prompt": "hello", "max_tokens": 2}
    async with session.post(f"{url}/v1/completions", json=body) as resp:
        return resp.status, await resp.json(), time.monotonic() - started


async def test_an_adapter_request_without_lora_is_answered_and_never_stalls_the_model(
    tmp_path: Path,
) -> None:
    example, deployment = model(replicas=1, startup_delay_s=1.0, min_scale=1, speedup=20.0)
    settings = StackSettings(example=None, scaler_args=("--tick-interval-s", "1"))
    async with running_stack(tmp_path, settings) as stack:
        apply(stack, example, deployment)
        await wait_until(
            lambda: stack.deployment_state(example.name)[1] == 1, timeout_s=60, what="ready"
        )
        url = stack.activator_url
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            # 1. Declared: listed with their parent.
            _annotate(stack, example.name, "routing.tidal.dev/adapters", ADAPTERS)
            for _ in range(100):
                cards = await _models(session, url)
                if any(c.get("parent") for c in cards):
                    break
                await asyncio.sleep(0.1)
            parents = {c["id"]: c.get("parent") for c in cards}
            assert parents["sql-lora"] == parents["chat-lora"] == example.model

            # 2. Answered within a few seconds, naming the fix; an Event says it too.
            status, body, took = await _complete(session, url, "sql-lora")
            assert status == 503, body
            assert took < 10
            message = body["error"]["message"]
            assert "--enable-lora" in message, message
            assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" in message, message
            await wait_until(
                lambda: any(
                    e["type"] == "Warning" and "--enable-lora" in e["message"]
                    for e in events(stack, example.name)
                ),
                timeout_s=15,
                what="a Warning Event naming --enable-lora",
            )

            # 3. The declaration removed: the base model answers at once, every time.
            _annotate(stack, example.name, "routing.tidal.dev/adapters", None)
            for _ in range(100):
                if not any(c.get("parent") for c in await _models(session, url)):
                    break
                await asyncio.sleep(0.1)
            for _ in range(3):
                status, body, took = await _complete(session, url, example.model)
                assert status == 200, body
                assert took < 5
