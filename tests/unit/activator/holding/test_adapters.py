"""A target's adapters on its replicas (activator.holding.adapters), with a fake replica.

Covers: requests arriving together for one adapter share one load; an
evicted adapter keeps its slot until the replica confirms the unload, and a
look at the replica that began before the unload ended does not bring it
back (one freed slot is never handed out twice); the keep-alive unloads an
idle adapter; a refused load takes the replica off for that adapter and is
kept for the scaler's Event; a load goes on when the request that started it
leaves; requests waiting on a load of an adapter the declaration drops are
answered at once; what the replicas there are can never serve is said at
once, with why: an adapter no longer declared, no replica with LoRA support
(naming the fix, reported once a minute), every replica refusing it; at
zero, or with a replica still starting, nothing is said (one to come may
serve it).
"""

from __future__ import annotations

import asyncio

import pytest

from activator.holding.adapters import AdapterSlots
from activator.holding.hold_errors import AdapterLoadFailed, AdapterWithdrawn, LoraUnsupported
from activator.replicas.lora_client import LoadRefused
from activator.replicas.lora_state import LoraInfo
from activator.replicas.readiness import EndpointTracker
from activator.targets import Adapter, Endpoint


class FakeReplica:
    """A replica's adapters; unloads wait for ``release`` when ``hold_unloads`` is set."""

    def __init__(self, loaded: set[str], *, refuse: bool = False) -> None:
        self.loaded = loaded
        self.refuse = refuse
        self.lora = True
        self.loads = 0
        self.hold_unloads = False
        self.release = asyncio.Event()

    async def load(self, base_url: str, name: str, source: str) -> None:
        await asyncio.sleep(0)
        if self.refuse:
            raise LoadRefused(f"{base_url} refused to load {name!r}: 404 Not Found")
        self.loads += 1
        self.loaded.add(name)

    async def unload(self, base_url: str, name: str) -> bool:
        if self.hold_unloads:
            await self.release.wait()
        self.loaded.discard(name)
        return True

    async def look(self, base_url: str) -> tuple[frozenset[str], LoraInfo | None]:
        info = LoraInfo(2, frozenset(), frozenset()) if self.lora else None
        return frozenset(self.loaded), info


ADAPTERS = tuple(Adapter(n, f"org/{n}") for n in "abcd")
TRACKER = EndpointTracker(Endpoint("10.0.0.1", 8000, ready=True))


def _slots(replica: FakeReplica, now: list[float]) -> AdapterSlots:
    return AdapterSlots(ADAPTERS, 60.0, replica, clock=lambda: now[0], target="ns/t")


async def test_together_one_load_and_an_evicted_slot_is_not_handed_out_twice() -> None:
    replica, now = FakeReplica(set()), [0.0]
    slots = _slots(replica, now)
    await slots.refresh([TRACKER], {TRACKER.key})  # learns max_lora 2
    for name in ("a", "a", "b"):
        assert slots.pick(name, [TRACKER], 0) is TRACKER
    await asyncio.gather(slots.ready("a", TRACKER), slots.ready("a", TRACKER))
    await slots.ready("b", TRACKER)
    assert replica.loads == 2  # the two requests for a shared one load
    for name in ("a", "a", "b"):
        slots.done(name, TRACKER)
    now[0] = 10.0
    # c evicts a (least recently used); its unload is slow.
    replica.hold_unloads = True
    assert slots.pick("c", [TRACKER], 0) is TRACKER
    loading = asyncio.create_task(slots.ready("c", TRACKER))
    await asyncio.sleep(0)
    # A look while a is still on the replica: a must not come back as loaded.
    await slots.refresh([TRACKER], {TRACKER.key})
    assert slots.pick("d", [TRACKER], 0) is TRACKER  # evicts b, the only idle one
    replica.release.set()
    await loading
    await slots.ready("d", TRACKER)
    assert replica.loaded == {"c", "d"}  # never three on a two-slot replica


