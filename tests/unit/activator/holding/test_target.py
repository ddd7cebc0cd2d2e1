"""A target as one owner: the scaler's word read, not copied; a request keeps its spec.

Covers: which endpoints sleep and how many activators report are kept once,
in the registry's ScalerWord: a target created after the word came reads
it too, a change reaches every target (a sleeping replica leaves and rejoins
the ready set, the per-replica limit follows the count), and no target keeps
a copy; a held request is served under the spec it started with, though the
target's spec changes while it waits.

Time is the loop's, faked by looptime.
"""

from __future__ import annotations

import asyncio

import pytest

from activator.holding.gate import ColdStartTimeout
from activator.holding.request_class import ANONYMOUS
from activator.holding.target import HoldTicket, Target
from activator.routing.registry import Registry
from activator.targets import Discovered, Endpoint, TargetSpec

pytestmark = pytest.mark.looptime

EP1 = Endpoint("10.0.0.1", 80, name="pod-1", ready=True)
EP2 = Endpoint("10.0.0.2", 80, name="pod-2", ready=True)


def test_the_scalers_word_is_read_by_every_target_and_copied_by_none() -> None:
    registry = Registry()
    registry.set_sleeping({"ns/b": [EP1.key]})  # before ns/b is known
    registry.set_activators(2)
    spec_a = TargetSpec(name="ns/a", container_concurrency=8)
    registry.apply({"ns/a": Discovered(spec_a, (EP1, EP2))})
    a = registry.targets["ns/a"]
    assert a.gate.limit == 4 and len(a.endpoints.ready) == 2
    spec_b = TargetSpec(name="ns/b", container_concurrency=8)
    registry.apply({"ns/a": Discovered(spec_a, (EP1, EP2)), "ns/b": Discovered(spec_b, (EP1,))})
    b = registry.targets["ns/b"]
    assert (b.gate.limit, b.endpoints.ready) == (4, ())  # created later: the same word
    registry.set_sleeping({"ns/a": [EP2.key]})
    assert [t.key for t in a.endpoints.ready] == [EP1.key] and b.ready
    registry.set_activators(8)
    assert a.gate.limit == b.gate.limit == 1
    assert a.word is b.word is registry.word  # one copy


async def test_a_held_request_keeps_the_spec_it_started_with() -> None:
    loop = asyncio.get_running_loop()
    target = Target(TargetSpec(name="ns/t", cold_start_timeout_s=1.0))
    ticket = HoldTicket(target.spec, lambda: ANONYMOUS)
    held = asyncio.create_task(target.take(ticket))
    await asyncio.sleep(0)
    target.configure(TargetSpec(name="ns/t", cold_start_timeout_s=30.0))
    started = loop.time()
    with pytest.raises(ColdStartTimeout):
        await held
    assert loop.time() - started == pytest.approx(1.0)  # its spec's timeout, not the new one
    assert target.spec.cold_start_timeout_s == 30.0
