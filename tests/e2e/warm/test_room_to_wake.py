"""Room to wake, through the real processes: a burst to a sleeping model while
another model is starting on its GPU is answered after a wake, not a cold start.

Sandbox cluster, ``tidal scaler`` and ``tidal activator`` processes, fake vLLM
servers with sleep mode, one time-sliced GPU (four slices) whose memory fits
two models awake: alpha sleeps, beta and gamma were just used (awake or kept
asleep to leave room, as the scaler decides), and delta, a fourth model, is
in its cold start on the same GPU when a burst of requests for alpha comes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from loadtests.sandbox.cluster.nodes import NodeSpec
from loadtests.sandbox.stack import StackSettings
from tests.e2e.scaler.helpers import apply, events, running_stack, wait_until
from tests.e2e.warm.test_warm_tier import (
    COLD_START_S,
    HANDOFF,
    PROMETHEUS,
    WAKE_S,
    complete,
    slept,
    warm_model,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Two awake (24 600 MiB each) and two asleep (600 each) fit; three awake do not.
GPU_MIB = 51_000
BURST = 4


@pytest.mark.parametrize(
    "prometheus",
    [
        pytest.param(None, id="reactive"),
        pytest.param(
            PROMETHEUS or "prometheus",
            id="learned-memory",
            marks=pytest.mark.skipif(
                PROMETHEUS is None, reason="no prometheus binary (scripts/ensure-debian-packages)"
            ),
        ),
    ],
)
@pytest.mark.timeout(180)
async def test_a_burst_to_a_sleeping_model_beside_a_starting_one_is_a_wake(
    tmp_path: Path, prometheus: str | None
) -> None:
    node = NodeSpec(
        "gpu-shared", "on-demand", "us-east-1a", gpus=1, gpu_replicas=4, gpu_memory_mib=GPU_MIB
    )
    names = ("alpha", "beta", "gamma")
    models = {n: warm_model(n, f"{n}-8b", sleep_after="6s", replicas=1) for n in names}
    delta = warm_model("delta", "delta-8b", sleep_after="6s", replicas=1)
    settings = StackSettings(
        example=None,
        nodes=(node,),
        scaler_args=("--tick-interval-s", "1"),
        scaler_env=HANDOFF,
        prometheus=prometheus,
    )
    async with running_stack(tmp_path, settings) as stack:
        for example, deployment in models.values():
            apply(stack, example, deployment)
        await wait_until(
            lambda: all(slept(stack, n) for n in names), timeout_s=90, what="all three asleep"
        )
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for n in ("beta", "gamma"):  # both used: woken, idle, nothing sleeps for minutes
                status, _ = await complete(session, stack.activator_url, models[n][0].model)
                assert status == 200
            apply(stack, *delta)
            await wait_until(
                lambda: stack.deployment_state("delta")[2] == 1,
                timeout_s=10,
                what="delta's pod created",
            )
            results = await asyncio.gather(
                *(
                    complete(session, stack.activator_url, models["alpha"][0].model)
                    for _ in range(BURST)
                )
            )
            delta_ready = stack.deployment_state("delta")[1]
        assert [s for s, _ in results] == [200] * BURST
        tooks = sorted(t for _, t in results)
        # Answered after a wake (and at most a sleep to make room, plus a tick or
        # two of handoff), while delta was still in its cold start. A cold start
        # of alpha's own could not answer before its startup delay: that is the
        # line, not a fraction of it, so a loaded machine's slower ticks (5 s seen
        # at a load average of 8 on two cores) do not read as a cold start.
        assert delta_ready == 0, tooks
        assert tooks[0] >= WAKE_S * 0.8 and tooks[-1] < COLD_START_S, tooks
        alpha = events(stack, "alpha")
        assert any(e["reason"] == "Woke" for e in alpha), alpha
        assert not any(e["reason"] == "WakeFailed" for e in alpha), alpha
        assert stack.deployment_state("alpha")[0] == 1  # no cold start of a second replica
