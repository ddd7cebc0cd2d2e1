"""The gate: FIFO hand-off, bounds, timeouts, cancellation, shares of cc.

Covers: fast path with no waiting; holding and hand-off in arrival order
when an endpoint turns ready; BufferFull past ``max_buffered``;
ColdStartTimeout; a cancelled waiter frees its place and an endpoint handed
to it at the same instant is given back; container-concurrency as a hard
per-replica bound and its share with several activators; GateClosed when
the target goes; the concurrency integral for reports; a target's readiness
waits (at once, on a change, at the timeout, at its end); the registry hands
each target its limits, cold-start timeout included, and updates them on a
re-apply, keeping the same target and gate, and a readiness flip changes
only the endpoints; a request held with no ready endpoint puts its target
on the wake queue once, however many are held.

Time is the loop's, faked by looptime: timeouts expire in simulated time,
so no test here waits in real time, and the integral steps a clock.
"""

from __future__ import annotations

import asyncio

import pytest

from activator.holding.gate import BufferFull, ColdStartTimeout, Gate, GateClosed
from activator.holding.target import Target
from activator.routing.registry import Registry
from activator.scaler_link.wake_queue import WakeQueue
from activator.targets import Discovered, Endpoint, TargetSpec

pytestmark = pytest.mark.looptime


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make_gate(
    *,
    max_buffered: int = 10,
    cc: int = 0,
    clock: Clock | None = None,
    wake: WakeQueue | None = None,
) -> Gate:
    return Gate(
        "ns/t",
        max_buffered=max_buffered,
        limit=cc,
        clock=clock or Clock(),
        wake=wake.put if wake is not None else None,
    )


EP1 = Endpoint("10.0.0.1", 80, name="pod-1", ready=True)
EP2 = Endpoint("10.0.0.2", 80, name="pod-2", ready=True)


async def test_fifo_hand_off_when_endpoint_turns_ready() -> None:
    gate = make_gate(cc=1)
    order: list[int] = []

    async def waiter(i: int) -> None:
        tracker = await gate.acquire(10)
        order.append(i)
        await asyncio.sleep(0)
        gate.release(tracker)

    tasks = [asyncio.create_task(waiter(i)) for i in range(5)]
    await asyncio.sleep(0)
    assert gate.buffered == 5
    assert gate.in_flight == 0
    gate.endpoints.update([EP1])
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert gate.buffered == 0
    assert gate.in_flight == 0


async def test_buffer_full_and_timeout() -> None:
    gate = make_gate(max_buffered=1)
    loop = asyncio.get_running_loop()
    held_at = loop.time()
    first = asyncio.create_task(gate.acquire(30))
    await asyncio.sleep(0)
    with pytest.raises(BufferFull):
        await gate.acquire(10)
    with pytest.raises(ColdStartTimeout):
        await first
    assert loop.time() - held_at == pytest.approx(30)  # simulated: no real wait
    assert gate.buffered == 0
    gate2 = make_gate(max_buffered=0)
    with pytest.raises(BufferFull):
        await gate2.acquire(1)


async def test_cancelled_waiter_frees_place_and_returns_handed_endpoint() -> None:
    gate = make_gate(max_buffered=1, cc=1)
    task = asyncio.create_task(gate.acquire(10))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert gate.buffered == 0
    # Handed an endpoint and cancelled in the same loop turn.
    task = asyncio.create_task(gate.acquire(10))
    await asyncio.sleep(0)
    gate.endpoints.update([EP1])  # dispatch sets the future's result
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert gate.in_flight == 0
    assert gate.buffered == 0
    assert gate.try_acquire() is not None


async def test_container_concurrency_share() -> None:
    gate = make_gate(cc=4)
    gate.endpoints.update([EP1, EP2])
    taken = [gate.try_acquire() for _ in range(8)]
    assert all(taken)
    assert gate.try_acquire() is None
    assert sorted(gate.pods().values()) == [4, 4]
    for tracker in taken:
        assert tracker is not None
        gate.release(tracker)
    registry = Registry()
    registry.apply({"ns/t": Discovered(TargetSpec(name="ns/t", container_concurrency=4))})
    shared = registry.targets["ns/t"].gate
    assert shared.limit == 4
    registry.set_activators(3)
    assert shared.limit == 1
    registry.set_activators(10)
    assert shared.limit == 1  # never zero: each activator may send one
    with pytest.raises(ValueError, match="max_buffered"):
        make_gate(max_buffered=-1)


async def test_close_fails_waiters() -> None:
    gate = make_gate()
    task = asyncio.create_task(gate.acquire(10))
    await asyncio.sleep(0)
    gate.close()
    with pytest.raises(GateClosed):
        await task
    with pytest.raises(GateClosed):
        await gate.acquire(1)


