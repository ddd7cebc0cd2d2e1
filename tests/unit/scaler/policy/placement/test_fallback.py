"""On-demand cover with a release hold (:mod:`scaler.policy.placement.fallback`).

Covers:
- a scenario stepped in simulated time: load to four replicas with a
  baseline of one (one on-demand, three spot booting: no jump to the
  target), a preemption notice (covered in the same decision), the
  replacement starting (cover kept), Ready (cover kept for the hold, then
  released to the baseline);
- a flapping replacement (Ready, then gone again inside the hold) keeps the
  cover and restarts the hold;
- a spot pool that is full: Pending within the timeout counts, past it is
  covered;
- ``fallback: none``, ``policy: on-demand`` and target 0 reset the state;
- the events SpotFallback and SpotRecovered;
- properties over random sequences of decisions: never more than
  target + overprovision counted as serving; never fewer serving than the
  target with dynamic fallback (while on-demand can be scheduled); with
  ``fallback: none`` on-demand never exceeds the baseline; cover is only
  released against Ready spot, after the hold;
- bad input.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.policy import PlacementConfig, Split
from scaler.policy.placement.availability import SpotCounts
from scaler.policy.placement.fallback import FallbackState, fallback_event, plan_split

BASELINE = PlacementConfig(policy="spot-with-on-demand-baseline", on_demand_baseline=1)
HOLD = 30.0


class Stepper:
    """Runs plan_split decision after decision, keeping the state, on a simulated clock."""

    def __init__(self, placement: PlacementConfig = BASELINE) -> None:
        self.placement = placement
        self.state = FallbackState()
        self.last = Split(0, 0)

    def step(self, now: float, *, target: int, available: int, ready: int) -> Split:
        result, self.state = plan_split(
            target=target,
            placement=self.placement,
            spot=SpotCounts(available=available, ready=ready),
            state=self.state,
            now=now,
            hold_s=HOLD,
        )
        self.last = result
        return result


def test_preemption_scenario() -> None:
    s = Stepper()
    # t=0: load asks for four; three spot replicas are created and start loading.
    assert s.step(0.0, target=4, available=3, ready=0) == Split(spot=3, on_demand=1)
    # t=60: they are Ready: still the baseline only.
    assert s.step(60.0, target=4, available=3, ready=3) == Split(spot=3, on_demand=1)
    # t=100: a notice on the node of one spot replica: covered in this decision.
    assert s.step(100.0, target=4, available=2, ready=2) == Split(3, 2, covering=1)
    # t=102: its replacement is created on another node and starts: cover kept.
    assert s.step(102.0, target=4, available=3, ready=2) == Split(3, 2, covering=1)
    # t=160: the replacement is Ready; the hold starts now.
    assert s.step(160.0, target=4, available=3, ready=3) == Split(3, 2, covering=1)
    # t=189: 29 s into the hold: still covered.
    assert s.step(189.0, target=4, available=3, ready=3) == Split(3, 2, covering=1)
    # t=190: the hold is over: back to the baseline.
    assert s.step(190.0, target=4, available=3, ready=3) == Split(spot=3, on_demand=1)


def test_flapping_spot_restarts_the_hold() -> None:
    s = Stepper()
    s.step(0.0, target=4, available=3, ready=3)
    assert s.step(10.0, target=4, available=1, ready=1) == Split(3, 3, covering=2)
    assert s.step(20.0, target=4, available=3, ready=3).covering == 2  # hold starts
    # All spot preempted at t=40, inside the hold: covered at once, hold cancelled.
    assert s.step(40.0, target=4, available=0, ready=0).covering == 3
    assert s.step(45.0, target=4, available=3, ready=3).covering == 3  # a new hold starts
    assert s.step(74.0, target=4, available=3, ready=3).covering == 3
    assert s.step(75.0, target=4, available=3, ready=3).covering == 0


def test_a_smaller_flap_inside_the_hold_sets_the_floor() -> None:
    s = Stepper()
    s.step(0.0, target=4, available=1, ready=1)
    assert s.step(10.0, target=4, available=3, ready=3).covering == 2  # hold starts
    # One replica goes again at t=20: it needs one cover, already there.
    assert s.step(20.0, target=4, available=2, ready=2).covering == 2
    assert s.step(30.0, target=4, available=3, ready=3).covering == 2
    # The hold (from t=10) ends: release down to the most wanted during it, 1.
    assert s.step(40.0, target=4, available=3, ready=3).covering == 1
    assert s.step(70.0, target=4, available=3, ready=3).covering == 0


def test_partial_recovery_releases_only_what_is_ready() -> None:
    s = Stepper()
    s.step(0.0, target=4, available=3, ready=3)
    assert s.step(10.0, target=4, available=0, ready=0).covering == 3
    # Two replacements Ready, one still loading: only two may be released.
    s.step(20.0, target=4, available=3, ready=2)
    assert s.step(50.0, target=4, available=3, ready=2) == Split(3, 2, covering=1)
    s.step(60.0, target=4, available=3, ready=3)
    assert s.step(90.0, target=4, available=3, ready=3) == Split(3, 1)


def test_full_spot_pool_is_covered_only_past_the_pending_timeout() -> None:
    # The availability counts say "available" while Pending within the timeout,
    # and drop the replica once it is past it; the plan follows the counts.
    s = Stepper()
    assert s.step(0.0, target=4, available=3, ready=0) == Split(3, 1)
    assert s.step(180.0, target=4, available=0, ready=0) == Split(3, 4, covering=3)


def test_scaling_down_caps_the_cover() -> None:
    s = Stepper()
    s.step(0.0, target=4, available=0, ready=0)
    assert s.state.covered == 3
    assert s.step(1.0, target=2, available=0, ready=0) == Split(1, 2, covering=1)
    assert s.state.covered == 1
    assert s.step(2.0, target=0, available=0, ready=0) == Split(0, 0)
    assert s.state == FallbackState()


@pytest.mark.parametrize(
    "placement",
    [
        pytest.param(replace(BASELINE, fallback="none"), id="fallback none"),
        pytest.param(PlacementConfig(), id="on-demand"),
    ],
)
def test_no_cover_without_dynamic_fallback(placement: PlacementConfig) -> None:
    s = Stepper(placement)
    result = s.step(0.0, target=4, available=0, ready=0)
    assert result.covering == 0
    assert s.state == FallbackState()


def test_events() -> None:
    assert fallback_event(Split(3, 1), Split(3, 2, covering=1)) == "SpotFallback"
    assert fallback_event(Split(3, 2, covering=1), Split(3, 3, covering=2)) == "SpotFallback"
    assert fallback_event(Split(3, 3, covering=2), Split(3, 2, covering=1)) is None
    assert fallback_event(Split(3, 2, covering=1), Split(3, 1)) == "SpotRecovered"
    assert fallback_event(Split(3, 1), Split(3, 1)) is None


placements = st.builds(
    PlacementConfig,
    policy=st.sampled_from(["on-demand", "spot", "spot-with-on-demand-baseline"]),
    on_demand_baseline=st.integers(0, 6),
    fallback=st.sampled_from(["dynamic", "none"]),
    spot_overprovision=st.integers(0, 3),
)
steps = st.lists(
    st.tuples(
        st.floats(0.0, 40.0),  # time since the previous decision
        st.integers(0, 10),  # target
        st.integers(0, 14),  # available spot
        st.integers(0, 14),  # ready spot (clamped to available)
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=300)
@given(placement=placements, decisions=steps)
def test_plan_properties(
    placement: PlacementConfig, decisions: list[tuple[float, int, int, int]]
) -> None:
    state = FallbackState()
    now = 0.0
    lower_wanted_since: float | None = None
    for dt, target, available, ready_raw in decisions:
        now += dt
        ready = min(ready_raw, available)
        before = state
        result, state = plan_split(
            target=target,
            placement=placement,
            spot=SpotCounts(available=available, ready=ready),
            state=state,
            now=now,
            hold_s=HOLD,
        )
        counted_spot = result.spot - state.covered
        # Never more than target + overprovision counted as serving.
        assert counted_spot + result.on_demand <= target + placement.spot_overprovision
        assert 0 <= result.on_demand <= target
        if placement.fallback == "dynamic" or placement.policy == "on-demand":
            # Never fewer serving than the target (on-demand pods get scheduled).
            assert min(available, result.spot) + result.on_demand >= target
        if placement.fallback == "none" and placement.policy != "on-demand":
            baseline = placement.on_demand_baseline if placement.policy != "spot" else 0
            assert result.on_demand <= baseline
        # Cover goes down only against Ready spot, and only after the hold.
        capped_before = min(before.covered, result.spot)
        if state.covered < capped_before:
            assert result.spot - min(ready, result.spot) <= capped_before
            assert before.lower_since is not None
            assert now - before.lower_since >= HOLD
        lower_wanted_since = state.lower_since
    assert lower_wanted_since is None or lower_wanted_since <= now


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"hold_s": -1.0}, "hold_s must be >= 0", id="negative hold"),
        pytest.param(
            {"spot": SpotCounts(available=1, ready=2)}, "cannot exceed available", id="ready > av"
        ),
    ],
)
def test_bad_input(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {
        "target": 3,
        "placement": BASELINE,
        "spot": SpotCounts(),
        "state": FallbackState(),
        "now": 0.0,
        **kwargs,
    }
    with pytest.raises(ValueError, match=match):
        plan_split(**args)  # type: ignore[arg-type]
