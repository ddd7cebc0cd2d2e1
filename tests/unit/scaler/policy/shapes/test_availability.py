"""Shapes capped when their pods stay Pending (scaler.policy.shapes.availability).

Covers, on a simulated wall clock: a pod Pending within the timeout counts
as coming; past it the shape is capped at the pods it has (Ready or still
starting), and the turn names the count and when it is asked for again;
while capped nothing changes; the cap is lifted after twice the timeout,
doubling when it is capped again; more Ready pods than its last cap with
none stuck bring it back; terminating pods count for nothing.
"""

from __future__ import annotations

import pytest

from scaler.policy.placement.availability import CapacityType, PodFacts
from scaler.policy.shapes.availability import MAX_OUT_S, ShapeAvailability, observe_shapes

TIMEOUT_S = 60.0
SLICE = "mig-3g.40gb"


def pod(name: str, *, created: float, ready: bool = False, pending: bool = True) -> PodFacts:
    return PodFacts(
        name=name,
        capacity_type=CapacityType.ON_DEMAND,
        phase="Pending" if pending and not ready else "Running",
        ready=ready,
        created_at=created,
    )


def see(
    state: ShapeAvailability, pods: list[PodFacts], now: float
) -> tuple[ShapeAvailability, list[str]]:
    new, turns = observe_shapes(state, {SLICE: pods}, now=now, pending_timeout_s=TIMEOUT_S)
    return new, [("out: " if t.out else "back: ") + t.why for t in turns]


def test_pending_past_the_timeout_caps_the_shape_at_what_it_has() -> None:
    pods = [pod("a", created=0, ready=True), pod("b", created=0), pod("c", created=50)]
    state, turns = see(ShapeAvailability(), pods, now=59)
    assert state.caps(59) == {} and turns == []  # within the timeout: coming
    state, turns = see(state, pods, now=60)
    assert state.caps(60) == {SLICE: 2}  # a is Ready, c still within its timeout
    assert turns == [
        "out: 1 replica Pending past the pending-timeout (1m): no more of its resource is"
        " free; at most 2 until asked again in 2m"
    ]
    # While capped, what its pods do changes nothing.
    state, turns = see(state, [*pods, pod("d", created=0)], now=100)
    assert state.caps(100) == {SLICE: 2} and turns == []


def test_asked_again_after_a_backoff_that_doubles() -> None:
    stuck = [pod("a", created=0)]
    state, _ = see(ShapeAvailability(), stuck, now=60)
    assert state.caps(179) == {SLICE: 0} and state.caps(180) == {}
    # Asked again at 180: the new pod stays Pending too; capped for twice as long.
    state, turns = see(state, [pod("b", created=180)], now=240)
    assert state.caps(240 + 4 * TIMEOUT_S - 1) == {SLICE: 0}
    assert state.caps(240 + 4 * TIMEOUT_S) == {}
    assert "in 4m" in turns[0]
    # The backoff has a ceiling.
    for _ in range(12):
        state, _ = see(state, [pod("x", created=0)], now=10**6)
        state = ShapeAvailability({SLICE: state.outages[SLICE]})
    assert state.outages[SLICE].until - 10**6 <= MAX_OUT_S


def test_ready_replicas_beyond_the_cap_bring_it_back() -> None:
    state, _ = see(ShapeAvailability(), [pod("a", created=0)], now=60)
    state, turns = see(state, [pod("b", created=200, ready=True)], now=300)
    assert turns == ["back: 1 ready"]
    assert state.outages == {}
    # A second stuck spell starts the backoff from the beginning again.
    state, turns = see(state, [pod("c", created=400)], now=460)
    assert "in 2m" in turns[0]


def test_terminating_pods_count_for_nothing() -> None:
    leaving = PodFacts(
        name="old", capacity_type=CapacityType.ON_DEMAND, phase="Pending", terminating=True
    )
    state, turns = see(ShapeAvailability(), [leaving], now=1000)
    assert state.caps(1000) == {} and turns == []


def test_a_bad_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="pending_timeout_s"):
        observe_shapes(ShapeAvailability(), {}, now=0, pending_timeout_s=0)
