"""``tidal demo --story warm``: a wake from sleep beside a cold start.

Starts the sandbox (emulated cluster, ``tidal scaler``, ``tidal activator``)
with two copies of the same fake-vLLM model, differing in one annotation:

- **cold**: scale-to-zero only; it is at zero replicas;
- **warm**: ``autoscaling.tidal.dev/sleep-after``; it starts with one
  replica, which the scaler puts to sleep once idle past sleep-after.

Once the warm model sleeps, one request goes to each at the same moment,
through the activator. The cold one waits for a cold start; the warm one for
a wake (and a one-token warm-up). Both latencies are measured on the
client's clock; the wake's own duration is the scaler's (``/v1/targets``).

Exit status 0 when both are answered and the wake is under half the cold
start; ``--json`` ends with the figures as one line of JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import aiohttp

from loadtests.demo.session import INTERRUPTED, DemoSession
from loadtests.demo.stage import Stage
from loadtests.sandbox.cluster.defaults import apply_defaults
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.stack import SandboxStack, StackSettings

__all__ = ["COLD", "WARM", "warm_main"]

DEPLOYMENTS = by_group_version_plural("apps", "v1", "deployments")
SERVICES = by_group_version_plural("", "v1", "services")
EVENTS = by_group_version_plural("", "v1", "events")

COLD_START_S = 10.0
COLD = ExampleModel(
    name="cold",
    model="cold-8b",
    startup_delay_s=COLD_START_S,
    max_scale=1,
    grace_s=600.0,
    cold_start_timeout_s=120.0,
)
WARM = ExampleModel(
    name="warm",
    model="warm-8b",
    startup_delay_s=COLD_START_S,
    max_scale=1,
    grace_s=600.0,
    cold_start_timeout_s=120.0,
    extra_annotations={"autoscaling.tidal.dev/sleep-after": "5s"},
)


def _deployment(example: ExampleModel, *, replicas: int, sleep_mode: bool) -> dict[str, Any]:
    deployment = example.deployment()
    deployment["spec"]["replicas"] = replicas
    if sleep_mode:
        template = deployment["spec"]["template"]
        template["metadata"]["annotations"]["sandbox.tidal.dev/args"] = "--enable-sleep-mode"
        template["spec"]["containers"][0]["env"] = [{"name": "VLLM_SERVER_DEV_MODE", "value": "1"}]
    return deployment


def _apply(stack: Stage, example: ExampleModel, deployment: dict[str, Any]) -> None:
    assert DEPLOYMENTS is not None
    assert SERVICES is not None
    for rtype, obj in ((SERVICES, example.service()), (DEPLOYMENTS, deployment)):
        apply_defaults(obj, rtype.kind, creating=True)
        stack.cluster.store.create(rtype, obj)


def _reasons(stack: Stage, name: str) -> list[str]:
    assert EVENTS is not None
    items, _ = stack.cluster.store.list(EVENTS, namespace="default")
    return [
        e["reason"]
        for e in items
        if e.get("involvedObject", {}).get("name") == name
        and e.get("source", {}).get("component") == "tidal-scaler"
    ]


async def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout_s:.0f}s: {what}")
        await asyncio.sleep(0.2)


async def _request(session: aiohttp.ClientSession, url: str, model: str) -> tuple[int, float]:
    body = {"model": model, "prompt": "hello", "max_tokens": 16, "ignore_eos": True}
    started = time.monotonic()
    for _ in range(100):  # the activator learns the targets from its watch: 404 until then
        async with session.post(f"{url}/v1/completions", json=body) as resp:
            await resp.read()
            if resp.status != 404:
                return resp.status, time.monotonic() - started
        await asyncio.sleep(0.1)
    return 404, time.monotonic() - started


async def play(stack: Stage, say: Any) -> dict[str, Any]:
    """The story on a started stack; the figures it observed."""
    _apply(stack, COLD, _deployment(COLD, replicas=0, sleep_mode=False))
    _apply(stack, WARM, _deployment(WARM, replicas=1, sleep_mode=True))
    say(f"{WARM.target}: one replica starting ({COLD_START_S:g}s cold start)")
    say(f"{COLD.target}: at zero replicas")
    await _wait(lambda: stack.deployment_state(WARM.name)[1] == 1, 60, "the warm replica ready")
    say(f"{WARM.target}: ready; idle now, it sleeps after 5s (vLLM sleep mode, level 1)")
    await _wait(lambda: "Slept" in _reasons(stack, WARM.name), 60, "the warm model asleep")
    await asyncio.sleep(2.0)  # the activator has had the leader's answer
    say("asleep: its GPU memory is free, its pod and process stay")
    say("one request to each model, at the same moment, through the activator")
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        (cold_status, cold_s), (warm_status, warm_s) = await asyncio.gather(
            _request(session, stack.addresses.activator_url, COLD.model),
            _request(session, stack.addresses.activator_url, WARM.model),
        )
        async with session.get(f"{stack.addresses.scaler_url}/v1/targets") as resp:
            targets = (await resp.json()).get("targets") or []
    view: dict[str, Any] = next((t for t in targets if t.get("target") == WARM.target), {})
    wake_s = (view.get("warm") or {}).get("lastWakeSeconds")
    say(f"{COLD.target}: HTTP {cold_status} after {cold_s:.2f}s (cold start)")
    say(
        f"{WARM.target}: HTTP {warm_status} after {warm_s:.2f}s (wake from sleep"
        + (f", {wake_s:.2f}s of it the wake and warm-up" if wake_s is not None else "")
        + ")"
    )
    return {
        "cold_status": cold_status,
        "cold_s": round(cold_s, 3),
        "warm_status": warm_status,
        "warm_s": round(warm_s, 3),
        "wake_s": None if wake_s is None else round(wake_s, 3),
    }


async def warm_main(args: argparse.Namespace) -> int:
    session = DemoSession.open(args)
    stack = SandboxStack(session.directory, StackSettings(example=None))
    figures: dict[str, Any] = {}

    async def story() -> None:
        nonlocal figures
        figures = await play(stack, session.console.event)

    failure = await session.play(stack, f"Starting the sandbox (in {session.directory})", story)
    if failure is None:
        return INTERRUPTED
    problems = [failure] if failure else []
    if figures:
        if figures["cold_status"] != 200 or figures["warm_status"] != 200:
            problems.append("a request was not answered with 200")
        elif not figures["warm_s"] < figures["cold_s"] / 2:
            problems.append("the wake was not under half the cold start")
    for problem in problems[1 if failure else 0 :]:
        session.console.event(f"tidal demo: {problem}")
    return session.finish(problems, {**figures, "problems": problems})


if __name__ == "__main__":  # run through ``tidal demo --story warm`` normally
    sys.exit(asyncio.run(warm_main(argparse.Namespace(dir=None, json=False))))
