"""``tidal demo --story inferencepool``: a pool woken from zero through its endpoint picker.

Starts the sandbox with ``tidal scaler`` only (no activator: the endpoint
picker is the data path, as behind a Gateway API Inference Extension
gateway), the example fake-vLLM Deployment with nothing of Tidal's on it,
an ``InferencePool`` that opts it in and carries its scaling annotations,
and a fake endpoint picker (``tidal sandbox epp``, with llm-d's router's
flow control and metric names) in front of the pool (docs/gateway-api.md).

1. **From zero**: one request to the picker. It waits in the picker's
   queue (the pool has no endpoint); the scaler, reading the picker's
   metrics every 250 ms, wakes the Deployment; the request is answered
   once the replica is Ready. Measured: from the request to the wake (the
   Deployment's ``spec.replicas`` leaving 0) and to the answer.
2. **Under load**: streams of requests through the picker; the scaler sizes
   the Deployment on the picker's queued and running requests, with the
   same policy as a Deployment behind Tidal's activator.
3. **Idle**: back to zero after the pool's grace period.

Exit status 0 when the first request is answered, the wake began within a
second, every request under load is answered 200, more than one replica
was ready at the peak and none at the end; ``--json`` ends with the
figures as one line of JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import aiohttp

from groundwork.kube.connection import connect
from loadtests.demo.session import INTERRUPTED, DemoSession
from loadtests.sandbox.cluster.defaults import apply_defaults
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.epp.service import FakeEpp
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.pool_example import PoolExample
from loadtests.sandbox.stack import SandboxStack, StackSettings
from scaler.signals.epp_metrics import read_epp_metrics

__all__ = ["LLAMA", "pool_main"]

DEPLOYMENTS = by_group_version_plural("apps", "v1", "deployments")
SERVICES = by_group_version_plural("", "v1", "services")
POOLS = by_group_version_plural("inference.networking.k8s.io", "v1", "inferencepools")

LLAMA = PoolExample(
    ExampleModel(
        name="llama",
        startup_delay_s=6.0,
        max_scale=4,
        target_concurrency=4,
        window_s=10.0,
        scale_down_delay_s=5.0,
        grace_s=10.0,
    ),
    pool="llama-pool",
)
LOAD_CLIENTS = 16
LOAD_S = 25.0
ZERO_TIMEOUT_S = 90.0


def _apply(stack: SandboxStack, metrics_url: str) -> None:
    for rtype, obj in (
        (SERVICES, LLAMA.service()),
        (DEPLOYMENTS, LLAMA.deployment()),
        (POOLS, LLAMA.inference_pool(metrics_url=metrics_url)),
    ):
        assert rtype is not None
        apply_defaults(obj, rtype.kind, creating=True)
        stack.cluster.store.create(rtype, obj)


async def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout_s:.0f}s: {what}")
        await asyncio.sleep(0.005)


async def _complete(session: aiohttp.ClientSession, url: str, tokens: int) -> int:
    body = {"model": LLAMA.model.model, "prompt": "Hello there", "max_tokens": tokens}
    async with session.post(f"{url}/v1/completions", json=body) as resp:
        await resp.read()
        return resp.status


async def _scaler_reads_the_picker(session: aiohttp.ClientSession, stack: SandboxStack) -> None:
    """Until the scaler's view of the pool's Deployment carries the picker's figures."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            async with session.get(f"{stack.scaler_url}/v1/targets") as resp:
                targets = (await resp.json()).get("targets") or []
        except aiohttp.ClientError:
            targets = []
        view: dict[str, Any] = next(
            (t for t in targets if t.get("target") == LLAMA.model.target), {}
        )
        if "epp_ready_endpoints" in (view.get("observed") or {}):
            return
        await asyncio.sleep(0.2)
    raise TimeoutError("the scaler did not read the pool's picker within 60s")


