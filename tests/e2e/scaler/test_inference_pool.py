"""An InferencePool behind its endpoint picker, scaled by Tidal with no activator in the path.

The sandbox with ``tidal scaler`` only (the activator is not started), the
example fake-vLLM Deployment with nothing of Tidal's on it, an opted-in
InferencePool carrying the scaling annotations, and the fake endpoint
picker (``tidal sandbox epp``'s, in this process) in front of it.

Covers, in one run:
- with the pool at zero, a request sent to the picker is held there; the
  scaler wakes the pool's Deployment within a second of the request (its
  ``spec.replicas`` leaves 0, on the store's clock), and the request is
  answered by the new replica;
- under load through the picker the Deployment scales out on the picker's
  signals (the scaler's view of it has no activator, the picker's queued
  and running requests) with the policy every target has (``ScaledUp``);
- idle, it returns to zero (``ScaledToZero``);
- a pool whose annotation is bad gets an ``InvalidAnnotation`` Event naming
  the key and what is allowed, and its Deployment is left alone; a pool
  whose selector matches no Deployment gets a ``NoDeploymentSelected`` one.

And the warm tier behind a pool that selects awake pods only: a replica put
to sleep leaves the picker's rotation (its awake label), and a request that
then waits in the picker wakes it from sleep, not from zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from groundwork.kube.connection import connect
from loadtests.sandbox.cluster.defaults import apply_defaults
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.epp.service import FakeEpp
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.pool_example import PoolExample
from loadtests.sandbox.stack import SandboxStack, StackSettings
from tests.e2e.scaler.helpers import DEPLOYMENTS, EVENTS, SERVICES, running_stack, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

POOLS = by_group_version_plural("inference.networking.k8s.io", "v1", "inferencepools")
PODS = by_group_version_plural("", "v1", "pods")
assert POOLS is not None and DEPLOYMENTS is not None and SERVICES is not None

LLAMA = PoolExample(
    ExampleModel(
        name="llama",
        startup_delay_s=4.0,
        max_scale=4,
        target_concurrency=4,
        window_s=10.0,
        scale_down_delay_s=5.0,
        grace_s=10.0,
    ),
    pool="llama-pool",
)
# Its pool lends max-scale 0, which is not allowed: the Deployment is left alone.
MISTRAL = PoolExample(ExampleModel(name="mistral", model="mistral-7b"), pool="mistral-pool")


def create(stack: SandboxStack, rtype: Any, obj: dict[str, Any]) -> None:
    apply_defaults(obj, rtype.kind, creating=True)
    stack.cluster.store.create(rtype, obj)


def pool_events(stack: SandboxStack, pool: str) -> list[dict[str, Any]]:
    assert EVENTS is not None
    items, _ = stack.cluster.store.list(EVENTS, namespace="default")
    return [
        e
        for e in items
        if e.get("involvedObject", {}).get("kind") == "InferencePool"
        and e["involvedObject"].get("name") == pool
        and e.get("source", {}).get("component") == "tidal-scaler"
    ]


def deployment_reasons(stack: SandboxStack, name: str) -> list[str]:
    assert EVENTS is not None
    items, _ = stack.cluster.store.list(EVENTS, namespace="default")
    return [
        e["reason"]
        for e in sorted(items, key=lambda e: int(e["metadata"]["resourceVersion"]))
        if e.get("involvedObject", {}).get("kind") == "Deployment"
        and e["involvedObject"].get("name") == name
        and e.get("source", {}).get("component") == "tidal-scaler"
    ]


@contextlib.asynccontextmanager
async def picker(stack: SandboxStack, example: PoolExample) -> AsyncIterator[FakeEpp]:
    access = await connect(kubeconfig=str(stack.kubeconfig))
    try:
        async with FakeEpp(example.epp_config(host=stack.picker_host), access=access) as epp:
            yield epp
    finally:
        await access.close()


async def target_view(session: aiohttp.ClientSession, stack: SandboxStack) -> dict[str, Any]:
    async with session.get(f"{stack.scaler_url}/v1/targets") as resp:
        body = await resp.json()
    return next((t for t in body.get("targets") or () if t["target"] == "default/llama"), {})


async def first_replica_requested(stack: SandboxStack) -> float:
    """The loop time at which the Deployment's ``spec.replicas`` left 0 (polled every 5 ms)."""
    loop = asyncio.get_running_loop()
    while stack.deployment_state("llama")[0] == 0:  # noqa: ASYNC110 - the store has no event
        await asyncio.sleep(0.005)
    return loop.time()


