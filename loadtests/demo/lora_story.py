"""``tidal demo --story lora``: ten LoRA adapters on two replicas, loaded on demand.

Starts the sandbox (emulated cluster, ``tidal scaler``, ``tidal activator``)
with one fake-vLLM base model on two replicas (``--enable-lora --max-loras
2``, runtime loading on, one second per load) that declares ten adapters
(``routing.tidal.dev/adapters``) with a short keep-alive. Through the
activator, as an OpenAI client would call it (plain HTTP with aiohttp: the
story needs nothing beyond what ``make demo`` installs):

1. ``GET /v1/models`` lists the ten adapters with their parent;
2. the first request for an adapter no replica has loaded waits for one
   load; the next ones go to the replica that has it, with no load;
3. every adapter, twice, all at once: more adapters than the four slots,
   and not one 404;
4. idle past the keep-alive, every adapter is unloaded from both replicas
   (read from the replicas' own model lists);
5. an undeclared adapter is a 404 ``no_adapter`` naming the declared ones.

Exit status 0 when each step holds; ``--json`` ends with the figures as one
line of JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import aiohttp

from loadtests.demo.session import INTERRUPTED, DemoSession
from loadtests.sandbox.cluster.defaults import apply_defaults
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.stack import SandboxStack, StackSettings

__all__ = ["ADAPTERS", "BASE", "LOAD_S", "lora_main", "play"]

DEPLOYMENTS = by_group_version_plural("apps", "v1", "deployments")
SERVICES = by_group_version_plural("", "v1", "services")
PODS = by_group_version_plural("", "v1", "pods")

LOAD_S = 1.0
KEEP_ALIVE_S = 15.0
ADAPTERS = tuple(f"lora-{i}" for i in range(10))
BASE = ExampleModel(
    name="base",
    model="base-8b",
    startup_delay_s=2.0,
    min_scale=2,
    max_scale=2,
    cold_start_timeout_s=60.0,
    extra_annotations={
        "routing.tidal.dev/adapters": ", ".join(f"{a}=org/{a}" for a in ADAPTERS),
        "autoscaling.tidal.dev/adapter-keep-alive": f"{KEEP_ALIVE_S:g}s",
    },
)


def _deployment() -> dict[str, Any]:
    deployment = BASE.deployment()
    deployment["spec"]["replicas"] = 2
    template = deployment["spec"]["template"]
    template["metadata"]["annotations"]["sandbox.tidal.dev/args"] = (
        f"--enable-lora --max-loras 2 --lora-load-time {LOAD_S:g}s"
    )
    template["spec"]["containers"][0]["env"] = [
        {"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "true"}
    ]
    return deployment


def _apply(stack: SandboxStack) -> None:
    assert DEPLOYMENTS is not None
    assert SERVICES is not None
    for rtype, obj in ((SERVICES, BASE.service()), (DEPLOYMENTS, _deployment())):
        apply_defaults(obj, rtype.kind, creating=True)
        stack.cluster.store.create(rtype, obj)


async def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout_s:.0f}s: {what}")
        await asyncio.sleep(0.2)


async def _loaded(stack: SandboxStack, session: aiohttp.ClientSession) -> dict[str, list[str]]:
    """Each replica's adapters, from its own ``GET /v1/models``."""
    assert PODS is not None
    pods, _ = stack.cluster.store.list(PODS, namespace="default")
    out: dict[str, list[str]] = {}
    for pod in pods:
        ip = (pod.get("status") or {}).get("podIP")
        if not ip or (pod["metadata"].get("labels") or {}).get("app") != BASE.name:
            continue
        async with session.get(f"http://{ip}:8000/v1/models") as resp:
            cards = (await resp.json())["data"]
        out[pod["metadata"]["name"]] = sorted(c["id"] for c in cards if c.get("parent"))
    return out