async def test_concurrency_integral() -> None:
    clock = Clock()
    gate = make_gate(clock=clock)
    gate.endpoints.update([EP1])
    gate.take_period()
    a = gate.try_acquire()
    clock.now += 0.5
    b = gate.try_acquire()
    clock.now += 0.5
    assert a is not None
    assert b is not None
    area, _ = gate.take_period()
    assert area == pytest.approx(0.5 * 1 + 0.5 * 2)


async def test_readiness_wait_outcomes() -> None:
    loop = asyncio.get_running_loop()
    target = Target(TargetSpec(name="ns/t"))
    started = loop.time()
    assert await target.wait_ready(5) is False  # the timeout, in simulated time
    assert loop.time() - started == pytest.approx(5)
    waiter = asyncio.create_task(target.wait_ready(5))
    await asyncio.sleep(0)
    target.set_endpoints([Endpoint("10.0.0.1", 80, ready=False)])
    await asyncio.sleep(0)
    assert not waiter.done()
    target.probed("10.0.0.1:80", True)
    assert await waiter is True  # woken by the change, not the timeout
    assert await target.wait_ready(5) is True  # at once
    endpoints = target.endpoints
    tracker = endpoints.trackers["10.0.0.1:80"]
    taken = target.try_take()
    assert taken is tracker
    target.give_back(taken, down=True)  # a connection to it was refused
    assert not target.ready
    target.probed("10.0.0.1:80", True)
    assert target.endpoints.ready == (tracker,)
    # The source withdrawing readiness drops an earlier probe success.
    target.set_endpoints([Endpoint("10.0.0.1", 80, ready=True)])
    target.set_endpoints([Endpoint("10.0.0.1", 80, ready=False)])
    assert endpoints.ready == ()
    waiter = asyncio.create_task(target.wait_ready(5))
    await asyncio.sleep(0)
    target.close()
    assert await waiter is False  # the target's end wakes it


def test_registry_gives_each_target_its_limits_and_keeps_it() -> None:
    registry = Registry()
    spec = TargetSpec(name="ns/t", max_buffered=5, cold_start_timeout_s=30.0)
    registry.apply({"ns/t": Discovered(spec)})
    target = registry.targets["ns/t"]
    gate = target.gate
    assert (gate.max_buffered, target.spec.cold_start_timeout_s) == (5, 30.0)
    registry.apply({"ns/t": Discovered(spec, (EP1,))})
    assert target.spec is spec and target.endpoints.ready  # a readiness flip: endpoints only
    new = TargetSpec(name="ns/t", max_buffered=7, cold_start_timeout_s=90.0)
    registry.apply({"ns/t": Discovered(new, (EP1,))})
    assert registry.targets["ns/t"] is target  # one owner for good: what it holds survives
    assert (gate.max_buffered, target.spec.cold_start_timeout_s) == (7, 90.0)


async def test_held_with_no_ready_endpoint_wakes_the_target_once() -> None:
    wake = WakeQueue()
    gate = make_gate(cc=1, wake=wake)
    gate.endpoints.update([EP1])
    first = gate.try_acquire()  # a ready endpoint: held requests below are not cold
    assert first is not None
    warm = asyncio.create_task(gate.acquire(10))
    await asyncio.sleep(0)
    assert len(wake) == 0
    gate.endpoints.update([])
    held = [asyncio.create_task(gate.acquire(10)) for _ in range(3)]
    await asyncio.sleep(0)
    assert len(wake) == 1  # three held, one event
    assert await asyncio.wait_for(wake.get(), 1) == "ns/t"
    late = asyncio.create_task(gate.acquire(10))
    await asyncio.sleep(0)
    assert len(wake) == 1  # consumed, then asked again
    gate.close()
    await asyncio.gather(warm, *held, late, return_exceptions=True)


async def test_gate_public_surface_counts_arrivals() -> None:
    gate = make_gate()
    gate.endpoints.update([EP1])
    gate.arrive()
    gate.arrive()
    tracker = gate.try_acquire()
    assert tracker is not None
    gate.release(tracker)
    assert gate.take_period()[1] == 2
    assert gate.take_period()[1] == 0


async def test_draining_endpoint_takes_nothing_new_and_in_flight_finishes() -> None:
    gate = make_gate(cc=2)
    gate.endpoints.update([EP1])
    first = gate.try_acquire()
    assert first is not None
    # The source says the replica is going away (EndpointSlice terminating).
    gate.endpoints.update([Endpoint("10.0.0.1", 80, name="pod-1", ready=False, draining=True)])
    assert gate.endpoints.ready == ()
    assert gate.try_acquire() is None
    gate.endpoints.set_probe_result("10.0.0.1:80", True)  # still listening: no matter
    assert gate.endpoints.ready == ()
    assert gate.pods() == {"pod-1": 1}  # its in-flight request is still counted
    held = asyncio.create_task(gate.acquire(10))
    await asyncio.sleep(0)
    gate.release(first)  # finished: the slot frees, but not for new requests
    await asyncio.sleep(0)
    assert not held.done()
    gate.endpoints.update([EP2])
    tracker = await held
    assert tracker.key == EP2.key
    gate.release(tracker)
