"""A model's whole life through the real processes: zero, wake, burst, idle, zero.

Covers (sandbox cluster, ``tidal scaler`` and ``tidal activator`` processes):
- a Deployment at zero wakes on the first request through the activator, and
  that request is answered 200 (``Activated`` Event, status annotation);
- a burst of long generations scales it out (``ScaledUp``);
- once idle, it returns to zero after the grace period (``ScaledToZero``,
  status annotation ``desired: 0``), with every pod gone.
Windows, delay and grace are shortened by annotation so this runs in ~30 s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from loadtests.sandbox.stack import StackSettings
from tests.e2e.scaler.helpers import apply, model, reasons, running_stack, status, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def test_wake_burst_and_back_to_zero(tmp_path: Path) -> None:
    example, deployment = model(
        startup_delay_s=1.0,
        max_scale=3,
        target_concurrency=2,
        window_s=6.0,
        scale_down_delay_s=0.0,
        grace_s=4.0,
        cold_start_timeout_s=60.0,
    )
    settings = StackSettings(example=None, scaler_args=("--tick-interval-s", "1"))
    async with running_stack(tmp_path, settings) as stack:
        apply(stack, example, deployment)
        url = f"{stack.activator_url}/v1/completions"
        timeout = aiohttp.ClientTimeout(total=60)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

            async def complete(max_tokens: int) -> int:
                body = {
                    "model": example.model,
                    "prompt": "hello",
                    "max_tokens": max_tokens,
                    "ignore_eos": True,
                }
                async with session.post(url, json=body) as resp:
                    await resp.read()
                    return resp.status

            # The activator learns the target from its watch; until then it answers 404.
            await wait_until(
                lambda: stack.deployment_state(example.name)[0] == 0,
                timeout_s=5,
                what="the Deployment at zero",
            )
            for _ in range(100):
                first = await complete(8)
                if first != 404:
                    break
                await asyncio.sleep(0.1)
            assert first == 200  # held through the cold start, then answered
            assert "Activated" in reasons(stack, example.name)
            woke = status(stack, example.name)
            assert woke is not None
            assert woke["reason"] == "Activated"
            assert woke["desired"] >= 1

            # A burst: 10 generations of ~5 s each, 2 per replica wanted -> max (3).
            burst = [asyncio.create_task(complete(700)) for _ in range(10)]
            try:
                await wait_until(
                    lambda: stack.deployment_state(example.name)[0] >= 2,
                    timeout_s=20,
                    what="scaled out under the burst",
                )
                # The Event is written just after the scale: wait for it, bounded.
                await wait_until(
                    lambda: "ScaledUp" in reasons(stack, example.name),
                    timeout_s=5,
                    what="a ScaledUp Event after the scale-out",
                )
            finally:
                results = await asyncio.gather(*burst, return_exceptions=True)
            assert results == [200] * 10

            # Idle: after the grace period (4 s) with every source fresh, zero.
            await wait_until(
                lambda: stack.deployment_state(example.name) == (0, 0, 0),
                timeout_s=40,
                what="back to zero replicas and pods once idle",
            )
            await wait_until(
                lambda: reasons(stack, example.name)[-1] == "ScaledToZero",
                timeout_s=5,
                what="a ScaledToZero Event as the last one",
            )
            await wait_until(
                lambda: (status(stack, example.name) or {}).get("desired") == 0,
                timeout_s=5,
                what="the status annotation written after the Event",
            )
            final = status(stack, example.name)
            assert final is not None
            assert (final["desired"], final["reason"]) == (0, "ScaledToZero")
