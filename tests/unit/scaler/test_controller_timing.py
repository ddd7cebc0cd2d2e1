"""When the controller records and decides: arrivals, rechecks, pokes, leadership, logs.

Covers:
- samples go into the windows when a source brings news, at its arrival time,
  never at a tick: ticks with no arrival record nothing (the reading goes
  stale, so it cannot lower the scale);
- an arrival records only the signals its source feeds (a Prometheus answer
  records GPU utilization, an activator report the counts), and a target
  that appeared since the last tick is recorded too;
- ``recheck_after_s`` shorter than the tick interval gets a decision of its
  own, while the controller runs (and none after it stops);
- a follower keeps its copy of the status annotation in step with the
  leader's, and the tick a poke brings on winning the Lease writes at once
  (that a poke brings a tick at once: tests/unit/scaler/test_ticking.py);
- every scaling action is logged at INFO with target, from -> to, reason,
  mode and signals; an invalid annotation at WARNING.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

import pytest

from scaler.policy.api import Decision, Mode, Observation, Reason, ScalingConfig, SignalKind
from scaler.policy.decide import PolicyState
from tests.unit.scaler.fakes import FakeSource, ManualTicker, ManualTimers, deployment, reading
from tests.unit.scaler.test_controller import KEY, ScriptedPolicy, World, idle, loaded


async def test_ticks_alone_record_nothing() -> None:
    policy = ScriptedPolicy()
    w = World(replicas=1, policy=policy)
    w.set(loaded("activator", 40.0), loaded("scrape", 40.0))
    await w.controller.tick(w.now)  # learns the target
    w.signals.arrived("activator", now=w.now)
    w.now += 2
    await w.controller.tick(w.now)
    reading = policy.observations[-1].signals[SignalKind.CONCURRENCY]
    assert (reading.stable, reading.fresh) == (40.0, True)
    # No news for 10 s: the readings at the ticks are the one old sample, now stale.
    for _ in range(5):
        w.now += 2
        await w.controller.tick(w.now)
    reading = policy.observations[-1].signals[SignalKind.CONCURRENCY]
    assert reading.stable == 40.0
    assert reading.fresh is False


async def test_arrival_records_only_what_its_source_feeds() -> None:
    policy = ScriptedPolicy()
    prometheus = FakeSource("prometheus")
    w = World(replicas=1, policy=policy, prometheus=True, extra_sources=(prometheus,))
    w.set(loaded("activator", 4.0), idle("scrape"))
    prometheus.readings[KEY] = reading(fresh=True, reporters=1, gpu_utilization=0.9)
    # Recorded before any tick: the target is picked up at its first arrival.
    assert w.signals.arrived("activator", now=w.now) == 1
    windows = w.signals.windows(KEY)
    assert windows is not None
    got = windows.reading(
        SignalKind.GPU_UTILIZATION, w.now, stable_window_s=60, panic_window_s=6, fresh_within_s=5
    )
    assert got.stable is None  # an activator report says nothing about GPUs
    w.signals.arrived("prometheus", now=w.now + 1)
    got = windows.reading(
        SignalKind.GPU_UTILIZATION,
        w.now + 1,
        stable_window_s=60,
        panic_window_s=6,
        fresh_within_s=5,
    )
    assert got.stable == pytest.approx(0.9)


class RecheckingPolicy(ScriptedPolicy):
    def decide(
        self, *, config: ScalingConfig, observation: Observation, state: PolicyState, now: float
    ) -> tuple[Decision, PolicyState]:
        self.observations.append(observation)
        return Decision(desired=1, reason=Reason.HOLDING, mode=Mode.STABLE, recheck_after_s=0.05), (
            state
        )


async def _settle(done: Callable[[], bool]) -> None:
    """Let spawned tasks run (no time passes): a bounded number of loop turns."""
    for _ in range(100):
        if done():
            return
        await asyncio.sleep(0)


async def test_recheck_before_next_tick_gets_its_own_decision() -> None:
    policy = RecheckingPolicy()
    timers = ManualTimers()
    w = World(
        replicas=1,
        policy=policy,
        tick_interval_s=3600,
        call_later=timers.call_later,
    )
    w.set(idle("activator"), idle("scrape"))
    ticker = ManualTicker()
    task = asyncio.create_task(w.controller.run(ticker))
    try:
        ticker.push(w.now)
        await _settle(lambda: len(timers.pending()) == 1)
        # One tick, then a recheck 50 ms later that asked for another, and so on.
        for n in (1, 2):
            [timer] = timers.pending()
            assert timer.delay_s == pytest.approx(0.05)
            timers.fire_all()
            await _settle(lambda n=n: w.controller.rechecks_run == n and bool(timers.pending()))
        assert w.controller.ticks == 1
        assert w.controller.rechecks_run >= 2
        assert len(policy.observations) >= 3
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    # Stopped: the recheck still scheduled was called off, and nothing more runs.
    before = len(policy.observations)
    assert timers.fire_all() == 0
    await asyncio.sleep(0)
    assert len(policy.observations) == before


async def test_recheck_later_than_next_tick_is_left_to_the_tick() -> None:
    policy = RecheckingPolicy()
    timers = ManualTimers()
    w = World(
        replicas=1,
        policy=policy,
        tick_interval_s=0.01,
        call_later=timers.call_later,
    )
    w.set(idle("activator"), idle("scrape"))
    ticker = ManualTicker()
    task = asyncio.create_task(w.controller.run(ticker))
    try:
        ticker.push(w.now)
        await _settle(lambda: w.controller.ticks == 1)
        assert policy.observations  # the tick decided, asking for a recheck in 50 ms
        assert timers.scheduled == []
        assert w.controller.rechecks_run == 0
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_follower_tracks_status_and_poke_acts_at_once() -> None:
    policy = ScriptedPolicy()
    policy.desired = 3
    w = World(replicas=1, policy=policy, leader=False)
    w.set(loaded("activator", 40.0), loaded("scrape", 40.0))
    await w.run_for(4)
    assert w.scale.calls == []
    # The leader (elsewhere) writes 3 and its status; the follower's copy follows.
    status = {
        "desired": 3,
        "mode": "stable",
        "onDemand": 3,
        "spot": 0,
        "reason": "ScaledUp",
        "lastChangeTime": "then",
    }
    w.cluster.put(
        deployment(replicas=3, annotations={"autoscaling.tidal.dev/status": json.dumps(status)})
    )
    await w.run_for(2)
    # Now it leads and the load wants 4: the tick its poke brings writes at once.
    policy.desired = 4
    w.leader.is_leader = True
    ticker = ManualTicker()
    task = asyncio.create_task(w.controller.run(ticker))
    try:
        ticker.push(w.now)  # what IntervalTicker.poke does on winning the Lease
        await _settle(lambda: bool(w.scale.scales))
        assert w.controller.ticks == 4  # three from run_for, one from the poke
        assert w.scale.scales == [(KEY, 4)]
        assert w.events.reasons() == ["ScaledUp"]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_follower_taking_over_rewrites_no_unchanged_status() -> None:
    policy = ScriptedPolicy()
    policy.desired = 3
    status = {
        "desired": 3,
        "mode": "stable",
        "onDemand": 3,
        "spot": 0,
        "reason": "ScaledUp",
        "lastChangeTime": "then",
    }
    w = World(replicas=3, policy=policy, leader=False)
    w.set(idle("activator"), idle("scrape"))
    await w.run_for(2)
    w.cluster.put(
        deployment(replicas=3, annotations={"autoscaling.tidal.dev/status": json.dumps(status)})
    )
    await w.run_for(2)
    w.leader.is_leader = True
    await w.run_for(4)
    assert w.scale.calls == []


async def test_scaling_and_invalid_annotations_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="scaler")
    w = World(replicas=1)
    w.set(loaded("activator", 64.0), loaded("scrape", 64.0))
    await w.run_for(2)
    [scaled] = [r for r in caplog.records if "scaled" in r.getMessage()]
    assert scaled.levelno == logging.INFO
    text = scaled.getMessage()
    assert KEY in text
    assert "1 -> 4" in text
    assert "ScaledUp" in text
    assert "mode panic" in text or "mode stable" in text
    assert "concurrency stable=64" in text
    caplog.clear()
    w.cluster.put(deployment(replicas=4, annotations={"autoscaling.tidal.dev/max-scale": "x"}))
    await w.run_for(2)
    [bad] = [r for r in caplog.records if "invalid annotations" in r.getMessage()]
    assert bad.levelno == logging.WARNING
    assert "autoscaling.tidal.dev/max-scale" in bad.getMessage()
