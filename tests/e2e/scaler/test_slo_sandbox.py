"""SLO-first scaling in the sandbox: long prompts scale a model out, short ones do not.

The sandbox (emulated cluster, the real ``tidal scaler`` and ``tidal
activator``, fake vLLM pods whose time to first token grows with the
tokens ahead of a prompt) runs one model with
``autoscaling.tidal.dev/slo-ttft: 2.5s`` (a bound of vLLM's TTFT histogram,
so the attainment measured is exact) and a per-replica concurrency target
too high to ask for a replica at this load: whatever scales it is the SLO.
Clients keep a fixed number of completions in flight (a closed loop), first
with short prompts (50 tokens), then with long ones (12,000 tokens: about
half a second of prefill each on a replica prefilling 25,000 tokens/s, so
twelve queued ones wait several seconds).

Covers (the issue's bar): with short prompts the model stays at one replica
for the whole phase; at the same concurrency, long prompts make Tidal ask
for more (within a second or two: the activator counts each prompt's tokens
at arrival, and twelve long prompts at once are a queue of 144,000 tokens).
Along the way, ``GET /v1/targets`` shows the objective, the capacity and
the attainment measured from the servers' histograms. Every process is stopped even when an
assertion fails (the stack's context manager; the clients are tasks of this
test, cancelled in ``finally``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.stack import SandboxStack, StackSettings

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CONCURRENCY = 12
SHORT_S = 15.0  # long enough for several decisions on a full history of short prompts
LONG_LIMIT_S = 30.0  # the scale-out is expected within seconds; this bounds a failure
MODEL = ExampleModel(
    startup_delay_s=2.0,
    min_scale=1,
    max_scale=4,
    # 12 requests in flight would not ask for a second replica by concurrency.
    target_concurrency=32,
    window_s=6.0,
    scale_down_delay_s=2.0,
    grace_s=60.0,
    extra_annotations={"autoscaling.tidal.dev/slo-ttft": "2.5s"},
)


async def client(session: aiohttp.ClientSession, url: str, prompt_chars: int) -> None:
    """One closed-loop client: a completion, and the next as soon as it is answered."""
    body = {"model": MODEL.model, "prompt": "x" * prompt_chars, "max_tokens": 64}
    while True:
        async with session.post(url, json=body) as resp:
            assert resp.status == 200, await resp.text()
            await resp.read()


async def phase(
    stack: SandboxStack, prompt_chars: int, seconds: float, *, until_replicas: int | None = None
) -> list[int]:
    """Run the clients for ``seconds`` (or until the model asks for ``until_replicas``);
    the desired replicas seen every half second."""
    url = f"{stack.addresses.activator_url}/v1/completions"
    desired: list[int] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        tasks = [
            asyncio.create_task(client(session, url, prompt_chars)) for _ in range(CONCURRENCY)
        ]
        try:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                await asyncio.sleep(0.5)
                for task in tasks:
                    if task.done():
                        task.result()  # a failed request fails the test, with its answer
                desired.append(stack.deployment_state(MODEL.name)[0])
                if until_replicas is not None and desired[-1] >= until_replicas:
                    break
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    return desired


async def slo_view(stack: SandboxStack) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
        session.get(f"{stack.addresses.scaler_url}/v1/targets") as resp,
    ):
        body = await resp.json()
    (view,) = [t for t in body["targets"] if t["target"] == MODEL.target]
    return dict(view.get("slo") or {})


@pytest.mark.timeout(150)
async def test_long_prompts_scale_out_and_short_ones_at_the_same_concurrency_do_not(
    tmp_path: Path,
) -> None:
    async with SandboxStack(tmp_path, StackSettings(example=MODEL)) as stack:
        short = await phase(stack, prompt_chars=200, seconds=SHORT_S)
        after_short = await slo_view(stack)
        long = await phase(stack, prompt_chars=48_000, seconds=LONG_LIMIT_S, until_replicas=2)
        after_long = await slo_view(stack)
    print(f"\nshort: {short}\nlong: {long}\n{after_short}\n{after_long}", flush=True)
    assert short and max(short) == 1, short
    assert max(long) >= 2, long
    # What tidal status shows: the goal, the capacity, the attainment measured.
    assert (after_short["slo_ttft_s"], after_short["attainment"]) == (2.5, 0.99)
    assert after_short["capacity_prompt_tokens_per_s"] > 0
    assert after_short["measured_attainment"] == 1.0  # short prompts: all within 2.5 s
    assert after_short["measured_first_tokens"] > 0
    assert after_long["sized_replicas"] >= 2
