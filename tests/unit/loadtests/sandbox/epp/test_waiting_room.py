"""The fake endpoint picker's flow-control rules, on plain times (no clock, no loop).

Covers: requests wait while no room is found and go highest priority first,
fairness flows taking turns inside a band; when the head has no room nothing
behind it goes; the no-endpoint budget sheds at exactly its length with
EvictedNoEndpoints, the default budget with EvictedTTL; a change of regime
restarts the charge, so an endpoint's arrival never sheds what it made
dispatchable; a budget of 0 never sheds; a full band refuses newcomers with
RejectedNoEndpoints while the pool is empty and RejectedCapacity otherwise,
counting bytes too, and other bands are unaffected; a client that leaves
frees its place; draining takes everything; bad limits are refused by name.
"""

from __future__ import annotations

import pytest

from loadtests.sandbox.epp.waiting_room import FlowControlLimits, Ticket, WaitingRoom
from scaler.signals.epp_metrics import (
    EVICTED_NO_ENDPOINTS,
    EVICTED_TTL,
    REJECTED_CAPACITY,
    REJECTED_NO_ENDPOINTS,
)


def room(**limits: float) -> WaitingRoom[str]:
    return WaitingRoom(FlowControlLimits(**limits), now=0.0)  # type: ignore[arg-type]


def hold(
    r: WaitingRoom[str], name: str, *, at: float, priority: int = 0, flow: str = "f", size: int = 1
) -> Ticket[str]:
    ticket = r.admit(name, priority=priority, fairness=flow, size_bytes=size, now=at)
    assert isinstance(ticket, Ticket), ticket
    return ticket


def going(r: WaitingRoom[str], rooms: int) -> list[str]:
    """The requests that go when ``rooms`` places are free."""
    free = [rooms]

    def take(_ticket: Ticket[str]) -> str | None:
        return "endpoint" if free[0] > 0 else None

    out = []
    for ticket, _endpoint in r.dispatch(take):
        free[0] -= 1
        out.append(ticket.payload)
    return out


def test_priority_first_then_flows_take_turns() -> None:
    r = room()
    for i, (priority, flow) in enumerate([(0, "a"), (0, "a"), (0, "b"), (10, "c"), (-1, "d")]):
        hold(r, f"{flow}{i}", at=float(i), priority=priority, flow=flow)
    assert going(r, 0) == [] and r.held() == 5
    assert going(r, 4) == ["c3", "a0", "b2", "a1"]
    assert going(r, 5) == ["d4"]


def test_no_endpoint_budget_sheds_at_its_length() -> None:
    r = room(no_endpoint_request_ttl_s=30.0)
    hold(r, "early", at=0.0)
    hold(r, "late", at=10.0)
    assert r.expire(29.9) == []
    assert [(t.payload, o) for t, o in r.expire(30.0)] == [("early", EVICTED_NO_ENDPOINTS)]
    assert [(t.payload, o) for t, o in r.expire(40.0)] == [("late", EVICTED_NO_ENDPOINTS)]
    assert r.held() == 0


def test_a_change_of_regime_restarts_the_charge() -> None:
    r = room(no_endpoint_request_ttl_s=60.0, default_request_ttl_s=5.0)
    hold(r, "waiting", at=0.0)
    # An endpoint appears at 50 s, but it is busy: the request now counts the
    # default budget, from 50 s, not from its arrival.
    r.set_pool_empty(False, now=50.0)
    assert r.expire(54.9) == []
    assert [(t.payload, o) for t, o in r.expire(55.0)] == [("waiting", EVICTED_TTL)]


def test_a_zero_budget_never_sheds() -> None:
    r = room(no_endpoint_request_ttl_s=0.0)
    hold(r, "patient", at=0.0)
    assert r.expire(1e9) == []


def test_a_full_band_refuses_newcomers_by_regime_and_bytes() -> None:
    r = room(band_max_requests=2, band_max_bytes=100)
    hold(r, "a", at=0.0, size=10)
    hold(r, "b", at=0.0, size=10)
    assert r.admit("c", priority=0, fairness="f", size_bytes=1, now=0.0) == REJECTED_NO_ENDPOINTS
    r.set_pool_empty(False, now=1.0)
    assert r.admit("c", priority=0, fairness="f", size_bytes=1, now=1.0) == REJECTED_CAPACITY
    hold(r, "other band", at=1.0, priority=5, size=10)
    big = r.admit("big", priority=5, fairness="f", size_bytes=91, now=1.0)
    assert big == REJECTED_CAPACITY


def test_a_client_that_leaves_frees_its_place() -> None:
    r = room(band_max_requests=1)
    gone = hold(r, "gone", at=0.0)
    assert r.leave(gone) is True
    assert r.leave(gone) is False
    hold(r, "next", at=1.0)
    assert going(r, 5) == ["next"]


def test_drain_takes_everything_oldest_first() -> None:
    r = room()
    hold(r, "b", at=2.0, priority=9)
    hold(r, "a", at=1.0)
    assert [t.payload for t in r.drain()] == ["a", "b"]
    assert r.held() == 0


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        pytest.param(
            {"default_request_ttl_s": -1.0}, "default_request_ttl_s must be >= 0", id="ttl"
        ),
        pytest.param({"band_max_bytes": 0}, "band_max_bytes must be >= 1", id="bytes"),
    ],
)
def test_bad_limits_are_refused_by_name(limits: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FlowControlLimits(**limits)  # type: ignore[arg-type]
