"""SLO-first decisions (scaler.policy.slo.decide) through the policy seam the controller uses.

Covers, stepping a simulated clock with the counters a hub would hand over:
- long prompts make a model scale out, short prompts at the same request
  rate and concurrency do not;
- from zero, an activation wakes it in the same decision;
- a scale-down waits a cold start after the count was last wanted;
- a rarely used model goes to zero once idle, a busy one stays warm, and a
  stale source keeps the count from falling;
- the attainment measured (the servers' first tokens within the objective)
  is reported over the last ten minutes and forgets what is older;
- with the warm tier, an idle model's sleepers stay beside a serving model
  (they cost nothing there) where the keep-alive odds would let it go, and go
  to zero alone on a device as the odds say; the decision reports the count
  the load needs awake, the rest of a peak's floor being headroom asleep;
- without ``slo-ttft`` the per-replica targets decide as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.policy.api import (
    Decision,
    Demand,
    LoadTotals,
    Observation,
    Reason,
    ScalingConfig,
    SignalKind,
    SignalReading,
    Sleepers,
)
from scaler.policy.decide import PolicyState
from scaler.policy.protocol import PurePolicy
from scaler.policy.slo.sizing import lookback_for

COLD_START_S = 60.0
A = "autoscaling.tidal.dev/"


@dataclass
class Model:
    """One target and the counters its activators report, on a simulated clock."""

    annotations: dict[str, str] = field(default_factory=lambda: {A + "slo-ttft": "2s"})
    policy: PurePolicy = field(
        default_factory=lambda: PurePolicy(cold_start_estimate_s=COLD_START_S)
    )
    now: float = 0.0
    spec: int = 1
    totals: LoadTotals = field(default_factory=LoadTotals)
    state: PolicyState = field(default_factory=lambda: PolicyState.initial(-60.0))
    sleepers: Sleepers | None = None

    @property
    def config(self) -> ScalingConfig:
        return self.policy.parse(self.annotations)

    def step(
        self,
        *,
        requests: float = 0.0,
        prompt: int = 0,
        concurrency: float = 0.0,
        fresh: bool = True,
        activation: bool = False,
        seconds: float = 2.0,
        late: float = 0.0,
    ) -> Decision:
        """``late``: how many of the step's first tokens the servers saw past the objective."""
        self.now += seconds
        t = self.totals
        self.totals = LoadTotals(
            arrivals=t.arrivals + requests,
            prompt_tokens=t.prompt_tokens + requests * prompt,
            first_tokens=t.first_tokens + requests,
            prefilled_tokens=t.prefilled_tokens + requests * prompt,
            ttft_counted=t.ttft_counted + requests,
            ttft_within_slo=t.ttft_within_slo + requests - late,
        )
        reading = SignalReading(stable=concurrency, panic=concurrency, fresh=fresh)
        observation = Observation(
            ready_replicas=self.spec,
            spec_replicas=self.spec,
            signals={SignalKind.CONCURRENCY: reading},
            demand=Demand(busy=concurrency > 0 or requests > 0, all_sources_fresh=fresh),
            activation_requested=activation,
            load=self.totals,
            sleepers=self.sleepers,
        )
        decision, self.state = self.policy.decide(
            config=self.config, observation=observation, state=self.state, now=self.now
        )
        self.spec = decision.desired
        return decision


def test_long_prompts_scale_out_and_short_ones_at_the_same_concurrency_do_not() -> None:
    short, long = Model(), Model()
    for _ in range(60):
        # Ten requests a second, 8 in flight either way.
        short.step(requests=20, prompt=200, concurrency=8)
        long.step(requests=20, prompt=6_000, concurrency=8)
    assert short.spec == 1
    assert long.spec >= 5  # 60,000 prompt tokens/s against the 12,000 prior
    assert "prefill binds" in long.state.slo.sizing.why  # type: ignore[union-attr]
    report = long.step(requests=20, prompt=6_000, concurrency=8).slo
    assert report is not None and report.sized_replicas == long.spec
    assert report.as_json()["requests_per_s"] == 10.0


def test_activation_wakes_from_zero_at_once() -> None:
    model = Model(spec=0)
    decision = model.step(activation=True)
    assert (decision.desired, decision.reason) == (1, Reason.ACTIVATED)


