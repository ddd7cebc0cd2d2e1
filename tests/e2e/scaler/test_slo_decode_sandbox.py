"""SLO-first scaling in the sandbox: decode binds, and a tail no replica can help.

The sandbox (emulated cluster, the real ``tidal scaler`` and ``tidal
activator``, fake vLLM pods) runs one model with
``autoscaling.tidal.dev/slo-ttft: 2s``, a per-replica concurrency target too
high to ask for a replica at this load (whatever scales it is the SLO), a
5 s cold start, and fake vLLM servers started with ``--max-num-seqs 8``: a
replica runs eight sequences at once and the rest wait for a slot.

Covers (the issue's bar), in two phases of closed-loop streaming clients:

- **prompts no replica can serve in time**: four clients send prompts of
  about 70,000 tokens (almost 3 s of prefill on a replica prefilling 25,000
  tokens a second, past the objective on any replica). Tidal does not add
  replicas for them: the count stays under ``max-scale`` (8) and
  ``/v1/targets`` shows their share;
- **decode binds**: forty clients send short prompts (50 tokens) for 300
  generated tokens each. Prompt-token sizing alone would keep one replica
  (2,000 prompt tokens a second); Tidal learns the batch of eight from the
  servers' running and waiting requests and sizes for the sequences: at
  least five replicas, decode shown as the phase that binds.

Every process is stopped even when an assertion fails (the stack's context
manager; the clients are tasks of this test, cancelled in ``finally``).
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

MAX_SCALE = 8
MODEL = ExampleModel(
    startup_delay_s=5.0,
    min_scale=1,
    max_scale=MAX_SCALE,
    target_concurrency=64,
    window_s=6.0,
    scale_down_delay_s=2.0,
    grace_s=60.0,
    extra_annotations={"autoscaling.tidal.dev/slo-ttft": "2s"},
    server_args=("--max-num-seqs", "8"),
)


async def client(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> None:
    """One closed-loop streaming client: a completion, and the next once it is answered."""
    while True:
        async with session.post(url, json=body) as resp:
            assert resp.status == 200, await resp.text()
            async for _ in resp.content:
                pass


async def phase(
    stack: SandboxStack,
    body: dict[str, Any],
    clients: int,
    seconds: float,
    *,
    until_replicas: int | None = None,
) -> list[int]:
    """Run the clients for ``seconds`` (or until the model asks for ``until_replicas``);
    the desired replicas seen every half second."""
    url = f"{stack.addresses.activator_url}/v1/completions"
    desired: list[int] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        tasks = [asyncio.create_task(client(session, url, body)) for _ in range(clients)]
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


async def slo_view_when(stack: SandboxStack, key: str, above: float) -> dict[str, Any]:
    """The view once ``key`` is above ``above`` (a few decisions at most), else the last."""
    view = await slo_view(stack)
    for _ in range(20):
        if (view.get(key) or 0.0) > above:
            break
        await asyncio.sleep(0.5)
        view = await slo_view(stack)
    return view


@pytest.mark.timeout(330)
async def test_long_answers_scale_out_and_a_hopeless_tail_does_not(tmp_path: Path) -> None:
    hopeless = {"model": MODEL.model, "prompt": "x" * 280_000, "max_tokens": 8, "stream": True}
    chat = {
        "model": MODEL.model,
        "prompt": "x" * 200,
        "max_tokens": 300,
        "ignore_eos": True,
        "stream": True,
    }
    async with SandboxStack(tmp_path, StackSettings(example=MODEL)) as stack:
        tail = await phase(stack, hopeless, clients=4, seconds=40.0)
        after_tail = await slo_view_when(stack, "hopeless_share", 0.5)
        decode = await phase(stack, chat, clients=40, seconds=150.0, until_replicas=5)
        after_decode = await slo_view(stack)
    print(f"\ntail: {tail}\ndecode: {decode}\n{after_tail}\n{after_decode}", flush=True)
    assert max(tail) < MAX_SCALE, tail
    assert after_tail["hopeless_share"] > 0.5, after_tail
    assert max(decode) >= 5, decode
    assert after_decode["binding"] == "decode", after_decode
    assert after_decode["decode_slots"] == pytest.approx(8, abs=1.5), after_decode
