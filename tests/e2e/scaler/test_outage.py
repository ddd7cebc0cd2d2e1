"""An API server outage against the real ``tidal scaler`` process.

Covers:
- while the API server refuses every connection (watches cut, lists and
  writes failing) and the activator view goes silent, the scaler neither
  crashes nor scales anything down, let alone to zero: a model at 2 replicas
  stays at 2 throughout (checked every 0.2 s) and after;
- once the API server is back, the same process recovers, leads again and
  reacts to load: more demand scales the model out.

The outage (12 s) outlasts what it must: the model's window and grace (a
scaler that read silence as zero load would scale down after them) and the
scaler's renew deadline, shortened through the environment to 4 s, so it
stops counting itself leader during the outage and must take the Lease back.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from loadtests.sandbox.stack import StackSettings
from tests.e2e.scaler.helpers import Reporter, apply, model, running_stack, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

OUTAGE_S = 12.0
LEASE_ENV = {
    "TIDAL_SCALER_LEADER__LEASE_DURATION_S": "6",
    "TIDAL_SCALER_LEADER__RENEW_DEADLINE_S": "4",
    "TIDAL_SCALER_LEADER__RETRY_PERIOD_S": "1",
}


async def test_outage_neither_lowers_nor_crashes(tmp_path: Path) -> None:
    example, deployment = model(
        replicas=2,
        processes=False,
        min_scale=0,
        max_scale=6,
        target_concurrency=8,
        window_s=6.0,
        scale_down_delay_s=0.0,
        grace_s=2.0,
    )
    settings = StackSettings(
        example=None,
        activator=False,
        scaler_args=("--tick-interval-s", "1"),
        scaler_env=LEASE_ENV,
    )
    async with running_stack(tmp_path, settings) as stack:
        apply(stack, example, deployment)
        api = stack.cluster.api
        scaler = stack.scaler
        assert api is not None
        assert scaler is not None
        async with Reporter([stack.addresses.scaler_url], stack.token, example.target) as reporter:
            reporter.concurrency = 16.0  # 2 replicas' worth: steady
            await wait_until(
                lambda: stack.deployment_state(example.name)[:2] == (2, 2),
                timeout_s=10,
                what="two ready replicas",
            )
            # Let the scaler see them steady for a few decisions.
            await asyncio.sleep(3)
            # The outage: connections refused, and the activator silent
            # (silence is not zero load; neither is an unreachable API server).
            reporter.paused = True
            await api.make_unavailable(OUTAGE_S, refuse_connections=True)
            loop = asyncio.get_running_loop()
            lowest = 2
            ends = loop.time() + OUTAGE_S + 4.0
            while loop.time() < ends:
                lowest = min(lowest, stack.deployment_state(example.name)[0])
                assert scaler.running, f"the scaler died:\n{scaler.tail()}"
                await asyncio.sleep(0.2)
            assert lowest == 2
            # Back, and the load doubles: the same process scales out.
            reporter.paused = False
            reporter.concurrency = 32.0
            await wait_until(
                lambda: stack.deployment_state(example.name)[0] == 4,
                timeout_s=20,
                what="scaled out to 4 after the outage",
            )
            assert scaler.running
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"{stack.addresses.scaler_url}/metrics") as resp,
            ):
                text = await resp.text()
            # It leads again (it stopped counting itself leader during the outage).
            assert "tidal_scaler_leader 1.0" in text