async def _from_zero(
    session: aiohttp.ClientSession, stack: SandboxStack, epp: FakeEpp, say: Any
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    name = LLAMA.model.name
    sent = loop.time()
    answer = asyncio.create_task(_complete(session, epp.gateway_url, 8))
    await _wait(lambda: stack.deployment_state(name)[0] > 0, 10, "the wake")
    wake_s = loop.time() - sent
    async with session.get(epp.metrics_url) as resp:
        held = read_epp_metrics(await resp.text(), pool=LLAMA.pool)
    say(
        f"1/3 a request to the picker at zero: held in its queue ({held.queued_requests:g}"
        f" queued, {held.ready_endpoints or 0:g} ready endpoints); the scaler woke"
        f" {LLAMA.model.target} {wake_s:.3f}s after it"
    )
    status = await asyncio.wait_for(answer, 120)
    answered_s = loop.time() - sent
    say(f"    answered HTTP {status} after {answered_s:.2f}s (the replica's cold start)")
    return {"wake_s": round(wake_s, 3), "first_status": status, "first_s": round(answered_s, 3)}


async def _under_load(
    session: aiohttp.ClientSession, stack: SandboxStack, epp: FakeEpp, say: Any
) -> dict[str, Any]:
    say(f"2/3 {LOAD_CLIENTS} clients through the picker for {LOAD_S:g}s")
    statuses: list[int] = []
    deadline = time.monotonic() + LOAD_S

    async def client() -> None:
        while time.monotonic() < deadline:
            statuses.append(await _complete(session, epp.gateway_url, 64))

    running = asyncio.gather(*(client() for _ in range(LOAD_CLIENTS)))
    peak_ready = seen = 0
    while not running.done():
        spec, ready, _ = stack.deployment_state(LLAMA.model.name)
        if ready != seen:
            say(f"    {ready} replica(s) ready, {spec} wanted")
            seen = ready
        peak_ready = max(peak_ready, ready)
        await asyncio.sleep(0.5)
    await running
    ok = sum(1 for s in statuses if s == 200)
    say(f"    {ok} of {len(statuses)} answered 200; at most {peak_ready} replicas ready")
    return {"requests": len(statuses), "succeeded": ok, "peak_ready": peak_ready}


async def play(stack: SandboxStack, say: Any) -> dict[str, Any]:
    """The story on a started stack; the figures it observed."""
    access = await connect(kubeconfig=str(stack.kubeconfig))
    try:
        async with (
            FakeEpp(LLAMA.epp_config(host=stack.picker_host), access=access) as epp,
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=180)) as session,
        ):
            _apply(stack, epp.metrics_url)
            say(
                f"InferencePool {LLAMA.model.namespace}/{LLAMA.pool} selects {LLAMA.model.target}"
                f" (at zero); its picker serves {epp.gateway_url}, no activator in the path"
            )
            await _scaler_reads_the_picker(session, stack)
            figures = await _from_zero(session, stack, epp, say)
            figures |= await _under_load(session, stack, epp, say)
            say(f"3/3 idle: back to zero after the {LLAMA.model.grace_s:g}s grace period")
            started = time.monotonic()
            await _wait(
                lambda: stack.deployment_state(LLAMA.model.name)[2] == 0,
                ZERO_TIMEOUT_S,
                "back at zero",
            )
            say(f"    at zero {time.monotonic() - started:.1f}s after the load ended")
    finally:
        await access.close()
    figures["final_replicas"] = stack.deployment_state(LLAMA.model.name)[2]
    return figures


def problems_of(figures: dict[str, Any]) -> list[str]:
    """What the story's figures say went wrong (none: it showed what it should)."""
    found = []
    if figures.get("first_status") != 200:
        found.append("the first request was not answered 200")
    if not figures.get("wake_s", 99.0) < 1.0:
        found.append("the wake did not begin within a second of the request")
    if figures.get("succeeded") != figures.get("requests") or not figures.get("requests"):
        found.append("not every request under load was answered 200")
    if not figures.get("peak_ready", 0) > 1:
        found.append("no more than one replica was ready at the peak")
    if figures.get("final_replicas") != 0:
        found.append("replicas remained at the end")
    return found


async def pool_main(args: argparse.Namespace) -> int:
    session = DemoSession.open(args)
    stack = SandboxStack(session.directory, StackSettings(example=None, activator=False))
    figures: dict[str, Any] = {}

    async def story() -> None:
        nonlocal figures
        figures = await play(stack, session.console.event)

    failure = await session.play(stack, f"Starting the sandbox (in {session.directory})", story)
    if failure is None:
        return INTERRUPTED
    problems = [failure] if failure else []
    if figures:
        problems += problems_of(figures)
    for problem in problems[1 if failure else 0 :]:
        session.console.event(f"tidal demo: {problem}")
    return session.finish(problems, {**figures, "problems": problems})


if __name__ == "__main__":  # run through ``tidal demo --story inferencepool`` normally
    sys.exit(asyncio.run(pool_main(argparse.Namespace(dir=None, json=False))))
