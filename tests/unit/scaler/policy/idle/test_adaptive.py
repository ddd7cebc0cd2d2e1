"""The adaptive grace period (scaler.policy.idle.adaptive).

Covers:
- the fixed fallback while history is short, and when most idle times fall
  beyond the histogram's range;
- the keep-alive of least expected cost (a miss priced in GPU-seconds) plus
  the 10 % margin: it covers a rare long gap when its miss costs more, and
  lets a rarely used model go at once while a busy one stays warm;
- pre-warm only for a periodic pattern (a peaked histogram) whose head is
  longer than two cold starts; none for a flat one or a short head;
- idle stretches shorter than ``min_idle_s`` are not recorded; records are
  immutable (a new history each time);
- bad values are refused with the name of the knob;
- AdaptiveGrace (per target): each idle stretch recorded once, a fixed
  config passed through, the fallback then the learned keep-alive, and the
  pre-warm cycle (zero at once, a wake one cold start early, the keep-alive
  converted to decide's idle clock);
- decide_with_grace / PurePolicy: a fixed grace decides exactly as decide;
  with adaptive, the state learns a periodic job through decisions alone and
  pre-warms a cold start ahead of it.
"""

from __future__ import annotations

import pytest

from scaler.policy import (
    Demand,
    Observation,
    PolicyState,
    ScalingConfig,
    SignalKind,
    SignalReading,
    decide,
)
from scaler.policy.idle.adaptive import AdaptiveGrace, AdaptiveGraceConfig, IdleHistory
from scaler.policy.idle.grace import decide_with_grace
from scaler.policy.protocol import PurePolicy


def history(*idle_s: float, config: AdaptiveGraceConfig | None = None) -> IdleHistory:
    h = IdleHistory(config or AdaptiveGraceConfig())
    for value in idle_s:
        h = h.record(value)
    return h


def test_fixed_fallback_while_history_is_short() -> None:
    plan = history(*[40.0] * 9).plan(cold_start_s=60)
    assert (plan.keep_alive_s, plan.prewarm_after_s, plan.learned) == (300.0, None, False)
    assert "fewer than 10" in plan.why


def test_fallback_when_most_idle_times_are_beyond_the_range() -> None:
    cfg = AdaptiveGraceConfig(range_s=600.0)
    plan = history(*[5000.0] * 8, 40.0, 50.0, config=cfg).plan(cold_start_s=60)
    assert not plan.learned
    assert "beyond 600s" in plan.why


def test_keep_alive_covers_a_rare_long_gap_whose_miss_costs_more() -> None:
    # 99 gaps of 42 s and one of 120 s: 75 s more warm per stretch at most
    # costs less than a 1 % chance of a miss priced at 60 / 0.01 GPU-seconds.
    plan = history(*[42.0] * 99, 120.0).plan(cold_start_s=60)
    assert plan.learned
    assert plan.keep_alive_s == pytest.approx(125.0 * 1.1)
    assert "least expected cost" in plan.why


def test_rare_models_go_to_zero_at_once_and_busy_ones_stay_warm() -> None:
    # The percentile rule kept the rarest longest; on cost, two-hour gaps
    # are not worth a replica (a miss is worth 6,000 GPU-seconds), ten-minute ones are.
    # (No pre-warm here: the keep-alive alone.)
    cfg = AdaptiveGraceConfig(min_cv=1e9)
    rare = history(*[7_000.0 + 300 * i for i in range(20)], config=cfg).plan(cold_start_s=60)
    assert (rare.keep_alive_s, rare.prewarm_after_s) == (0.0, None)
    busy = history(*[600.0 + 7 * i for i in range(20)], config=cfg).plan(cold_start_s=60)
    assert busy.keep_alive_s >= 600.0 + 7 * 19


def test_keep_alive_covers_the_tail_when_it_is_more_than_one_percent() -> None:
    plan = history(*[42.0] * 90, *[120.0] * 10).plan(cold_start_s=60)
    assert plan.keep_alive_s == pytest.approx(125.0 * 1.1)