async def test_keep_alive_and_refusals() -> None:
    replica, now = FakeReplica({"a"}), [0.0]
    slots = _slots(replica, now)
    await slots.refresh([TRACKER], {TRACKER.key})  # a: first seen now, idle from now
    now[0] = 61.0
    assert await slots.refresh([TRACKER], {TRACKER.key}) == [(TRACKER.label, "a")]
    assert replica.loaded == set()
    replica.refuse = True
    assert slots.pick("b", [TRACKER], 0) is TRACKER
    with pytest.raises(LoadRefused, match="refused to load 'b'"):
        await slots.ready("b", TRACKER)
    slots.done("b", TRACKER)
    assert slots.pick("b", [TRACKER], 0) is None  # off for b on this replica
    assert slots.take_refusals() == ["http://10.0.0.1:8000 refused to load 'b': 404 Not Found"]


async def test_a_load_goes_on_when_its_request_leaves_and_a_withdrawal_answers_at_once() -> None:
    replica, now = FakeReplica(set()), [0.0]
    slots = _slots(replica, now)
    assert slots.pick("a", [TRACKER], 0) is TRACKER
    waiting = asyncio.create_task(slots.ready("a", TRACKER))
    await asyncio.sleep(0)
    waiting.cancel()  # the client left while its adapter loaded
    await asyncio.gather(waiting, return_exceptions=True)
    for _ in range(3):
        await asyncio.sleep(0)
    assert replica.loaded == {"a"} and slots.loaded_on(TRACKER.key) == {"a"}
    slots.done("a", TRACKER)
    replica.hold_unloads = True  # b's load must first evict a (one slot): it stays under way
    assert slots.pick("b", [TRACKER], 0) is TRACKER
    loading = asyncio.create_task(slots.ready("b", TRACKER))
    await asyncio.sleep(0)
    slots.configure(ADAPTERS[2:], 60.0)  # a and b no longer declared
    with pytest.raises(AdapterWithdrawn, match="'b' is no longer declared for ns/t"):
        await loading
    slots.done("b", TRACKER)
    replica.release.set()
    for _ in range(3):
        await asyncio.sleep(0)  # the load itself ends on its own


async def test_what_the_replicas_can_never_serve_is_said_at_once() -> None:
    replica, now = FakeReplica(set()), [0.0]
    slots = _slots(replica, now)
    starting = EndpointTracker(Endpoint("10.0.0.2", 8000, ready=False))
    assert slots.never("a", [TRACKER], [TRACKER]) is None  # not read yet: it may load it
    assert slots.never("a", [], [starting]) is None  # at zero: one to come may
    assert isinstance(slots.never("x", [TRACKER], [TRACKER]), AdapterWithdrawn)
    replica.lora = False
    await slots.refresh([TRACKER], {TRACKER.key})
    assert slots.never("a", [TRACKER], [TRACKER, starting]) is None  # one still starting
    unsupported = slots.never("a", [TRACKER], [TRACKER])
    assert isinstance(unsupported, LoraUnsupported)
    assert "--enable-lora" in unsupported.detail
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING=true" in unsupported.detail
    now[0] = 30.0
    assert isinstance(slots.never("b", [TRACKER], [TRACKER]), LoraUnsupported)
    assert len(slots.take_refusals()) == 1  # reported for an Event once a minute, not per request
    now[0] = 61.0
    slots.never("a", [TRACKER], [TRACKER])
    assert len(slots.take_refusals()) == 1
    # LoRA on, but the replica refuses the adapter: every ready one did.
    replica.lora, replica.refuse = True, True
    await slots.refresh([TRACKER], {TRACKER.key})
    assert slots.pick("a", [TRACKER], 0) is TRACKER
    with pytest.raises(LoadRefused):
        await slots.ready("a", TRACKER)
    slots.done("a", TRACKER)
    failed = slots.never("a", [TRACKER], [TRACKER])
    assert isinstance(failed, AdapterLoadFailed)
    assert "refused to load 'a': 404 Not Found" in failed.detail
