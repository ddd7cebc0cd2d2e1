"""A target's state has one owner: who changes it, checked on a running activator.

docs/architecture.md ("Inside the activator") says a target's live state is
written only through the target's verbs, and those are called from two
modules besides the target's own: the request path (``activator.forwarding``)
and the registry (``activator.routing.registry``), through which the sources,
the scaler link, the prober and the adapter keeper reach a target; and that
the target's parts (its gate, its endpoints, its adapter slots) are changed
only by the target and by one another.

Covers: every call of a writing verb of a Target, a Gate, a TargetEndpoints
or an AdapterSlots during a real activator's life is recorded with the module
that made it, and those modules are the ones the document names. The life
covers the paths that change a target: requests sent at once and held
through a cold start (woken by the scaler link and found by the prober),
a LoRA adapter loaded for a held request and the adapter keeper's reads,
the scaler's word (the activator count, sleeping endpoints), reports, a new
spec and a new list of endpoints from the source, and the target's removal.
The test also checks that each of those paths was taken, so it cannot pass
by missing one.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import pytest

from activator.holding.adapters import AdapterSlots
from activator.holding.gate import Gate
from activator.holding.target import Target
from activator.replicas.readiness import TargetEndpoints
from activator.targets import Adapter
from loadtests.sandbox.servers.lora import LoraParams
from loadtests.sandbox.servers.server import ModelServer, ServerConfig
from tests.integration.activator.helpers import (
    Backend,
    FakeScaler,
    StaticSource,
    free_port,
    running_activator,
    settings,
    spec,
    wait_until,
)

# The verbs that change each object's state, and the modules allowed to call them.
TARGET_VERBS = (
    "configure",
    "set_endpoints",
    "probed",
    "refresh_adapters",
    "take_period",
    "refuse",
    "close",
    "arrive",
    "try_take",
    "take",
    "give_back",
)
TARGET_CALLERS = {"activator.forwarding", "activator.routing.registry", "activator.holding.target"}
PART_VERBS: dict[type[Any], tuple[str, ...]] = {
    Gate: (
        "configure",
        "take_period",
        "arrive",
        "try_acquire",
        "admit",
        "acquire",
        "release",
        "dispatch",
        "settle",
        "close",
        "refuse",
    ),
    TargetEndpoints: ("update", "set_probe_result", "mark_down", "recompute"),
    AdapterSlots: ("configure", "close", "pick", "ready", "take_refusals", "done", "refresh"),
}
PART_CALLERS = {
    "activator.holding.target",
    "activator.holding.gate",
    "activator.holding.adapters",
    "activator.replicas.readiness",
}


@contextlib.contextmanager
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, set[str]]]:
    """Who calls each writing verb: ``"Class.verb" -> {calling modules}``."""
    callers: dict[str, set[str]] = defaultdict(set)

    def wrap(cls: type[Any], verb: str) -> None:
        original: Callable[..., Any] = getattr(cls, verb)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_globals.get("__name__", "?")
            callers[f"{cls.__name__}.{verb}"].add(caller)
            return original(*args, **kwargs)

        monkeypatch.setattr(cls, verb, recorded)

    for verb in TARGET_VERBS:
        wrap(Target, verb)
    for cls, verbs in PART_VERBS.items():
        for verb in verbs:
            wrap(cls, verb)
    yield callers


async def test_only_the_request_path_and_the_registry_change_a_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    warm = await Backend(name="warm").start()
    cold_port = free_port()
    cold = Backend(name="cold")
    scaler = await FakeScaler(activators=2).start()
    lora = ModelServer(
        ServerConfig(
            engine="vllm",
            model="base",
            port=0,
            speedup=10.0,
            seed=1,
            lora=LoraParams(
                enable_lora=True, max_loras=1, load_time_s=1.0, allow_runtime_updating=True
            ),
        )
    )
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(scaler.stop)
        stack.push_async_callback(warm.stop)
        stack.push_async_callback(cold.stop)
        await stack.enter_async_context(lora)
        callers = stack.enter_context(recording(monkeypatch))
        adapters = (Adapter("sql", "org/sql"),)
        targets = [
            spec("default/warm", warm.endpoint, path_prefix="/warm", container_concurrency=4),
            spec("default/cold", f"127.0.0.1:{cold_port}", ready=False, path_prefix="/cold"),
            spec(
                "default/base",
                f"127.0.0.1:{lora.port}",
                path_prefix=None,
                models=("base",),
                adapters=adapters,
            ),
        ]
        source = StaticSource(*targets)
        cfg = settings(scaler, adapter_refresh_s=0.2)
        act = await stack.enter_async_context(running_activator(source, cfg))
        client = await stack.enter_async_context(aiohttp.ClientSession())
        url = f"http://127.0.0.1:{act.data_port}"
        # Sent at once; held through a cold start (the scaler told, the prober finds it).
        async with client.get(f"{url}/warm/x") as resp:
            assert resp.status == 200
        held = asyncio.create_task(client.get(f"{url}/cold/x"))
        await wait_until(lambda: bool(scaler.activations))
        await cold.start(cold_port)
        async with await held as resp:
            assert resp.status == 200
        # A LoRA adapter loaded while its request is held; the keeper reads the replica.
        body = {"model": "sql", "prompt": "hi", "max_tokens": 1}
        async with client.post(f"{url}/v1/completions", json=body) as resp:
            assert resp.status == 200, await resp.text()
        # The scaler's word: the activator count came with the reports; sleeping now.
        scaler.sleeping = {"default/warm": [warm.endpoint]}
        await wait_until(lambda: not act.registry.targets["default/warm"].ready)
        scaler.sleeping = {}
        await wait_until(lambda: act.registry.targets["default/warm"].ready)
        # A new spec and a new endpoint list, then a target removed.
        source.set(targets[0], targets[1], spec("default/base", path_prefix=None, models=("b",)))
        source.set(targets[0], targets[1])
        await wait_until(lambda: act.registry.word.activators == 2)

    for verb in ("Target.take", "Target.try_take", "Target.give_back", "Target.arrive"):
        outside = callers[verb] - {"activator.holding.target"}
        assert outside == {"activator.forwarding"}, (verb, callers[verb])
    for verb in ("configure", "set_endpoints", "probed", "refresh_adapters", "take_period"):
        assert callers[f"Target.{verb}"], f"the test never took the path through Target.{verb}"
    writers = set().union(*(callers[f"Target.{v}"] for v in TARGET_VERBS))
    assert writers <= TARGET_CALLERS, writers - TARGET_CALLERS
    for cls, verbs in PART_VERBS.items():
        for verb in verbs:
            got = callers[f"{cls.__name__}.{verb}"]
            assert got <= PART_CALLERS, (f"{cls.__name__}.{verb}", got - PART_CALLERS)
    assert callers["AdapterSlots.ready"] and callers["AdapterSlots.refresh"]
