"""The policy's fixes of issue 13, each a case that went wrong before.

Covers:
- panic mode never scales down: spec 10, ready 2 (the rest still starting),
  a panic estimate of 5 used to give ``ScaledDown`` to 5;
- a short window's panic window (1 s of 6 s) read at a tick 1.5 s after the
  last report holds that report instead of reading as no data;
- the idle clock restarts at the last time a report showed demand, even when
  no decision saw it busy: a short request between two ticks postpones the
  scale to zero by a whole grace period.
"""

from __future__ import annotations

from scaler.policy.api import (
    Decision,
    Demand,
    Mode,
    Observation,
    Reason,
    ScalingConfig,
    SignalKind,
    SignalReading,
)
from scaler.policy.decide import PolicyState, decide
from scaler.policy.windows import SignalWindows


def _observe(
    *, spec: int, ready: int, stable: float, panic: float, busy: bool = True, **extra: object
) -> Observation:
    return Observation(
        ready_replicas=ready,
        spec_replicas=spec,
        signals={SignalKind.CONCURRENCY: SignalReading(stable=stable, panic=panic, fresh=True)},
        demand=Demand(busy=busy, all_sources_fresh=True),
        **extra,  # type: ignore[arg-type]
    )


def test_panic_never_scales_down() -> None:
    config = ScalingConfig(target_concurrency=1, window_s=60, scale_down_delay_s=0)
    state = PolicyState.initial(0.0)
    decision, state = decide(
        config=config,
        observation=_observe(spec=10, ready=2, stable=5, panic=5),
        state=state,
        now=100,
    )
    assert decision.mode is Mode.PANIC
    assert decision.reason is not Reason.SCALED_DOWN
    assert decision.desired == 10
    # Leaving panic (a whole stable window after the last crossing) may lower it.
    decision, state = decide(
        config=config,
        observation=_observe(spec=10, ready=10, stable=5, panic=5),
        state=state,
        now=170,
    )
    assert decision.mode is Mode.STABLE
    assert decision.desired < 10


def test_short_panic_window_holds_the_last_report() -> None:
    config = ScalingConfig(window_s=6.0)
    assert config.panic_window_s == 1.0
    windows = SignalWindows.for_config(config)
    windows.record(SignalKind.CONCURRENCY, 48.0, 100.2)  # the last report
    reading = windows.reading(
        SignalKind.CONCURRENCY, 101.7, stable_window_s=6.0, panic_window_s=1.0, fresh_within_s=5
    )
    assert reading.panic == 48.0
    assert reading.stable == 48.0


def _idle_decisions(seen_busy_at: float | None) -> list[Decision]:
    """Ticks every 2 s from t=0 at 1 replica, idle at every tick; grace 4 s."""
    config = ScalingConfig(window_s=6, scale_down_delay_s=0, scale_to_zero_grace_s=4)
    state = PolicyState.initial(-100.0)
    out = []
    for now in (0.0, 2.0, 4.0, 6.0, 8.0):
        seen = seen_busy_at if seen_busy_at is not None and seen_busy_at <= now else None
        observation = _observe(
            spec=1, ready=1, stable=0, panic=0, busy=False, demand_seen_at_s=seen
        )
        decision, state = decide(config=config, observation=observation, state=state, now=now)
        out.append(decision)
    return out


def test_demand_between_ticks_restarts_the_grace_period() -> None:
    quiet = _idle_decisions(None)
    assert [d.desired for d in quiet] == [1, 1, 0, 0, 0]  # idle since t=0: zero at t=4
    # A report at t=3 showed a short request that no tick saw: idle since 3, zero at t>=7.
    bumped = _idle_decisions(3.0)
    assert [d.desired for d in bumped] == [1, 1, 1, 1, 0]
    assert bumped[4].reason is Reason.SCALED_TO_ZERO
