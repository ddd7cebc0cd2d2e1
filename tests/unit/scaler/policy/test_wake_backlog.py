"""A wake's backlog is sized as a backlog (scaler.policy.wake_backlog), on simulated time.

Covers, through ``decide`` with the concurrency policy:
- the story: 2 requests/s from zero, 10 s cold start, 4 per replica, requests
  that take 0.7 s: the backlog held through the wake (up to 20) asks for no
  replica beyond the one starting, before or after it is ready, and the
  windows' memory of it asks for none later (before: 4 replicas);
- a load the first replica cannot carry still scales up within seconds of it
  being ready: the arrivals since then are counted, not the backlog;
- the wake ends: a stable window after the backlog drained, the windows'
  averages count again as before (a steady load of 4 replicas' worth asks for 4);
- utilizations are the replicas' own and are never capped.
The SLO path: a backlog the replicas starting will drain asks for no more.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from scaler.policy import Observation, PolicyState, SignalKind, decide
from scaler.policy.api import Demand, LoadTotals, SignalReading
from scaler.policy.slo.load import LoadHistory
from scaler.policy.slo.phases import PhaseFit
from scaler.policy.slo.sizing import SizingGoal, replicas_for
from scaler.policy.wake_backlog import WakeBacklog, count_demand
from simulator.harness import config

C = SignalKind.CONCURRENCY
KV = SignalKind.KV_CACHE_UTILIZATION
CFG = config(target_concurrency=4.0)


@dataclass
class Wake:
    """One target woken from zero at t=0 by a steady 2 requests/s, each taking ``service_s``
    once a replica is ready at ``cold_s``; decided every 2 s as the controller does.

    Concurrency samples are kept per second; the windows' averages are the means
    of the last 60 s (stable) and 6 s (panic), as the hub's windows read them.
    """

    rate: float = 2.0
    service_s: float = 0.7
    cold_s: float = 10.0
    cfg: object = CFG
    samples: list[float] = field(default_factory=list)
    spec: int = 0
    peak: int = 0
    state: PolicyState = field(default_factory=lambda: PolicyState.initial(-1000.0))
    messages: list[str] = field(default_factory=list)

    def in_system(self, t: float) -> float:
        """Requests held or in flight at ``t``: all held until ready, then the backlog is
        gone after one service time and the arrivals keep ``rate x service_s`` in flight."""
        if t < self.cold_s:
            return self.rate * t
        if t < self.cold_s + self.service_s:
            return self.rate * self.cold_s + self.rate * (t - self.cold_s)
        return self.rate * self.service_s

    def observe(self, t: float) -> Observation:
        window = self.samples[-60:]
        panic = self.samples[-6:]
        ready = 1 if t >= self.cold_s and self.spec > 0 else 0
        ready = min(self.spec, ready + (1 if t >= self.cold_s + 10 else 0) * (self.spec - 1))
        load = LoadTotals(arrivals=self.rate * t)
        return Observation(
            ready_replicas=ready,
            spec_replicas=self.spec,
            signals={C: SignalReading(sum(window) / len(window), sum(panic) / len(panic), True)},
            demand=Demand(busy=True, all_sources_fresh=True),
            activation_requested=t == 0,
            load=load,
            concurrency_now=self.samples[-1],
        )

    def run(self, until_s: float) -> Wake:
        for t in range(int(until_s) + 1):
            self.samples.append(self.in_system(float(t)))
            if t % 2:
                continue
            decision, self.state = decide(
                config=self.cfg,  # type: ignore[arg-type]
                observation=self.observe(float(t)),
                state=self.state,
                now=float(t),
            )
            self.spec = decision.desired
            self.peak = max(self.peak, self.spec)
            self.messages.append(decision.message)
        return self


def test_the_story_starts_one_replica_where_the_backlog_asked_for_four() -> None:
    wake = Wake().run(80)
    assert wake.peak == 1
    assert any("backlog for the replicas starting" in m for m in wake.messages)


def test_a_load_the_first_replica_cannot_carry_scales_up_soon_after_it_is_ready() -> None:
    # 20 requests/s of 1 s each need 20 in flight: 5 replicas at 4 each.
    wake = Wake(rate=20.0, service_s=1.0).run(16)
    assert wake.spec >= 5
    assert wake.state.wake is not None and wake.state.wake.ready_s == 10.0


def test_the_wake_ends_a_stable_window_after_the_drain() -> None:
    wake = Wake(rate=2.0, service_s=8.0).run(200)  # 16 in flight: 4 replicas
    assert wake.state.wake is None
    assert wake.spec == 4


def test_utilizations_and_quiet_times_are_left_alone() -> None:
    obs = Observation(
        ready_replicas=0,
        spec_replicas=1,
        signals={},
        demand=Demand(busy=True, all_sources_fresh=True),
    )
    wake = WakeBacklog.start(0.0)
    assert count_demand(KV, 0.9, 0.9, wake=wake, observation=obs, config=CFG, now=1.0) == (
        0.9,
        0.9,
        None,
    )
    assert count_demand(C, 9.0, 12.0, wake=None, observation=obs, config=CFG, now=1.0) == (
        9.0,
        12.0,
        None,
    )
    assert count_demand(C, 9.0, 12.0, wake=wake, observation=obs, config=CFG, now=1.0)[2] == 1.0


def test_a_wake_to_zero_replicas_is_over() -> None:
    obs = Observation(
        ready_replicas=0,
        spec_replicas=0,
        signals={},
        demand=Demand(busy=False, all_sources_fresh=True),
    )
    assert WakeBacklog.start(0.0).follow(obs, CFG, 5.0) is None


def test_slo_sizing_leaves_a_backlog_to_the_replicas_starting() -> None:
    # 2 requests/s of 1,000 prompt tokens over the last 10 s, 20 of them waiting.
    history = LoadHistory()
    for t in range(10):
        history = history.add(float(t), float(t + 1), 2_000.0, 2.0)
    goal = SizingGoal(
        slo_ttft_s=2.0,
        attainment=0.99,
        max_replicas=10,
        prefill_per_s=1_000.0,
        fit=PhaseFit(),
        cold_start_s=10.0,
        backlog=20.0,
        ready=0,
    )
    asked_none = replicas_for(history, goal).replicas
    asked_five = replicas_for(history, replace(goal, asked=5)).replicas
    # Two replicas carry the 2 replica-seconds of work a second; draining the 20 s of
    # work waiting within a cold start asks for two more, unless the five starting
    # will clear it (three to spare: under 7 s).
    assert asked_none == 4
    assert asked_five == replicas_for(history, replace(goal, backlog=0.0)).replicas == 2
