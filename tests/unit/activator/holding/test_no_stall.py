"""No request waits behind one that cannot go, and none waits for what can never come.

The invariant (docs/adapters.md, "When a request cannot be served"): with a
ready replica that has room, a request for the base model is handed an
endpoint in the instant it arrives (no simulated time passes), whatever LoRA
adapter requests, departed clients and changes of the declaration came
before. Checked over random sequences of 10,000 steps on the loop's
simulated time, for a fleet whose replicas have one adapter slot each and
refuse some loads, and for one whose replicas cannot load adapters at all
(vLLM without ``--enable-lora``). Each step is one of: a base request, a
request for a declared adapter, a client leaving (held, loading or being
answered), a new declaration (adapters added, removed, all removed), a
refresh of what the replicas have loaded, a replica turning ready or not;
then simulated time passes. After every step:

- no base request is held while a ready replica has room, and every base
  request that arrived while one had room was sent in that instant;
- no request is held for an adapter the declaration no longer lists;
- where no replica can load adapters, no adapter request is held once the
  replicas have been read (each was answered at once, naming the cause).

The test also counts that the sequences reach the cases it is about (base
requests sent past held adapter requests, departures, withdrawals), so it
cannot pass by never meeting them.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass

import pytest

from activator.holding.adapter_keeper import AdapterKeeper
from activator.holding.hold_errors import HoldError
from activator.holding.request_class import HoldClass
from activator.holding.target import HoldTicket, Target
from activator.replicas.lora_client import LoadRefused
from activator.replicas.lora_state import LoraInfo
from activator.routing.registry import Registry
from activator.targets import Adapter, Discovered, Endpoint, TargetSpec

# Time moves as soon as nothing is ready to run (looptime waits 42 idle loop cycles by
# default before it moves the clock: 10,000 steps of it would cost most of this test).
pytestmark = pytest.mark.looptime(noop_cycles=1)

NAME = "ns/llama"
ADAPTERS = ("a", "b", "c")
LIMIT = 2  # container-concurrency: two requests per replica
STEPS = 10_000
PLACES = (HoldClass(1, "", 1), HoldClass(0, "t1", 1), HoldClass(0, "t2", 1))


class FakeReplicas:
    """The replicas' side of LoRA (the AdapterIO seam): loads take time and some are
    refused; a replica with ``max_loras`` 0 publishes no LoRA support."""

    def __init__(self, rng: random.Random, max_loras: dict[str, int]) -> None:
        self.rng = rng
        self.max_loras = max_loras
        self.loaded: dict[str, set[str]] = {url: set() for url in max_loras}

    async def load(self, base_url: str, name: str, source: str) -> None:
        await asyncio.sleep(self.rng.choice((0.2, 0.5, 1.0)))
        if not self.max_loras[base_url]:
            raise LoadRefused(f"{base_url} refused to load {name!r}: 400 LoRA is not enabled")
        if name == "c" and base_url.endswith(":2"):
            raise LoadRefused(f"{base_url} refused to load {name!r}: 404 no adapter found")
        self.loaded[base_url].add(name)

    async def unload(self, base_url: str, name: str) -> bool:
        await asyncio.sleep(0.05)
        self.loaded[base_url].discard(name)
        return True

    async def look(self, base_url: str) -> tuple[frozenset[str], LoraInfo | None]:
        slots = self.max_loras[base_url]
        info = LoraInfo(slots, frozenset(), frozenset()) if slots else None
        return frozenset(self.loaded[base_url]), info


@dataclass
class Request:
    adapter: str | None
    arrived: float
    room: bool  # a ready replica had room when it arrived
    behind: bool  # an adapter request was held when it arrived
    task: asyncio.Task[None] | None = None
    taken_at: float | None = None
    outcome: str = "waiting"


class World:
    """One target with two replicas behind a real registry, gate and adapter slots."""

    def __init__(self, seed: int, max_loras: tuple[int, int]) -> None:
        self.rng = random.Random(seed)
        urls = [f"http://10.0.0.{i}:{i}" for i in (1, 2)]
        self.io = FakeReplicas(self.rng, dict(zip(urls, max_loras, strict=True)))
        self.registry = Registry(rng=random.Random(seed), adapter_io=self.io)
        self.ready = [True, True]
        self.declared: tuple[str, ...] = ("a", "b")
        self.keeper = AdapterKeeper(self.registry.refresh_adapters, interval_s=1.0)
        self.requests: list[Request] = []
        self.seen: Counter[str] = Counter()
        self.read_since_change = False
        self.apply()

    def apply(self) -> None:
        endpoints = tuple(
            Endpoint(f"10.0.0.{i}", i, name=f"pod-{i}", ready=up)
            for i, up in zip((1, 2), self.ready, strict=True)
        )
        spec = TargetSpec(
            name=NAME,
            models=("llama",),
            container_concurrency=LIMIT,
            cold_start_timeout_s=30.0,
            max_buffered=50,
            adapters=tuple(Adapter(n, f"org/{n}") for n in self.declared),
        )
        self.registry.apply({NAME: Discovered(spec, endpoints)})

    @property
    def target(self) -> Target:
        return self.registry.targets[NAME]

    def room(self) -> bool:
        gate = self.target.gate
        return any(t.in_flight < gate.limit for t in gate.endpoints.ready)

    def waiting(self, *, adapter: bool) -> list[Request]:
        return [
            r
            for r in self.requests
            if r.outcome == "waiting" and (r.adapter is not None) == adapter
        ]

    async def serve(self, request: Request) -> None:
        target = self.target  # read once, as the proxy does when it routes
        place = self.rng.choice(PLACES)
        loop = asyncio.get_running_loop()
        ticket = HoldTicket(target.spec, lambda: place, adapter=request.adapter)
        try:
            tracker = await target.take(ticket)
        except HoldError as exc:
            request.outcome = type(exc).__name__
            return
        except asyncio.CancelledError:
            request.outcome = "left"
            raise
        request.taken_at, request.outcome = loop.time(), "sent"
        try:
            await asyncio.sleep(self.rng.choice((0.1, 0.5, 2.0)))  # its answer streams
        finally:
            target.give_back(tracker, ticket)

    def arrive(self, adapter: str | None) -> None:
        loop = asyncio.get_running_loop()
        behind = bool(self.waiting(adapter=True))
        request = Request(adapter, loop.time(), room=self.room(), behind=behind)
        request.task = loop.create_task(self.serve(request))
        self.requests.append(request)

    async def step(self) -> None:
        rng, roll = self.rng, self.rng.random()
        if roll < 0.3:
            self.arrive(None)
        elif roll < 0.55 and self.declared:
            self.arrive(rng.choice(self.declared))
        elif roll < 0.65:
            left = [r for r in self.requests if r.task is not None and not r.task.done()]
            if left:
                rng.choice(left).task.cancel()  # type: ignore[union-attr]
                self.seen["departure"] += 1
        elif roll < 0.70:
            before = set(self.declared)
            self.declared = tuple(n for n in ADAPTERS if rng.random() < 0.6)
            self.seen["withdrawn"] += len(before - set(self.declared))
            self.read_since_change = self.read_since_change and bool(before)
            self.apply()
        elif roll < 0.76:
            await self.keeper.once()
            self.read_since_change = all(self.ready)
        elif roll < 0.80:
            i = rng.randrange(2)
            self.ready[i] = not self.ready[i]
            self.read_since_change = False
            self.apply()
        await asyncio.sleep(rng.choice((0.001, 0.05, 0.3, 1.0)))
        for _ in range(6):  # let what the step set going settle, with no time passing
            await asyncio.sleep(0)

    def check(self, step: int, lora: bool) -> None:
        now = asyncio.get_running_loop().time()
        for r in self.requests:
            if r.adapter is None and r.room and r.outcome in ("waiting", "sent"):
                at = r.taken_at if r.taken_at is not None else now
                assert at == r.arrived, (
                    f"step {step}: a base request with room waited {at - r.arrived}s"
                )
        if self.room():
            held = self.waiting(adapter=False)
            assert not held, f"step {step}: {len(held)} base request(s) held beside a free replica"
        for r in self.waiting(adapter=True):
            assert r.adapter in self.declared, f"step {step}: held for withdrawn {r.adapter!r}"
        if not lora and self.read_since_change:
            held = self.waiting(adapter=True)
            assert not held, f"step {step}: {len(held)} adapter request(s) held, none can load"
        self.requests = [r for r in self.requests if r.task is not None and not r.task.done()]

    def count(self) -> None:
        for r in self.requests:
            if r.task is not None and r.task.done() and r.outcome != "waiting":
                self.seen[r.outcome] += 1
                if r.adapter is None and r.behind and r.outcome == "sent":
                    self.seen["base sent past a held adapter request"] += 1

    async def close(self) -> None:
        tasks = [r.task for r in self.requests if r.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.registry.end_drain()


@pytest.mark.parametrize(
    ("max_loras", "lora"),
    [pytest.param((1, 1), True, id="one-slot-each"), pytest.param((0, 0), False, id="no-lora")],
)
async def test_a_base_request_with_room_is_sent_at_once_whatever_came_before(
    max_loras: tuple[int, int], lora: bool
) -> None:
    world = World(seed=47, max_loras=max_loras)
    try:
        for step in range(STEPS):
            await world.step()
            world.count()
            world.check(step, lora)
    finally:
        await world.close()
    seen = world.seen
    assert seen["base sent past a held adapter request"] > 50, seen
    assert seen["departure"] > 100 and seen["withdrawn"] > 50, seen
    if lora:
        assert seen["AdapterWithdrawn"] > 0 and seen["AdapterLoadFailed"] > 0, seen
    else:
        assert seen["LoraUnsupported"] > 0, seen
