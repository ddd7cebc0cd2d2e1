"""The simulated world (scaler.sim.world) with scripted autoscalers.

Covers:
- a request at zero pokes the autoscaler at once, waits out the cold start,
  and counts as one cold start with its wait;
- the activator's limits: past the cold-start timeout a held request fails,
  beyond max-buffered it is refused;
- least-in-flight balancing spreads simultaneous requests over warm replicas;
- a scale-down lets requests in flight finish (graceful termination) and the
  GPU is counted until the replica is empty;
- spot: an interruption notice takes the replica out of service, the
  placement split covers it with on-demand at once, and a replica killed
  with requests still on it fails them;
- the timeline has one entry per second, and a Tidal run replays a short
  burst with the real policy (woken once, no failures).
"""

from __future__ import annotations

import pytest

from scaler.policy import PlacementConfig
from scaler.sim.baselines import AlwaysOn
from scaler.sim.tidal import TidalAutoscaler
from scaler.sim.traces import TraceRequest
from scaler.sim.world import ON_DEMAND, SPOT, ColdStart, SpotModel, View, WorldConfig, run_world


class Scripted:
    """Wakes to ``wake`` on activation; from ``drop_at_s`` on, asks for ``drop_to``."""

    def __init__(self, *, wake: int = 1, drop_at_s: float | None = None, drop_to: int = 0) -> None:
        self.wake = wake
        self.drop_at_s = drop_at_s
        self.drop_to = drop_to
        self.activations = 0

    @property
    def name(self) -> str:
        return "scripted"

    @property
    def initial(self) -> int:
        return 0

    def tick(self, view: View, *, activation: bool) -> int | None:
        if activation:
            self.activations += 1
            return self.wake
        if self.drop_at_s is not None and view.now >= self.drop_at_s:
            return self.drop_to
        return None


def req(at_s: float, prompt: int = 100, output: int = 10) -> TraceRequest:
    return TraceRequest(at_s, prompt, output)


def test_a_request_at_zero_waits_for_one_cold_start() -> None:
    scaler = Scripted()
    result = run_world([req(0.5)], scaler, WorldConfig(cold_start=ColdStart(10.0)))
    assert scaler.activations == 1
    assert result.cold_starts == 1
    assert result.cold_start_wait_s == pytest.approx((10.0,))
    first = result.first_token_s[0]
    assert first is not None
    assert 10.5 < first < 10.7  # ready at 10.5, then one prefill step
    assert result.failed_reason == (None,)


def test_held_requests_time_out_and_the_buffer_refuses_beyond_its_limit() -> None:
    config = WorldConfig(cold_start=ColdStart(700.0), max_buffered=2)
    result = run_world([req(0.0), req(0.1), req(0.2)], Scripted(), config)
    assert result.failed_reason == ("cold-start-timeout", "cold-start-timeout", "buffer-full")
    assert result.cold_start_wait_s == ()


def test_balancing_spreads_simultaneous_requests() -> None:
    result = run_world([req(1.0 + i * 0.001, prompt=2000) for i in range(40)], AlwaysOn(2))
    busy = sorted(life.busy_s for life in result.replicas)
    assert busy[0] > 0.3 * busy[1]
    assert result.cold_starts == 0


def test_scale_down_lets_requests_in_flight_finish() -> None:
    # One long request; the autoscaler asks for zero while it runs.
    scaler = Scripted(drop_at_s=3.0)
    config = WorldConfig(cold_start=ColdStart(1.0))
    result = run_world([req(0.0, prompt=100, output=2000)], scaler, config)
    assert result.failed_reason == (None,)
    finished = result.finished_s[0]
    assert finished is not None
    assert finished > 3.0
    (life,) = result.replicas
    assert life.ended_s == pytest.approx(finished)


def test_spot_notice_brings_on_demand_cover_and_a_kill_fails_what_is_left() -> None:
    placement = PlacementConfig(policy="spot", on_demand_baseline=0)
    config = WorldConfig(
        cold_start=ColdStart(5.0),
        placement=placement,
        spot=SpotModel(notice_s=10.0, times_s=(20.0,)),
    )
    # A request long enough to be on the spot replica when it is killed at t=30.
    requests = [req(0.0, prompt=100, output=5000), req(40.0), req(60.0)]
    result = run_world(requests, Scripted(), config)
    assert result.preemptions == 1
    assert result.failed_reason[0] == "preempted"
    assert result.failed_reason[1:] == (None, None)
    capacities = sorted(life.capacity for life in result.replicas)
    assert SPOT in capacities
    assert ON_DEMAND in capacities  # the dynamic fallback covered the noticed spot replica


def test_timeline_and_a_short_tidal_run() -> None:
    requests = [req(5.0 + i * 0.05) for i in range(50)]
    tidal = TidalAutoscaler("tidal", {}, cold_start_s=10.0)
    result = run_world(requests, tidal, WorldConfig(cold_start=ColdStart(10.0)))
    assert result.cold_starts == 1
    assert all(reason is None for reason in result.failed_reason)
    assert [s.at_s for s in result.timeline[:3]] == [0.0, 1.0, 2.0]
    assert sum(s.arrivals for s in result.timeline) == 50
    assert max(s.ready for s in result.timeline) >= 1


def test_bad_world_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="cold start"):
        ColdStart(-1.0)
    with pytest.raises(ValueError, match="preemption rate"):
        SpotModel(rate_per_hour=-1)
    with pytest.raises(ValueError, match="at least one request"):
        run_world([], AlwaysOn(1))


def test_an_unavailable_spot_zone_leaves_spot_pending_and_on_demand_covers() -> None:
    # Availability so low that the zone starts (and stays) without spot capacity.
    spot = SpotModel(availability=1e-9, changes_per_day=0.001)
    config = WorldConfig(
        cold_start=ColdStart(5.0),
        placement=PlacementConfig(policy="spot", on_demand_baseline=0),
        spot=spot,
    )
    result = run_world([req(0.0), req(30.0)], Scripted(wake=2), config)
    assert result.failed_reason == (None, None)
    # Pending spot replicas never got a node: no GPU time for them.
    assert {life.capacity for life in result.replicas} == {ON_DEMAND}
    assert len(result.replicas) == 2
    with pytest.raises(ValueError, match="availability"):
        SpotModel(availability=0.0)
