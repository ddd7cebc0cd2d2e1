"""The gate with classes and tenants: order through a wake, shedding, refusal at zero, counts.

Covers what the gate adds to the fair hold queue's rules (tested in
``tests/unit/groundwork/test_fair_hold_queue.py``): held futures are released
by class, then by tenant, when an endpoint turns ready; at ``max_buffered`` a
newcomer sheds a lower class's request, whose caller gets :class:`Shed`, and
the gate counts it, by class, once that caller has left (no second request
shed for the same place meanwhile), by class and cause; a sheddable request
with ``shed_at_zero`` is refused at once while nothing is ready, and still
wakes the target; refused while the target wakes, each says when to retry:
the expected time left to a ready replica (the first wake's estimate, then
the last wake measured, less what has passed); held counts by class follow
the requests.

Time is the loop's, faked by looptime.
"""

from __future__ import annotations

import asyncio

import pytest

from activator.holding.gate import BufferFull, Gate, Shed
from activator.holding.request_class import HoldClass
from activator.holding.wake_clock import FIRST_WAKE_ESTIMATE_S
from activator.targets import Endpoint

pytestmark = pytest.mark.looptime

EP = Endpoint("10.0.0.1", 80, name="pod-1", ready=True)
CRITICAL = HoldClass(1, "", 1)
STANDARD = HoldClass(0, "", 1)
SHEDDABLE = HoldClass(-1, "", 1)


async def _serve_in_order(gate: Gate, places: list[tuple[str, HoldClass]]) -> list[str]:
    order: list[str] = []

    async def waiter(name: str, place: HoldClass) -> None:
        tracker = await gate.acquire(60, place)
        order.append(name)
        await asyncio.sleep(0)
        gate.release(tracker)

    tasks = [asyncio.create_task(waiter(n, p)) for n, p in places]
    await asyncio.sleep(0)
    gate.endpoints.update([EP])  # the wake ends: one replica, one request at a time
    await asyncio.gather(*tasks)
    return order


async def test_a_wake_releases_critical_first_then_tenants_in_turns() -> None:
    gate = Gate("ns/t", max_buffered=100, limit=1)
    places = [(f"a{i}", HoldClass(0, "a", 1)) for i in range(3)]
    places += [("b0", HoldClass(0, "b", 1)), ("c0", CRITICAL), ("s0", SHEDDABLE)]
    order = await _serve_in_order(gate, places)
    assert order == ["c0", "a0", "b0", "a1", "a2", "s0"]


async def test_a_full_buffer_sheds_the_sheddable_and_counts_it_once() -> None:
    woken: list[str] = []
    gate = Gate("ns/t", max_buffered=2, limit=0, wake=woken.append)
    low = [asyncio.create_task(gate.acquire(60, SHEDDABLE)) for _ in range(2)]
    await asyncio.sleep(0)
    assert gate.held_by_class == {"critical": 0, "standard": 0, "sheddable": 2}
    # Two standard ones in the same loop turn: each sheds one, no more.
    high = [asyncio.create_task(gate.acquire(60, STANDARD)) for _ in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(BufferFull):
        await gate.acquire(60, STANDARD)  # only standard held: nothing to displace
    results = await asyncio.gather(*low, return_exceptions=True)
    assert [type(r) for r in results] == [Shed, Shed]
    assert [(r.cause, r.retry_after_s) for r in results if isinstance(r, Shed)] == [
        ("higher_class", FIRST_WAKE_ESTIMATE_S)
    ] * 2
    assert gate.sheds.total == {("sheddable", "higher_class"): 2}
    assert (gate.sheds.take(), gate.sheds.take()) == (2, 0)  # the report's count resets
    assert gate.held_by_class["standard"] == 2 and gate.buffered == 2
    gate.endpoints.update([EP])
    got = await asyncio.gather(*high)
    assert len(got) == 2 and gate.buffered == 0
    assert woken == ["ns/t"] * 4  # each held request while nothing was ready asked


async def test_shed_at_zero_refuses_a_sheddable_request_but_wakes_the_target() -> None:
    woken: list[str] = []
    gate = Gate("ns/t", max_buffered=10, limit=1, wake=woken.append)
    loop = asyncio.get_running_loop()
    with pytest.raises(Shed) as shed:
        await gate.acquire(60, SHEDDABLE, shed_at_zero=True)
    assert (shed.value.cause, shed.value.retry_after_s) == ("at_zero", FIRST_WAKE_ESTIMATE_S)
    assert woken == ["ns/t"] and gate.buffered == 0
    assert gate.sheds.total == {("sheddable", "at_zero"): 1}
    standard = asyncio.create_task(gate.acquire(60, STANDARD, shed_at_zero=True))
    await asyncio.sleep(10)  # ten seconds into the wake
    assert gate.buffered == 1  # standard is held as ever
    with pytest.raises(Shed) as shed:
        await gate.acquire(60, SHEDDABLE, shed_at_zero=True)
    assert shed.value.retry_after_s == FIRST_WAKE_ESTIMATE_S - 10
    gate.endpoints.update([EP])  # the wake took 10 s
    await standard
    gate.endpoints.update([])  # the next wake, 4 s in: 6 s left
    await asyncio.sleep(0)
    held = asyncio.create_task(gate.acquire(60, STANDARD))
    await asyncio.sleep(4)
    with pytest.raises(Shed) as shed:
        await gate.acquire(60, SHEDDABLE, shed_at_zero=True)
    assert shed.value.retry_after_s == 6
    assert loop.time() == pytest.approx(14)
    gate.endpoints.update([EP])
    await held  # in flight: the one replica is at its limit
    # With a replica ready, a sheddable request is held like any other when busy.
    busy = asyncio.create_task(gate.acquire(60, SHEDDABLE, shed_at_zero=True))
    await asyncio.sleep(0)
    assert gate.buffered == 1
    busy.cancel()
    await asyncio.gather(busy, return_exceptions=True)
