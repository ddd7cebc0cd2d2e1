"""The controller and the warm tier together, with fakes at every seam.

Covers:
- a target idle past sleep-after has its replicas put to sleep (leader only);
- an activation wakes one within the call, and demand for more replicas than
  are awake wakes the next one;
- a wake that fails falls back to one more replica from zero (an ``Activated``
  scale write), within max-scale.
"""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from scaler.metrics import Metrics
from scaler.warm.tier import WarmSettings
from tests.unit.scaler.fakes import (
    FakeCluster,
    FakeEvents,
    FakeLeader,
    FakeScaleTarget,
    FakeSource,
    deployment,
    pod,
    wire,
)
from tests.unit.scaler.test_controller import KEY, idle, loaded
from tests.unit.scaler.warm.test_tier import FakeReplicas

# The background sleeps, wakes and Events get their turns in looptime's
# simulated time: a step's short wait lets them run without real waiting.
pytestmark = pytest.mark.looptime

ANNOTATIONS = {
    "autoscaling.tidal.dev/sleep-after": "10s",
    "autoscaling.tidal.dev/max-scale": "3",
    "autoscaling.tidal.dev/scale-down-delay": "0s",
}


class WarmWorld:
    def __init__(self, *, leader: bool = True) -> None:
        self.cluster = FakeCluster()
        pods = (pod("llama-1", ip="10.0.0.1"), pod("llama-2", ip="10.0.0.2"))
        self.cluster.put(deployment(replicas=2, annotations=ANNOTATIONS), pods)
        self.scale = FakeScaleTarget(self.cluster)
        self.events = FakeEvents()
        self.activator = FakeSource("activator")
        self.scrape = FakeSource("scrape")
        self.replicas = FakeReplicas()
        self.leader = FakeLeader(is_leader=leader)
        self.now = 1000.0
        self.wired = wire(
            self.cluster,
            sources=[self.activator, self.scrape],
            scale_target=self.scale,
            events=self.events,
            leader=self.leader,
            metrics=Metrics(CollectorRegistry()),
            clock=lambda: self.now,
            warm_calls=self.replicas,
            warm_settings=WarmSettings(handoff_s=0.0),
        )
        self.controller = self.wired.controller
        assert self.controller.warm is not None
        self.warm = self.controller.warm

    def set(self, activator: float, buffered: float = 0.0) -> None:
        reading = (
            loaded("activator", activator, buffered=buffered)
            if activator or buffered
            else idle("activator")
        )
        self.activator.readings[KEY] = reading
        self.scrape.readings[KEY] = idle("scrape")

    async def run_for(self, seconds: float, step_s: float = 2.0) -> None:
        end = self.now + seconds
        while self.now < end:
            self.now += step_s
            for source in (self.activator, self.scrape):
                self.wired.signals.arrived(source.name, now=self.now)
            await self.controller.tick(self.now)
            await asyncio.sleep(0.01)  # the sleeps' and wakes' own tasks


async def test_idle_sleeps_then_activation_wakes_one_and_demand_wakes_the_next() -> None:
    w = WarmWorld()
    w.set(0.0)
    await w.run_for(14)
    assert w.warm.pool.not_routable() == {KEY: ["10.0.0.1:8000", "10.0.0.2:8000"]}
    assert w.warm.pool.asleep_count(KEY) == 2
    assert w.scale.scales == []  # sleeping is not scaling: both pods stay
    w.set(0.0, buffered=1.0)
    assert await w.controller.activate(KEY, now=w.now)
    assert w.warm.pool.asleep_count(KEY) == 1
    w.set(30.0)  # 30 in flight at 16 per replica: two wanted
    await w.run_for(4)
    assert w.warm.pool.asleep_count(KEY) == 0
    assert [c for c, _ in w.replicas.calls].count("warm_up") == 2


async def test_a_follower_puts_nothing_to_sleep() -> None:
    w = WarmWorld(leader=False)
    w.set(0.0)
    await w.run_for(14)
    assert w.warm.pool.asleep_count(KEY) == 0
    assert w.replicas.calls == []


async def test_a_failed_wake_adds_a_replica_from_zero() -> None:
    w = WarmWorld()
    w.set(0.0)
    await w.run_for(14)
    w.replicas.fail_wake = True
    w.set(0.0, buffered=1.0)
    assert await w.controller.activate(KEY, now=w.now)
    assert w.scale.scales == [(KEY, 3)]
    await asyncio.sleep(0.01)  # the Event goes out in the background
    assert "WakeFailed" in w.events.reasons()


async def test_losing_the_lease_forgets_the_sleeping_list_and_a_new_term_asks_the_pods() -> None:
    w = WarmWorld()
    w.set(0.0)
    await w.run_for(14)
    assert w.warm.pool.asleep_count(KEY) == 2
    w.leader.is_leader = False
    await w.run_for(2)
    assert w.warm.pool.not_routable() == {}
    w.leader.is_leader = True
    await w.run_for(2)
    assert w.warm.pool.asleep_count(KEY) == 2  # learned again from /is_sleeping
