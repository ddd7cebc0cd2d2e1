"""The controller with fakes at every seam and the real pure policy (or a scripted one).

Covers:
- an activation wakes a target at zero to initial-scale within that call
  (one /scale write, an ``Activated`` Event, the status annotation);
- a follower (not the Lease holder) decides and serves views but never writes;
- a bad annotation: one ``InvalidAnnotation`` Warning Event, no scale write,
  until the annotations change; and unsupported signal/engine combinations;
- a routing typo, or a typo in a key of ours: one ``InvalidRouting`` or
  ``UnknownAnnotation`` Warning per set of annotations, with "did you mean",
  and the target scales as usual;
  LoRA adapter loads an activator reports refused: one ``AdapterLoadRefused``
  Warning naming them;
- an API outage (every write fails) neither raises nor stops later writes
  (they back off, and resume once the backoff has passed);
- stale or missing data never scales down or to zero, while fresh idleness
  reaches zero after the grace period (``ScaledToZero``, no deletion costs);
  a short request seen only in a report between two ticks restarts that
  grace period;
- pod-deletion-cost is written on the idlest pods before a scale-down;
- the status annotation is written only when its discrete content changes;
- a signal recorded from a partial view (one source stale) reaches the policy
  as not fresh; concurrency is max(activator, server), not their sum;
- the loop runs on an injected ticker; nothing is decided before the
  Deployments have synced; unknown targets are refused on activation.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import pytest
from prometheus_client import CollectorRegistry

from groundwork.kube.errors import ApiUnavailable
from groundwork.rules.stats_report import parse_report
from scaler.app import target_view
from scaler.metrics import Metrics
from scaler.policy.api import (
    Decision,
    Mode,
    Observation,
    Reason,
    ScalingConfig,
    SignalKind,
)
from scaler.policy.decide import PolicyState
from scaler.policy.protocol import InvalidTargetConfig, Policy
from scaler.signals.activator_reports import ActivatorReports
from scaler.signals.base import SourceReading
from scaler.ticking import CallLater
from tests.unit.scaler.fakes import (
    FakeCluster,
    FakeEvents,
    FakeLeader,
    FakeScaleTarget,
    FakeSource,
    ManualTicker,
    deployment,
    pod,
    reading,
    wire,
)

KEY = "default/llama"


def idle(source: str, *, fresh: bool = True) -> SourceReading:
    return reading(fresh=fresh, reporters=1, concurrency=0.0, queue_depth=0.0, busy=False)


def loaded(
    source: str, concurrency: float, *, fresh: bool = True, buffered: float = 0.0
) -> SourceReading:
    return reading(
        fresh=fresh,
        reporters=1,
        concurrency=concurrency,
        queue_depth=buffered,
        busy=concurrency > 0 or buffered > 0,
    )


class World:
    def __init__(
        self,
        *,
        replicas: int = 0,
        annotations: Mapping[str, str] | None = None,
        leader: bool = True,
        policy: Policy | None = None,
        prometheus: bool = False,
        tick_interval_s: float = 2.0,
        call_later: CallLater | None = None,
        extra_sources: tuple[FakeSource, ...] = (),
        reports: ActivatorReports | None = None,
    ) -> None:
        self.cluster = FakeCluster()
        self.cluster.put(deployment(replicas=replicas, annotations=annotations))
        self.scale = FakeScaleTarget(self.cluster)
        self.events = FakeEvents()
        self.leader = FakeLeader(is_leader=leader)
        self.activator = FakeSource("activator")
        self.scrape = FakeSource("scrape")
        self.metrics = Metrics(CollectorRegistry())
        self.now = 1000.0
        self.wired = wire(
            self.cluster,
            policy=policy,
            sources=[reports or self.activator, self.scrape, *extra_sources],
            scale_target=self.scale,
            events=self.events,
            leader=self.leader,
            metrics=self.metrics,
            clock=lambda: self.now,
            gpu_metrics=prometheus,
            tick_interval_s=tick_interval_s,
            wall_time=lambda: f"t={self.now:.0f}",
            call_later=call_later,
        )
        self.controller = self.wired.controller
        self.signals = self.wired.signals

    def set(self, activator: SourceReading | None, scrape: SourceReading | None) -> None:
        self.activator.readings[KEY] = activator
        self.scrape.readings[KEY] = scrape

    async def run_for(self, seconds: float, step_s: float = 2.0) -> None:
        """Each step, both sources bring news (recorded as it arrives), then a tick."""
        end = self.now + seconds
        while self.now < end:
            self.now += step_s
            for source in (self.activator, self.scrape):
                self.signals.arrived(source.name, now=self.now)
            await self.controller.tick(self.now)

    def replicas(self) -> int:
        return self.cluster.snapshots[KEY].deployment.spec_replicas


async def test_activation_wakes_from_zero_within_the_call() -> None:
    w = World(replicas=0)
    w.set(loaded("activator", 0.0, buffered=1.0), idle("scrape"))
    assert await w.controller.activate(KEY, now=w.now)
    assert w.scale.scales == [(KEY, 1)]
    assert w.events.reasons() == ["Activated"]
    status = json.loads(w.scale.statuses[-1][1])
    assert status["desired"] == 1
    assert status["reason"] == "Activated"
    assert status["mode"] == "stable"


async def test_follower_decides_but_never_writes() -> None:
    w = World(replicas=0, leader=False)
    w.set(loaded("activator", 0.0, buffered=1.0), idle("scrape"))
    assert await w.controller.activate(KEY, now=w.now)
    await w.run_for(10)
    assert w.scale.calls == []
    assert w.events.events == []
    [view] = [target_view(t) for t in w.controller.target_states()]
    assert view["desired"] == 1
    assert view["reason"] == "Activated"


async def test_bad_annotation_reported_once_and_scale_left_alone() -> None:
    bad = {"autoscaling.tidal.dev/max-scale": "0", "autoscaling.tidal.dev/window": "2s"}
    w = World(replicas=3, annotations=bad)
    w.set(loaded("activator", 200.0), idle("scrape"))
    await w.run_for(10)
    assert w.scale.calls == []
    [(key, reason, message, warning)] = w.events.events
    assert (key, reason, warning) == (KEY, "InvalidAnnotation", True)
    assert "autoscaling.tidal.dev/max-scale" in message
    assert '"0"' in message
    assert "autoscaling.tidal.dev/window" in message  # every bad key, not just the first
    # Fixed: the target is managed again.
    w.cluster.put(deployment(replicas=3, annotations={}))
    await w.run_for(4)
    assert w.scale.scales
    assert w.scale.scales[-1][1] > 3


async def test_typos_in_keys_reported_once_and_scaling_goes_on() -> None:
    typo = {
        "routing.tidal.dev/model": "llama",
        "routing.tidal.dev/max-buffered": "lots",
        "autoscaling.tidal.dev/max-scal": "3",
    }
    w = World(replicas=1, annotations=typo)
    w.set(loaded("activator", 200.0), idle("scrape"))
    await w.run_for(10)
    routing = [e for e in w.events.events if e[1] == "InvalidRouting"]
    [(key, _, message, warning)] = routing
    assert (key, warning) == (KEY, True)
    assert 'routing.tidal.dev/model: "llama"' in message
    assert "did you mean routing.tidal.dev/models?" in message
    assert 'routing.tidal.dev/max-buffered: "lots"' in message
    [(key, _, message, warning)] = [e for e in w.events.events if e[1] == "UnknownAnnotation"]
    assert (key, warning) == (KEY, True)
    assert 'autoscaling.tidal.dev/max-scal: "3" is not a known key, ignored' in message
    assert "did you mean autoscaling.tidal.dev/max-scale?" in message
    assert "docs/annotations.md" in message and len(message.encode()) < 1024
    assert w.scale.scales and w.scale.scales[-1][1] > 1  # scaled as usual
    # Another change of the annotations, the typo still there: said again, once.
    w.cluster.put(deployment(replicas=w.scale.scales[-1][1], annotations={**typo, "x": "y"}))
    await w.run_for(6)
    assert [e[1] for e in w.events.events].count("InvalidRouting") == 2
    assert [e[1] for e in w.events.events].count("UnknownAnnotation") == 2


@pytest.mark.parametrize(
    ("annotations", "prometheus", "fragment"),
    [
        pytest.param(
            {"autoscaling.tidal.dev/target-gpu-utilization": "70"},
            False,
            "target-gpu-utilization",
            id="gpu-without-prometheus-on-vllm",
        ),
        pytest.param(
            {
                "autoscaling.tidal.dev/engine": "triton",
                "autoscaling.tidal.dev/target-kv-cache-utilization": "80",
            },
            True,
            "target-kv-cache-utilization",
            id="kv-cache-on-triton",
        ),
    ],
)
async def test_unsupported_signal_for_setup_is_invalid(
    annotations: dict[str, str], prometheus: bool, fragment: str
) -> None:
    w = World(
        replicas=1,
        annotations=annotations,
        prometheus=prometheus,
    )
    w.set(idle("activator"), idle("scrape"))
    await w.run_for(2)
    [(_, reason, message, _)] = w.events.events
    assert reason == "InvalidAnnotation"
    assert fragment in message
    assert "allowed" in message
    assert "scale" not in w.scale.calls


async def test_gpu_target_with_prometheus_is_valid() -> None:
    w = World(
        replicas=1,
        annotations={"autoscaling.tidal.dev/target-gpu-utilization": "70"},
        prometheus=True,
    )
    w.set(idle("activator"), idle("scrape"))
    await w.run_for(2)
    assert w.events.events == []


async def test_api_outage_does_not_crash_and_writes_resume() -> None:
    w = World(replicas=1)
    w.scale.fail_with = ApiUnavailable("API server down")
    w.set(loaded("activator", 64.0), loaded("scrape", 64.0))
    await w.run_for(10)  # every write fails; no exception escapes
    assert w.replicas() == 1
    failures = w.metrics.registry.get_sample_value(
        "tidal_scaler_write_failures_total", {"target": KEY}
    )
    assert failures is not None
    assert failures >= 1
    calls = len(w.scale.calls)
    assert calls < 5  # 5 ticks, but failed writes back off instead of retrying each tick
    w.scale.fail_with = None
    await w.run_for(60)  # the longest backoff
    assert w.replicas() >= 4  # 64 concurrent / 16 per replica


@pytest.mark.parametrize(
    ("activator", "scrape"),
    [
        pytest.param(None, None, id="no-sources-at-all"),
        pytest.param(idle("activator", fresh=False), idle("scrape"), id="activator-stale"),
        pytest.param(idle("activator"), idle("scrape", fresh=False), id="scrape-stale"),
        pytest.param(
            reading(fresh=False, reporters=0),
            reading(fresh=False, reporters=0),
            id="both-silent",
        ),
    ],
)
async def test_missing_or_stale_data_never_lowers(
    activator: SourceReading | None, scrape: SourceReading | None
) -> None:
    w = World(replicas=2)
    w.set(activator, scrape)
    await w.run_for(900)  # three grace periods
    assert w.scale.scales == []
    assert w.replicas() == 2


async def test_fresh_idleness_reaches_zero_after_grace() -> None:
    w = World(replicas=2)
    w.set(idle("activator"), idle("scrape"))
    await w.run_for(200)
    assert 0 not in [r for _, r in w.scale.scales]  # grace period (5m) not over
    await w.run_for(400)
    assert w.replicas() == 0
    assert w.events.reasons()[-1] == "ScaledToZero"
    assert w.scale.costs == []  # going to zero ranks nothing


class ScriptedPolicy:
    """Returns the desired count the test sets; records observations."""

    def __init__(self) -> None:
        self.desired = 1
        self.mode = Mode.STABLE
        self.observations: list[Observation] = []

    def parse(self, annotations: Mapping[str, str]) -> ScalingConfig:
        if annotations.get("bad"):
            raise InvalidTargetConfig('bad: "yes" is not allowed; allowed: nothing')
        return ScalingConfig()

    def initial_state(self, now: float) -> PolicyState:
        return PolicyState.initial(now)

    def decide(
        self, *, config: ScalingConfig, observation: Observation, state: PolicyState, now: float
    ) -> tuple[Decision, PolicyState]:
        self.observations.append(observation)
        reason = Reason.STEADY
        if self.desired > observation.spec_replicas:
            reason = Reason.SCALED_UP
        elif self.desired < observation.spec_replicas:
            reason = Reason.SCALED_DOWN
        return Decision(desired=self.desired, reason=reason, mode=self.mode), state


async def test_deletion_cost_on_idlest_pods_before_scale_down() -> None:
    policy = ScriptedPolicy()
    w = World(replicas=3, policy=policy)
    pods = (pod("p1", ip="10.0.0.1"), pod("p2", ip="10.0.0.2", cost=0), pod("p3", ip="10.0.0.3"))
    w.cluster.put(deployment(replicas=3), pods)
    w.activator.readings[KEY] = reading(
        fresh=True,
        reporters=1,
        concurrency=7.0,
        pod_load={"p1": 5.0, "10.0.0.3:8000": 2.0},
    )
    w.scrape.readings[KEY] = reading(
        fresh=True, reporters=3, concurrency=7.0, pod_load={"p1": 4.0, "p2": 0.0}
    )
    policy.desired = 2
    await w.run_for(2)
    assert w.scale.calls[:2] == ["costs", "scale"]  # ranked before the scale-down
    # p2 already has cost 0: not rewritten; p1 busiest (max of views), p3 by ip:port.
    assert w.scale.costs == [("default", {"p1": 5, "p3": 2})]
    assert w.events.reasons() == ["ScaledDown"]


async def test_status_written_only_on_change() -> None:
    policy = ScriptedPolicy()
    w = World(replicas=1, policy=policy)
    w.set(idle("activator"), idle("scrape"))
    await w.run_for(20)
    assert len(w.scale.statuses) == 1  # first decision: no status yet, write it
    policy.mode = Mode.PANIC
    await w.run_for(6)
    assert len(w.scale.statuses) == 2
    policy.desired = 3
    await w.run_for(6)
    assert len(w.scale.statuses) == 3
    last = json.loads(w.scale.statuses[-1][1])
    assert last == {
        "desired": 3,
        "mode": "panic",
        "onDemand": 3,
        "spot": 0,
        "reason": "ScaledUp",
        "lastChangeTime": last["lastChangeTime"],
    }
    assert w.events.reasons() == ["ScaledUp"]


async def test_existing_status_is_not_rewritten_after_restart() -> None:
    policy = ScriptedPolicy()
    status = {
        "desired": 1,
        "mode": "stable",
        "onDemand": 1,
        "spot": 0,
        "reason": "ScaledUp",
        "lastChangeTime": "earlier",
    }
    w = World(
        replicas=1, policy=policy, annotations={"autoscaling.tidal.dev/status": json.dumps(status)}
    )
    w.set(idle("activator"), idle("scrape"))
    await w.run_for(10)
    assert w.scale.statuses == []


@pytest.mark.parametrize(
    ("activator", "scrape", "value", "fresh"),
    [
        pytest.param(loaded("activator", 3.0), loaded("scrape", 5.0), 5.0, True, id="max-not-sum"),
        pytest.param(
            loaded("activator", 9.0), loaded("scrape", 5.0), 9.0, True, id="activator-larger"
        ),
        pytest.param(
            loaded("activator", 3.0),
            loaded("scrape", 5.0, fresh=False),
            5.0,
            False,
            id="server-stale-marks-not-fresh",
        ),
        pytest.param(loaded("activator", 3.0), None, 3.0, True, id="generic-engine-activator-only"),
    ],
)
async def test_combined_concurrency_reaches_policy(
    activator: SourceReading, scrape: SourceReading | None, value: float, fresh: bool
) -> None:
    policy = ScriptedPolicy()
    w = World(replicas=1, policy=policy)
    w.set(activator, scrape)
    await w.run_for(2)
    reading = policy.observations[-1].signals[SignalKind.CONCURRENCY]
    assert reading.stable == value
    assert reading.fresh is fresh


async def test_nothing_decided_before_sync_and_unknown_target_refused() -> None:
    policy = ScriptedPolicy()
    w = World(replicas=1, policy=policy)
    w.cluster.synced = False
    await w.run_for(4)
    assert policy.observations == []
    assert not await w.controller.activate(KEY)
    w.cluster.synced = True
    assert not await w.controller.activate("default/other")
    assert await w.controller.activate(KEY)


async def test_run_uses_injected_ticker() -> None:
    policy = ScriptedPolicy()
    w = World(replicas=1, policy=policy)
    ticker = ManualTicker()
    task = asyncio.create_task(w.controller.run(ticker))
    try:
        for t in (1.0, 2.0, 3.0):
            ticker.push(t)
        for _ in range(100):
            if w.controller.ticks == 3:
                break
            await asyncio.sleep(0)
        assert w.controller.ticks == 3
        assert [o.spec_replicas for o in policy.observations] == [1, 1, 1]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_removed_target_is_forgotten_with_its_metrics() -> None:
    policy = ScriptedPolicy()
    w = World(replicas=1, policy=policy)
    w.set(idle("activator"), idle("scrape"))
    await w.run_for(2)
    labels = {"target": KEY, "capacity_type": "on-demand"}
    assert w.metrics.registry.get_sample_value("tidal_scaler_desired_replicas", labels) == 1
    del w.cluster.snapshots[KEY]
    await w.run_for(2)
    assert w.controller.target_states() == []
    assert w.metrics.registry.get_sample_value("tidal_scaler_desired_replicas", labels) is None


async def test_short_request_between_ticks_restarts_the_grace_period() -> None:
    w = World(
        replicas=1,
        annotations={
            "autoscaling.tidal.dev/window": "6s",
            "autoscaling.tidal.dev/scale-to-zero-grace-period": "10s",
        },
    )
    w.set(idle("activator"), idle("scrape"))
    await w.run_for(8)  # warmed up, idle for 6 s of the 10 s grace period
    assert w.replicas() == 1
    # A report 1 s after a tick shows a short request; by the next tick it is over.
    w.set(loaded("activator", 1.0), idle("scrape"))
    w.signals.arrived("activator", now=w.now + 1)
    w.set(idle("activator"), idle("scrape"))
    busy_at = w.now + 1
    while w.now + 2 < busy_at + 10:
        await w.run_for(2)
        assert w.replicas() == 1, f"went to zero {w.now - busy_at:.0f}s after demand"
    await w.run_for(2)
    assert w.replicas() == 0
    assert w.events.reasons()[-1] == "ScaledToZero"


async def test_refused_adapter_loads_become_one_warning_event() -> None:
    reports = ActivatorReports()  # real reports: what the activator posts
    w = World(replicas=1, reports=reports)
    w.scrape.readings[KEY] = idle("scrape")
    refusal = "http://10.0.0.7:8000 refused to load 'sql-lora': 404 Not Found"
    body = {"activator": "a", "period_s": 1.0, "targets": {KEY: {"adapter_refusals": [refusal]}}}
    reports.record(parse_report(body), now=w.now)
    w.signals.arrived(reports.name, now=w.now)
    await w.run_for(6)
    [(key, _, message, warning)] = [e for e in w.events.events if e[1] == "AdapterLoadRefused"]
    assert (key, message, warning) == (KEY, refusal, True)