class _Client:
    """The two OpenAI calls the story makes, over one aiohttp session."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        self.session = session
        self.base_url = base_url

    async def ask(self, model: str) -> tuple[int, float]:
        """One completion of one token for ``model``: its status and how long it took."""
        started = time.monotonic()
        body = {"model": model, "prompt": "hello", "max_tokens": 1}
        async with self.session.post(f"{self.base_url}/v1/completions", json=body) as resp:
            await resp.read()
            return resp.status, time.monotonic() - started

    async def adapters(self) -> list[str]:
        """The listed adapters, once the activator has learned the target from its watch."""
        for _ in range(100):
            async with self.session.get(f"{self.base_url}/v1/models") as resp:
                cards = (await resp.json()).get("data", []) if resp.status == 200 else []
            adapters = [c["id"] for c in cards if c.get("parent") == BASE.model]
            if adapters:
                return adapters
            await asyncio.sleep(0.1)
        return []


async def play(stack: SandboxStack, say: Any) -> dict[str, Any]:
    """The story on a started stack; the figures it observed."""
    _apply(stack)
    say(f"{BASE.target}: two replicas, two adapter slots each, ten adapters declared")
    await _wait(lambda: stack.deployment_state(BASE.name)[1] == 2, 60, "both replicas ready")
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        client = _Client(session, stack.activator_url)
        listed = await client.adapters()
        say(f"GET /v1/models: {len(listed)} adapters with parent {BASE.model}")
        await asyncio.sleep(2.5)  # one adapter refresh: the activator knows the slots
        first_status, first_s = await client.ask(ADAPTERS[0])
        say(f"{ADAPTERS[0]}: HTTP {first_status} after {first_s:.2f}s (one {LOAD_S:g}s load)")
        nexts = [await client.ask(ADAPTERS[0]) for _ in range(3)]
        next_s = max(s for _, s in nexts)
        say(f"{ADAPTERS[0]} again, 3 times: at most {next_s:.2f}s (where it is loaded)")
        burst = await asyncio.gather(*(client.ask(a) for a in ADAPTERS * 2))
        statuses = sorted({status for status, _ in burst})
        not_found = sum(1 for status, _ in burst if status == 404)
        say(f"all ten adapters, twice, at once: statuses {statuses}, {not_found} 404s")
        during = await _loaded(stack, session)
        say(f"loaded now: {during}")
        say(f"idle now; the keep-alive is {KEEP_ALIVE_S:g}s")
        await asyncio.sleep(KEEP_ALIVE_S + 5.0)
        after = await _loaded(stack, session)
        say(f"loaded after the keep-alive: {after}")
        unknown_status, _ = await client.ask("lora-x")
        say(f"lora-x (not declared): HTTP {unknown_status}")
    return {
        "listed": len(listed),
        "first_status": first_status,
        "first_s": round(first_s, 3),
        "next_s": round(next_s, 3),
        "burst_statuses": statuses,
        "burst_404s": not_found,
        "loaded_during": during,
        "loaded_after": after,
        "undeclared_status": unknown_status,
    }


def problems_in(figures: dict[str, Any]) -> list[str]:
    problems = []
    if figures["listed"] != len(ADAPTERS):
        problems.append(f"GET /v1/models listed {figures['listed']} adapters, not ten")
    if figures["first_status"] != 200 or not figures["first_s"] <= LOAD_S + 0.1:
        problems.append("the first request was not answered after one load")
    if not figures["next_s"] < LOAD_S:
        problems.append("a later request waited for a load")
    if figures["burst_statuses"] != [200]:
        problems.append(f"the burst got statuses {figures['burst_statuses']}")
    if any(figures["loaded_after"].values()):
        problems.append("adapters idle past the keep-alive were still loaded")
    if figures["undeclared_status"] != 404:
        problems.append("an undeclared adapter was not a 404")
    return problems


async def lora_main(args: argparse.Namespace) -> int:
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
        problems += problems_in(figures)
    for problem in problems[1 if failure else 0 :]:
        session.console.event(f"tidal demo: {problem}")
    return session.finish(problems, {**figures, "problems": problems})


if __name__ == "__main__":  # run through ``tidal demo --story lora`` normally
    sys.exit(asyncio.run(lora_main(argparse.Namespace(dir=None, json=False))))
