"""Rule by rule: one ``decide`` call per row, from a state built for the rule.

Covers:
- the per-signal formulas (counts: ceil(total / target); utilizations:
  ceil(ready x average / target); float noise; unconfigured signals);
- the largest configured signal wins; unconfigured readings are ignored;
- rates: up at most ceil(rate x max(ready, 1)) but never forcing a decrease
  below the current scale; down at least ceil(ready / rate), still able to
  step down with a rate close to 1;
- min/max bounds;
- no data is not zero load: a stale or missing configured signal cannot
  lower (NoData) nor raise, a fresh one may raise; a fresh policy state does
  not lower during its first stable window (warm-up);
- panic: entry at the threshold, no scale-down in panic, exit only after a
  whole stable window past the last crossing (not at exactly one window);
- scale-down delay: holds the highest recent decision, with a recheck when
  it expires;
- zero: never while busy, only after the grace period (with a recheck
  before), only with every source and signal fresh, never with min-scale > 0;
- wake from zero: on activation or busy, to max(initial, min, signals),
  bounded by max-scale and the up rate; a target at zero with no demand
  stays there whatever the windows remember;
- the returned state (last change, idle tracking), per-signal counts, purity,
  and bad input.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaler.policy import (
    Decision,
    MaxHold,
    Mode,
    Observation,
    PolicyState,
    Reason,
    ScalingConfig,
    SignalKind,
    decide,
    desired_for_signal,
)
from simulator.harness import config, observation, reading

NOW = 10_000.0
# A policy state that has been running for a long time (no warm-up), stable, no hold.
SETTLED = PolicyState.initial(NOW - 10_000)

C = SignalKind.CONCURRENCY
Q = SignalKind.QUEUE_DEPTH
KV = SignalKind.KV_CACHE_UTILIZATION
GPU = SignalKind.GPU_UTILIZATION


def run(
    obs: Observation, *, cfg: ScalingConfig | None = None, state: PolicyState = SETTLED
) -> tuple[Decision, PolicyState]:
    return decide(config=cfg or config(), observation=obs, state=state, now=NOW)


@pytest.mark.parametrize(
    ("kind", "average", "cfg", "ready", "expected"),
    [
        pytest.param(C, 0.0, config(), 3, 0, id="concurrency 0 wants 0"),
        pytest.param(C, 16.0, config(), 3, 1, id="concurrency exactly one target wants 1"),
        pytest.param(C, 16.000000001, config(), 3, 1, id="float noise does not add a replica"),
        pytest.param(C, 16.1, config(), 3, 2, id="concurrency just over wants 2"),
        pytest.param(C, 17.0, config(target_concurrency=0.5), 0, 34, id="fractional target"),
        pytest.param(Q, 9.0, config(target_queue_depth=4.0), 0, 3, id="queue depth is a count"),
        pytest.param(
            KV, 0.75, config(target_kv_cache_utilization=0.5), 4, 6, id="utilization x ready"
        ),
        pytest.param(
            GPU, 0.9, config(target_gpu_utilization=0.8), 0, 0, id="utilization at 0 ready"
        ),
    ],
)
def test_desired_for_signal(
    kind: SignalKind, average: float, cfg: ScalingConfig, ready: int, expected: int
) -> None:
    assert desired_for_signal(kind, average, config=cfg, ready_replicas=ready) == expected


def test_desired_for_unconfigured_signal_is_an_error() -> None:
    with pytest.raises(ValueError, match="queue_depth is not configured"):
        desired_for_signal(Q, 3.0, config=config(), ready_replicas=1)


IDLE_LONG = replace(SETTLED, idle_since_s=NOW - 10_000)

RULES = [
    # --- signals --------------------------------------------------------------
    pytest.param(
        config(),
        SETTLED,
        observation(ready=2, concurrency=40),
        3,
        Reason.SCALED_UP,
        id="counts: ceil(40 / 16) = 3",
    ),
    pytest.param(
        config(target_queue_depth=2.0),
        SETTLED,
        observation(ready=1, signals={C: reading(16), Q: reading(8)}),
        4,
        Reason.SCALED_UP,
        id="the largest configured signal wins",
    ),
    pytest.param(
        config(),
        SETTLED,
        observation(ready=1, signals={C: reading(16), GPU: reading(1.0)}),
        1,
        Reason.STEADY,
        id="an unconfigured signal's reading is ignored",
    ),
    pytest.param(
        config(target_kv_cache_utilization=0.5),
        SETTLED,
        observation(ready=4, signals={C: reading(0), KV: reading(0.75)}),
        6,
        Reason.SCALED_UP,
        id="utilization: ceil(4 x 0.75 / 0.5) = 6",
    ),
    # --- rates ------------------------------------------------------------------
    pytest.param(
        config(max_scale_up_rate=2.0),
        SETTLED,
        observation(ready=2, concurrency=160),
        4,
        Reason.SCALED_UP,
        id="up rate: at most rate x ready",
    ),
    pytest.param(
        config(max_scale_up_rate=2.0),
        SETTLED,
        observation(ready=0, spec=1, concurrency=160),
        2,
        Reason.SCALED_UP,
        id="up rate: ready 0 counts as 1",
    ),
    pytest.param(
        config(max_scale_up_rate=1.1),
        SETTLED,
        observation(ready=3, concurrency=160),
        4,
        Reason.SCALED_UP,
        id="up rate close to 1 still grows by one (ceil)",
    ),
    pytest.param(
        config(max_scale_up_rate=2.0),
        SETTLED,
        observation(ready=1, spec=8, concurrency=160),
        8,
        Reason.STEADY,
        id="up rate never forces a decrease while pods start",
    ),
    pytest.param(
        config(scale_down_delay_s=0),
        SETTLED,
        observation(ready=10, concurrency=0),
        5,
        Reason.SCALED_DOWN,
        id="down rate: at least ready / 2",
    ),
    pytest.param(
        config(scale_down_delay_s=0),
        SETTLED,
        observation(ready=3, concurrency=0),
        2,
        Reason.SCALED_DOWN,
        id="down rate: ready 3 / 2 rounds up to 2",
    ),
    pytest.param(
        config(scale_down_delay_s=0, max_scale_down_rate=1.01),
        SETTLED,
        observation(ready=10, concurrency=0),
        9,
        Reason.SCALED_DOWN,
        id="down rate close to 1 still steps down by one",
    ),
    pytest.param(
        config(scale_down_delay_s=0),
        SETTLED,
        observation(ready=10, spec=2, concurrency=0),
        2,
        Reason.STEADY,
        id="down rate never pushes back up while pods terminate",
    ),
    # --- bounds -----------------------------------------------------------------
    pytest.param(
        config(),
        SETTLED,
        observation(ready=4, concurrency=1000),
        10,
        Reason.SCALED_UP,
        id="never above max-scale",
    ),
    pytest.param(
        config(min_scale=3),
        SETTLED,
        observation(ready=3, concurrency=0),
        3,
        Reason.STEADY,
        id="never below min-scale",
    ),
    pytest.param(
        config(min_scale=3),
        SETTLED,
        observation(ready=1, concurrency=0),
        3,
        Reason.SCALED_UP,
        id="raised to min-scale",
    ),
    pytest.param(
        config(max_scale=2),
        SETTLED,
        observation(ready=5, concurrency=0, busy=True),
        2,
        Reason.SCALED_DOWN,
        id="lowered to a lowered max-scale even without data",
    ),
    # --- no data is not zero load ----------------------------------------------------
    pytest.param(
        config(),
        SETTLED,
        observation(ready=4, signals={C: reading(0, fresh=False)}),
        4,
        Reason.NO_DATA,
        id="a stale signal cannot lower",
    ),
    pytest.param(
        config(target_kv_cache_utilization=0.5),
        SETTLED,
        observation(ready=4, concurrency=0),
        4,
        Reason.NO_DATA,
        id="a missing configured signal cannot lower",
    ),
    pytest.param(
        config(target_kv_cache_utilization=0.5),
        SETTLED,
        observation(ready=4, concurrency=100),
        7,
        Reason.SCALED_UP,
        id="a fresh signal raises while another is missing",
    ),
    pytest.param(
        config(),
        SETTLED,
        observation(ready=1, signals={C: reading(160, fresh=False)}),
        1,
        Reason.NO_DATA,
        id="a stale signal does not raise either",
    ),
    pytest.param(
        config(),
        SETTLED,
        observation(ready=1, signals={C: reading(None, fresh=False)}),
        1,
        Reason.NO_DATA,
        id="an empty window is no data",
    ),
    pytest.param(
        config(),
        PolicyState.initial(NOW - 30),
        observation(ready=4, concurrency=0),
        4,
        Reason.NO_DATA,
        id="warm-up: no lowering in the first stable window",
    ),
    pytest.param(
        config(),
        PolicyState.initial(NOW),
        observation(ready=1, concurrency=64),
        4,
        Reason.SCALED_UP,
        id="warm-up: raising is fine",
    ),
    # --- panic ------------------------------------------------------------------------
    pytest.param(
        config(),
        SETTLED,
        observation(ready=2, signals={C: reading(16, panic=64)}),
        4,
        Reason.SCALED_UP,
        id="panic: 4 wanted / 2 ready reaches 200 %",
    ),
    pytest.param(
        config(),
        SETTLED,
        observation(ready=2, signals={C: reading(32, panic=48)}),
        2,
        Reason.STEADY,
        id="panic: 3 wanted / 2 ready stays stable",
    ),
    pytest.param(
        config(),
        replace(SETTLED, panic_crossed_s=NOW - 10, panic_desired=8),
        observation(ready=8, concurrency=16),
        8,
        Reason.STEADY,
        id="panic never scales down",
    ),
    pytest.param(
        config(scale_down_delay_s=0),
        replace(SETTLED, panic_crossed_s=NOW - 61, panic_desired=8),
        observation(ready=8, concurrency=16),
        4,
        Reason.SCALED_DOWN,
        id="panic ends a stable window after the last crossing",
    ),
    # --- scale-down delay ----------------------------------------------------------------
    pytest.param(
        config(),
        replace(SETTLED, delay_hold=MaxHold(((NOW - 30, 6),))),
        observation(ready=6, concurrency=16),
        6,
        Reason.HOLDING,
        id="delay holds the highest recent decision",
    ),
    pytest.param(
        config(),
        replace(SETTLED, delay_hold=MaxHold(((NOW - 60, 6),))),
        observation(ready=6, concurrency=16),
        3,
        Reason.SCALED_DOWN,
        id="delay expires after exactly the delay",
    ),
    pytest.param(
        config(),
        replace(SETTLED, delay_hold=MaxHold(((NOW - 50, 9), (NOW - 30, 6)))),
        observation(ready=10, concurrency=16),
        9,
        Reason.SCALED_DOWN,
        id="delay holds the highest even below the current scale",
    ),
    # --- zero -----------------------------------------------------------------------------
    pytest.param(
        config(),
        IDLE_LONG,
        observation(ready=1, concurrency=0, busy=True),
        1,
        Reason.STEADY,
        id="never to zero while busy",
    ),
    pytest.param(
        config(),
        replace(SETTLED, idle_since_s=NOW - 300),
        observation(ready=3, concurrency=0),
        0,
        Reason.SCALED_TO_ZERO,
        id="zero after the grace period, bypassing rate and delay",
    ),
    pytest.param(
        config(),
        replace(SETTLED, idle_since_s=NOW - 299),
        observation(ready=1, concurrency=0),
        1,
        Reason.HOLDING,
        id="not a second before the grace period",
    ),
    pytest.param(
        config(),
        IDLE_LONG,
        observation(ready=1, concurrency=0, all_sources_fresh=False),
        1,
        Reason.NO_DATA,
        id="no zero while a demand source is stale",
    ),
    pytest.param(
        config(),
        IDLE_LONG,
        observation(ready=1, signals={C: reading(0, fresh=False)}),
        1,
        Reason.NO_DATA,
        id="no zero while a signal is stale",
    ),
    pytest.param(
        config(min_scale=1),
        IDLE_LONG,
        observation(ready=1, concurrency=0),
        1,
        Reason.STEADY,
        id="no zero with min-scale 1",
    ),
    # --- from zero -----------------------------------------------------------------------
    pytest.param(
        config(initial_scale=2),
        SETTLED,
        observation(ready=0, activation=True),
        2,
        Reason.ACTIVATED,
        id="activation wakes to initial-scale",
    ),
    pytest.param(
        config(),
        SETTLED,
        observation(ready=0, concurrency=3, busy=True),
        1,
        Reason.ACTIVATED,
        id="busy at zero wakes without an activation",
    ),
    pytest.param(
        config(initial_scale=2, min_scale=4),
        SETTLED,
        observation(ready=0, activation=True),
        4,
        Reason.ACTIVATED,
        id="wakes to min-scale when above initial-scale",
    ),
    pytest.param(
        config(),
        SETTLED,
        observation(ready=0, signals={C: reading(40, panic=100)}, activation=True),
        7,
        Reason.ACTIVATED,
        id="wakes to what the signals want",
    ),
    pytest.param(
        config(max_scale_up_rate=2.0),
        SETTLED,
        observation(ready=0, signals={C: reading(40, panic=100)}, activation=True),
        2,
        Reason.ACTIVATED,
        id="the up rate bounds the signals' part of a wake",
    ),
    pytest.param(
        config(),
        SETTLED,
        observation(ready=0, signals={C: reading(1000)}, activation=True),
        10,
        Reason.ACTIVATED,
        id="a wake is bounded by max-scale",
    ),
    pytest.param(
        config(),
        PolicyState.initial(NOW),
        observation(ready=0, activation=True),
        1,
        Reason.ACTIVATED,
        id="a wake needs no warm-up",
    ),
    pytest.param(
        config(),
        SETTLED,
        observation(ready=0, signals={C: reading(40)}),
        0,
        Reason.STEADY,
        id="at zero with no demand stays at zero whatever the windows remember",
    ),
    pytest.param(
        config(),
        SETTLED,
        observation(ready=0, concurrency=None, activation=True),
        1,
        Reason.ACTIVATED,
        id="a wake needs no data at all",
    ),
    pytest.param(
        config(min_scale=2),
        SETTLED,
        observation(ready=0),
        2,
        Reason.SCALED_UP,
        id="at zero with min-scale 2 goes to 2",
    ),
]


@pytest.mark.parametrize(("cfg", "state", "obs", "desired", "reason"), RULES)
def test_rule(
    cfg: ScalingConfig, state: PolicyState, obs: Observation, desired: int, reason: Reason
) -> None:
    decision, _ = run(obs, cfg=cfg, state=state)
    assert (decision.desired, decision.reason) == (desired, reason), decision.message


@pytest.mark.parametrize(
    ("cfg", "state", "obs", "recheck_after_s"),
    [
        pytest.param(
            config(),
            replace(SETTLED, delay_hold=MaxHold(((NOW - 45, 6),))),
            observation(ready=6, concurrency=16, busy=True),
            15.0,
            id="when the delay hold expires",
        ),
        pytest.param(
            config(),
            replace(SETTLED, idle_since_s=NOW - 100),
            observation(ready=1, concurrency=0),
            200.0,
            id="when the grace period ends",
        ),
        pytest.param(
            config(),
            PolicyState.initial(NOW - 20),
            observation(ready=4, concurrency=0, busy=True),
            40.0,
            id="when the warm-up ends",
        ),
        pytest.param(
            config(),
            replace(SETTLED, idle_since_s=NOW - 290, delay_hold=MaxHold(((NOW - 30, 3),))),
            observation(ready=3, concurrency=0),
            10.0,
            id="the earliest of several",
        ),
        pytest.param(
            config(),
            SETTLED,
            observation(ready=2, concurrency=32, busy=True),
            None,
            id="nothing pending",
        ),
        pytest.param(
            config(min_scale=1),
            IDLE_LONG,
            observation(ready=1, concurrency=0),
            None,
            id="no grace recheck when zero is not allowed",
        ),
    ],
)
def test_recheck_after(
    cfg: ScalingConfig, state: PolicyState, obs: Observation, recheck_after_s: float | None
) -> None:
    decision, _ = run(obs, cfg=cfg, state=state)
    assert decision.recheck_after_s == recheck_after_s, decision.message


def test_mode_and_per_signal_in_panic() -> None:
    cfg = config(target_queue_depth=4.0)
    obs = observation(ready=1, signals={C: reading(16, panic=64), Q: reading(4, panic=2)})
    decision, state = run(obs, cfg=cfg)
    assert decision.mode is Mode.PANIC
    assert state.mode is Mode.PANIC
    # In panic each signal shows the larger of its stable and panic wants.
    assert decision.per_signal == {C: 4, Q: 1}
    assert decision.desired == 4


def test_per_signal_in_stable_mode_and_missing_signals() -> None:
    cfg = config(target_kv_cache_utilization=0.5, target_gpu_utilization=0.5)
    obs = observation(ready=2, signals={C: reading(32, panic=40), KV: reading(0.5, fresh=False)})
    decision, _ = run(obs, cfg=cfg)
    assert decision.mode is Mode.STABLE
    assert decision.per_signal == {C: 2, KV: 2}  # stale KV still shown
    assert decision.missing_signals == (KV, GPU)


def test_state_tracks_change_and_idle() -> None:
    cfg = config()
    busy = observation(ready=1, concurrency=48, busy=True)
    first, s1 = decide(config=cfg, observation=busy, state=SETTLED, now=NOW)
    assert (first.desired, s1.last_desired, s1.last_change_s, s1.last_reason) == (
        3,
        3,
        NOW,
        Reason.SCALED_UP,
    )
    assert s1.idle_since_s is None
    idle = observation(ready=3, concurrency=0)
    _, s2 = decide(config=cfg, observation=idle, state=s1, now=NOW + 2)
    assert s2.idle_since_s == NOW + 2  # idle starts at the first idle observation
    assert s2.last_change_s == NOW  # an unchanged desired keeps the time of the last change
    _, s3 = decide(config=cfg, observation=idle, state=s2, now=NOW + 4)
    assert s3.idle_since_s == NOW + 2  # ... and continues
    _, s4 = decide(config=cfg, observation=busy, state=s3, now=NOW + 6)
    assert s4.idle_since_s is None  # any busy observation ends it
    stale = observation(ready=3, concurrency=0, all_sources_fresh=False)
    _, s5 = decide(config=cfg, observation=stale, state=s3, now=NOW + 6)
    assert s5.idle_since_s is None  # so does a stale source: idle is unproven


def test_a_wake_restarts_the_idle_clock() -> None:
    # Idle at zero for a long time; the activator's /v1/activate arrives before
    # its next stats report shows the held request (so busy is still False).
    state = replace(SETTLED, idle_since_s=NOW - 3600)
    woken, state = decide(
        config=config(),
        observation=observation(ready=0, concurrency=0, activation=True),
        state=state,
        now=NOW,
    )
    assert woken.reason is Reason.ACTIVATED
    assert state.idle_since_s is None
    # The next tick still sees no report of the request: not back to zero.
    after, _ = decide(
        config=config(), observation=observation(ready=0, spec=1), state=state, now=NOW + 2
    )
    assert after.desired == 1, after.message


def test_decide_is_pure() -> None:
    obs = observation(ready=3, signals={C: reading(40, panic=200)})
    state = replace(SETTLED, delay_hold=MaxHold(((NOW - 10, 5),)), idle_since_s=NOW - 5)
    assert run(obs, state=state) == run(obs, state=state)
    assert state.delay_hold.entries == ((NOW - 10, 5),)


@pytest.mark.parametrize(
    ("obs", "now", "match"),
    [
        pytest.param(observation(ready=-1), NOW, "replica counts must be >= 0", id="ready"),
        pytest.param(observation(ready=1, spec=-2), NOW, "replica counts", id="spec"),
        pytest.param(observation(), float("nan"), "finite", id="now"),
    ],
)
def test_bad_input(obs: Observation, now: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        decide(config=config(), observation=obs, state=SETTLED, now=now)


def test_initial_state() -> None:
    state = PolicyState.initial(5.0)
    assert state == PolicyState(started_s=5.0)
    assert state.mode is Mode.STABLE
    with pytest.raises(ValueError, match="finite"):
        PolicyState.initial(float("inf"))