async def complete(session: aiohttp.ClientSession, url: str, *, tokens: int) -> int:
    body = {"model": "llama-3-8b", "prompt": "Hello there", "max_tokens": tokens}
    async with session.post(f"{url}/v1/completions", json=body) as resp:
        await resp.read()
        return resp.status


async def load(
    session: aiohttp.ClientSession, url: str, *, clients: int, seconds: float
) -> list[int]:
    """``clients`` loops sending requests back to back for ``seconds``; every status."""
    statuses: list[int] = []
    deadline = time.monotonic() + seconds

    async def one() -> None:
        while time.monotonic() < deadline:
            statuses.append(await complete(session, url, tokens=64))

    await asyncio.gather(*(one() for _ in range(clients)))
    return statuses


async def test_a_pool_wakes_from_its_pickers_queue_scales_on_its_signals_and_idles_to_zero(
    tmp_path: Path,
) -> None:
    settings = StackSettings(example=None, activator=False)
    async with running_stack(tmp_path, settings) as stack:
        assert stack.activator is None  # nothing of Tidal's in the data path
        async with picker(stack, LLAMA) as epp:
            metrics_url = epp.metrics_url
            for example in (LLAMA, MISTRAL):
                create(stack, SERVICES, example.service())
                create(stack, DEPLOYMENTS, example.deployment())
            create(stack, POOLS, LLAMA.inference_pool(metrics_url=metrics_url))
            bad = MISTRAL.inference_pool(metrics_url=metrics_url)
            bad["metadata"]["annotations"]["autoscaling.tidal.dev/max-scale"] = "0"
            create(stack, POOLS, bad)
            orphan = LLAMA.inference_pool(metrics_url=metrics_url)
            orphan["metadata"]["name"] = "orphan-pool"
            orphan["spec"]["selector"]["matchLabels"] = {"app": "nothing"}
            create(stack, POOLS, orphan)

            timeout = aiohttp.ClientTimeout(total=120)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                # The scaler reads the pool's picker before the first request.
                await _until_async(
                    lambda: _picker_read(session, stack), 30, "the scaler reading the picker"
                )

                # --- from zero: held in the picker, woken within a second, answered ---------
                loop = asyncio.get_running_loop()
                woken = asyncio.create_task(first_replica_requested(stack))
                sent_at = loop.time()
                answer = asyncio.create_task(complete(session, epp.gateway_url, tokens=8))
                await wait_until(
                    lambda: epp.controller is not None and epp.controller.held == 1,
                    timeout_s=5,
                    what="the request held in the picker",
                    every_s=0.01,
                )
                wake_s = await asyncio.wait_for(woken, 10) - sent_at
                assert wake_s < 1.0, f"the wake began {wake_s:.3f}s after the request"
                assert await asyncio.wait_for(answer, 60) == 200
                assert deployment_reasons(stack, "llama")[:1] == ["Activated"]

                # --- under load: scales out on the picker's signals ---------------------------
                running = asyncio.create_task(
                    load(session, epp.gateway_url, clients=16, seconds=25.0)
                )
                views: list[dict[str, Any]] = []
                peak = 0
                while not running.done():
                    peak = max(peak, stack.deployment_state("llama")[0])
                    views.append(await target_view(session, stack))
                    await asyncio.sleep(0.5)
                statuses = await running
                assert statuses and all(s == 200 for s in statuses), set(statuses)
                assert peak >= 2, f"peak desired replicas {peak}"
                assert "ScaledUp" in deployment_reasons(stack, "llama")
                busy = [v for v in views if (v.get("observed") or {}).get("epp_running_requests")]
                assert busy, "the scaler never saw the picker's running requests"
                assert all(
                    v.get("activators") == 0 and v.get("pool") == "default/llama-pool" for v in busy
                )

                # --- idle: back to zero -------------------------------------------------------
                await wait_until(
                    lambda: stack.deployment_state("llama")[0] == 0,
                    timeout_s=90,
                    what="llama back at zero",
                )
                # The Event follows the scale write.
                await wait_until(
                    lambda: deployment_reasons(stack, "llama")[-1] == "ScaledToZero",
                    timeout_s=10,
                    what="a ScaledToZero Event on llama",
                )

            # --- Warnings on the pools --------------------------------------------------------
            await wait_until(
                lambda: bool(pool_events(stack, "mistral-pool")),
                timeout_s=30,
                what="an Event on mistral-pool",
            )
            (invalid,) = pool_events(stack, "mistral-pool")
            assert invalid["reason"] == "InvalidAnnotation" and invalid["type"] == "Warning"
            assert (
                'autoscaling.tidal.dev/max-scale: "0" is not allowed; allowed:'
                in invalid["message"]
            )
            assert stack.deployment_state("mistral")[0] == 0
            (orphaned,) = pool_events(stack, "orphan-pool")
            assert orphaned["reason"] == "NoDeploymentSelected"
            assert "selector app=nothing" in orphaned["message"]