def test_periodic_pattern_with_a_long_head_pre_warms() -> None:
    # A job every ~10 minutes: go to zero, wake before the next one.
    plan = history(*[600.0 + i % 3 for i in range(20)]).plan(cold_start_s=60)
    assert plan.prewarm_after_s == pytest.approx(600.0 * 0.9)
    assert plan.keep_alive_s == pytest.approx(605.0 * 1.1)
    assert "pre-warm" in plan.why


def test_no_pre_warm_when_the_head_is_within_two_cold_starts() -> None:
    plan = history(*[100.0] * 20).plan(cold_start_s=60)
    assert plan.prewarm_after_s is None
    assert plan.learned


def test_no_pre_warm_for_a_flat_histogram() -> None:
    # Idle times spread evenly from 10 s to 1000 s: CV of the bin counts is low.
    plan = history(*[10.0 + 5 * i for i in range(199)]).plan(cold_start_s=10)
    assert plan.prewarm_after_s is None
    assert "not periodic" in plan.why


def test_short_idle_stretches_are_ignored_and_records_are_immutable() -> None:
    empty = IdleHistory()
    assert empty.record(3.0) is empty
    one = empty.record(30.0)
    assert (empty.samples, one.samples) == (0, 1)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        pytest.param({"min_samples": 0}, "min_samples", id="min-samples"),
        pytest.param({"attainment": 1.0}, "attainment", id="attainment"),
        pytest.param({"prewarm_percentile": 100}, "prewarm_percentile", id="prewarm-above"),
        pytest.param({"bin_s": 0}, "bin_s", id="bin"),
        pytest.param({"margin": 1.0}, "margin", id="margin"),
    ],
)
def test_bad_knobs_are_named(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        AdaptiveGraceConfig(**kwargs)  # type: ignore[arg-type]


def test_negative_idle_time_is_refused() -> None:
    with pytest.raises(ValueError, match="idle time"):
        IdleHistory().record(-1.0)


# --- AdaptiveGrace: the per-target state the controller and the simulator keep ------------

ADAPTIVE = ScalingConfig(scale_to_zero_grace_adaptive=True)


def periodic(every_s: float, times: int = 20) -> AdaptiveGrace:
    """A target that was busy for 1 s every ``every_s`` seconds, ``times`` times."""
    grace = AdaptiveGrace.start(1.0, fallback_s=300.0, cold_start_s=60.0)
    t = 0.0
    for _ in range(times):
        t += every_s
        grace = grace.observe(busy=True, now=t).observe(busy=False, now=t + 1)
    return grace


def test_observe_records_each_idle_stretch_once() -> None:
    grace = AdaptiveGrace.start(0.0, fallback_s=300.0, cold_start_s=60.0)
    grace = grace.observe(busy=False, now=10.0)  # still the same idle stretch
    grace = grace.observe(busy=True, now=40.0)
    grace = grace.observe(busy=True, now=41.0)
    assert grace.history.samples == 1
    assert grace.idle_since_s is None
    assert grace.observe(busy=False, now=42.0).idle_since_s == 42.0


def test_a_fixed_grace_config_passes_through() -> None:
    config = ScalingConfig(scale_to_zero_grace_s=90.0)
    out, prewarm = periodic(600.0).effective(
        config, now=0.0, spec_replicas=1, policy_idle_since_s=None
    )
    assert out is config
    assert not prewarm


def test_fallback_while_learning_then_the_learned_keep_alive() -> None:
    short = periodic(100.0, times=5)
    out, _ = short.effective(ADAPTIVE, now=0.0, spec_replicas=1, policy_idle_since_s=None)
    assert out.scale_to_zero_grace_s == 300.0
    learned = periodic(100.0, times=20)
    out, prewarm = learned.effective(ADAPTIVE, now=0.0, spec_replicas=1, policy_idle_since_s=None)
    # Idle gaps of 99 s: the 95-100 s bin, plus 10 %.
    assert out.scale_to_zero_grace_s == pytest.approx(110.0)
    assert not prewarm  # the head (~89 s) is within two cold starts


def test_pre_warm_goes_to_zero_then_wakes_a_cold_start_early() -> None:
    grace = periodic(600.0)  # idle since 20 x 600 + 1
    idle_start = grace.idle_since_s
    assert idle_start is not None

    def at(idle_for: float, spec: int, policy_idle: float | None) -> tuple[float, bool]:
        out, prewarm = grace.effective(
            ADAPTIVE,
            now=idle_start + idle_for,
            spec_replicas=spec,
            policy_idle_since_s=policy_idle,
        )
        return out.scale_to_zero_grace_s, prewarm

    # Idle gaps of 599 s: head 595 x 0.9 = 535.5 s (the 595-600 bin's lower
    # edge, less 10 %); wake a cold start before: at 475.5 s of idle.
    assert at(10.0, 1, idle_start) == (0.0, False)  # go to zero at once
    assert at(475.0, 0, None) == (0.0, False)
    grace_s, prewarm = at(480.0, 0, None)
    assert prewarm
    # Woken at 480 s: decide's idle clock restarts there; keep until 660 s of idle.
    keep = 600.0 * 1.1
    assert at(480.0, 0, None)[1]
    grace_s, prewarm = at(500.0, 1, idle_start + 480.0)
    assert not prewarm
    assert grace_s == pytest.approx(keep - 480.0)


# --- decide_with_grace: the policy path the controller and the simulator share -------------


def idle_observation(*, spec: int, busy: bool = False) -> Observation:
    return Observation(
        ready_replicas=spec,
        spec_replicas=spec,
        signals={SignalKind.CONCURRENCY: SignalReading(stable=0.0, panic=0.0, fresh=True)},
        demand=Demand(busy=busy, all_sources_fresh=True),
    )


def test_a_fixed_grace_decides_as_decide_does() -> None:
    config = ScalingConfig(scale_to_zero_grace_s=30.0)
    state = PolicyState.initial(-100.0)
    got = decide_with_grace(
        config=config, observation=idle_observation(spec=1), state=state, now=0.0
    )
    assert got == decide(config=config, observation=idle_observation(spec=1), state=state, now=0.0)
    assert got[1].adaptive is None


def test_adaptive_learns_in_the_policy_state_and_pre_warms() -> None:
    # A job every 600 s, busy for 2 s: the state learns the pattern through
    # decisions alone, as the controller's would.
    policy = PurePolicy(cold_start_estimate_s=60.0)
    config = ScalingConfig(scale_to_zero_grace_adaptive=True)
    state = policy.initial_state(-100.0)
    spec = 1
    wakes: list[tuple[float, bool]] = []  # (time, pre-warm?)
    for step in range(0, 600 * 25, 2):
        now = float(step)
        busy = step % 600 < 2
        decision, state = policy.decide(
            config=config, observation=idle_observation(spec=spec, busy=busy), state=state, now=now
        )
        if spec == 0 and decision.desired > 0:
            wakes.append((now, decision.message.startswith("pre-warm")))
        spec = decision.desired
    assert state.adaptive is not None
    assert state.adaptive.plan.prewarm_after_s is not None
    # While learning (the 300 s fallback), jobs wake it from zero; once
    # learned, it goes to zero between jobs and wakes a cold start ahead.
    learned = [(t, pre) for t, pre in wakes if t > 600 * 15]
    assert learned
    assert all(pre and 470 <= t % 600 <= 540 for t, pre in learned), wakes


def test_the_cold_start_estimate_must_be_sane() -> None:
    with pytest.raises(ValueError, match="cold-start estimate"):
        PurePolicy(cold_start_estimate_s=-1.0)