def test_scale_down_waits_a_cold_start_after_the_count_was_wanted() -> None:
    model = Model()
    for _ in range(30):
        model.step(requests=20, prompt=6_000, concurrency=8)
    high = model.spec
    # The load drops to a trickle; once the busy minute has left the replay
    # (thirty cold starts) and a cold start has passed, the count falls.
    for _ in range(int((lookback_for(COLD_START_S) + COLD_START_S) / 2) + 5):
        model.step(requests=2, prompt=200, concurrency=1)
    assert model.spec < high
    # After it fell, a rise raises it, and a cold start must pass before it falls again.
    fallen = model.spec
    for _ in range(10):
        model.step(requests=40, prompt=6_000, concurrency=16)
    raised = model.spec
    assert raised > fallen
    for _ in range(int(COLD_START_S / 2) - 1):
        assert model.step(requests=2, prompt=200, concurrency=1).desired >= raised


def test_rare_model_goes_to_zero_and_a_busy_one_stays_warm() -> None:
    rare = Model()
    rare.step(requests=1, prompt=500, concurrency=1)
    # Idle, one request in its whole life: the odds of one within a cold start are low.
    rare.now += 7_200.0
    assert rare.step().reason is Reason.SCALED_TO_ZERO
    busy = Model()
    for _ in range(300):
        busy.step(requests=1, prompt=500, concurrency=1)
        busy.step()
    decision = busy.step()
    assert decision.desired == 1 and decision.reason is not Reason.SCALED_TO_ZERO


def warm(share: float) -> Model:
    annotations = {A + "slo-ttft": "2s", A + "sleep-after": "30s"}
    return Model(annotations=annotations, sleepers=Sleepers(asleep=1, device_share=share))


def test_with_the_warm_tier_a_sleeper_beside_a_serving_model_stays_instead_of_zero() -> None:
    beside, alone = warm(share=0.0), warm(share=1.0)
    for model in (beside, alone):
        model.step(requests=1, prompt=500, concurrency=1)
        model.now += 7_200.0
    kept = beside.step()
    assert (kept.desired, kept.reason) == (1, Reason.STEADY)
    assert "asleep beside a serving model" in kept.message
    # Alone on its device, sleeping costs what staying awake does: the odds decide.
    assert alone.step().reason is Reason.SCALED_TO_ZERO


def test_the_decision_reports_the_count_awake_and_the_floor_above_it_is_headroom() -> None:
    model = warm(share=0.0)
    for _ in range(30):
        model.step(requests=20, prompt=6_000, concurrency=8)
    assert model.spec > 1
    # The load drops: once the peak leaves the replay the load needs fewer awake,
    # while the floor from the peak still holds more; those may sleep.
    headroom = []
    for _ in range(int((lookback_for(COLD_START_S) + 2 * COLD_START_S) / 2)):
        decision = model.step(requests=1, prompt=200, concurrency=1)
        report = decision.slo
        assert report is not None and report.awake_needed is not None
        assert report.awake_needed <= decision.desired
        headroom.append(decision.desired - report.awake_needed)
    assert max(headroom) > 0
    assert Model().step(requests=1, prompt=200, concurrency=1).slo.awake_needed is None  # type: ignore[union-attr]


def test_a_stale_source_keeps_the_count_from_falling() -> None:
    model = Model()
    for _ in range(30):
        model.step(requests=20, prompt=6_000, concurrency=8)
    high = model.spec
    for _ in range(400):
        decision = model.step(fresh=False)
    assert decision.desired == high


def test_measured_attainment_covers_the_last_ten_minutes() -> None:
    model = Model()
    first = model.step().slo
    assert first is not None and first.measured_attainment is None  # nothing counted yet
    for _ in range(150):  # five minutes, 1 in 20 late
        model.step(requests=20, prompt=200, concurrency=2, late=1)
    for _ in range(150):  # five more, none late
        model.step(requests=20, prompt=200, concurrency=2)
    report = model.step(requests=20, prompt=200, concurrency=2).slo
    assert report is not None and report.measured_attainment is not None
    assert abs(report.measured_attainment - (1 - 149 / 6000)) < 1e-9  # one late step left
    assert report.measured_first_tokens == 6000
    assert report.as_json()["measured_attainment"] == round(1 - 149 / 6000, 5)
    for _ in range(150):
        model.step(requests=20, prompt=200, concurrency=2)
    later = model.step(requests=20, prompt=200, concurrency=2).slo
    assert later is not None and later.measured_attainment == 1.0


def test_without_an_objective_the_per_replica_target_decides() -> None:
    model = Model(annotations={})
    for _ in range(40):
        decision = model.step(requests=20, prompt=6_000, concurrency=8)
    assert decision.desired == 1  # 8 in flight against a target of 16
    assert model.state.slo is None