async def _picker_read(session: aiohttp.ClientSession, stack: SandboxStack) -> bool:
    with contextlib.suppress(aiohttp.ClientError):
        view = await target_view(session, stack)
        return "epp_ready_endpoints" in (view.get("observed") or {})
    return False


async def _until_async(check: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f}s: {what}")
        await asyncio.sleep(0.2)


# Sleeps when idle for 3 s, and stays asleep (not at zero) for the test's length.
SLEEPER = PoolExample(
    ExampleModel(
        name="llama",
        startup_delay_s=10.0,
        max_scale=1,
        grace_s=600.0,
        extra_annotations={"autoscaling.tidal.dev/sleep-after": "3s"},
    ),
    pool="llama-pool",
)


def awake_label(stack: SandboxStack) -> list[str]:
    """The awake label of llama's pods, from the store."""
    assert PODS is not None
    pods, _ = stack.cluster.store.list(PODS, namespace="default", copy=False)
    return [
        p["metadata"].get("labels", {}).get("autoscaling.tidal.dev/awake", "")
        for p in pods
        if p["metadata"].get("labels", {}).get("app") == "llama"
        and not p["metadata"].get("deletionTimestamp")
    ]


async def test_a_sleeping_replica_leaves_the_pickers_rotation_and_wakes_from_its_queue(
    tmp_path: Path,
) -> None:
    """The warm tier behind a pool that selects awake pods only: the replica put to
    sleep is labelled out of the pool (the picker has no endpoint); a request then
    waits in the picker, the scaler wakes the replica from that queue (Woke, not a new
    replica), labels it back, and the request is answered in well under the 10 s cold
    start."""
    settings = StackSettings(example=None, activator=False)
    async with running_stack(tmp_path, settings) as stack, picker(stack, SLEEPER) as epp:
        create(stack, SERVICES, SLEEPER.service())
        create(stack, DEPLOYMENTS, SLEEPER.deployment(replicas=1, sleep_mode=True))
        create(stack, POOLS, SLEEPER.inference_pool(metrics_url=epp.metrics_url, awake_only=True))
        await wait_until(
            lambda: "Slept" in deployment_reasons(stack, "llama"), timeout_s=60, what="Slept"
        )
        await wait_until(
            lambda: awake_label(stack) == ["false"], timeout_s=10, what="labelled not awake"
        )
        assert epp.controller is not None
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            started = time.monotonic()
            answer = asyncio.create_task(complete(session, epp.gateway_url, tokens=8))
            await wait_until(
                lambda: epp.controller is not None and epp.controller.held == 1,
                timeout_s=5,
                what="the request held in the picker",
                every_s=0.01,
            )
            assert await asyncio.wait_for(answer, 30) == 200
            took = time.monotonic() - started
        assert took < 5.0, f"answered after {took:.2f}s: a cold start, not a wake"
        assert "Woke" in deployment_reasons(stack, "llama")
        assert awake_label(stack) == ["true"]
        assert stack.deployment_state("llama")[0] == 1  # woken, not a second replica
