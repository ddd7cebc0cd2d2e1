"""The simulated world (simulator.world) with scripted autoscalers.

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
- spot zones: replicas spread over the zones with capacity, a zone's loss
  notices only its replicas, spot waits pending while no zone has any, and
  independent zones leave spot without capacity far less often than one;
- the timeline has one entry per second, and a Tidal run replays a short
  burst with the real policy (woken once, no failures).
"""

from __future__ import annotations

import pytest

from scaler.policy import PlacementConfig
from simulator.baselines import AlwaysOn
from simulator.tidal import TidalAutoscaler
from simulator.traces import TraceRequest
from simulator.world import ON_DEMAND, SPOT, ColdStart, SpotModel, View, WorldConfig, run_world
from simulator.world.loop import World


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


def test_spot_spreads_over_zones_and_a_zone_loss_notices_only_its_replicas() -> None:
    # Two zones, both with spot capacity. When a zone loses it is random in a
    # run, so the zone loss is driven directly through the world's market
    # event (its own changes are made too rare to interfere).
    config = WorldConfig(
        cold_start=ColdStart(5.0),
        placement=PlacementConfig(policy="spot", on_demand_baseline=0),
        spot=SpotModel(availability=0.5, changes_per_day=0.001, zones=2),
    )
    w = World([req(0.0)], Scripted(wake=4), config).fleet
    w.aim(4)
    w.reconcile(warm=True)
    zones = sorted(r.zone for r in w.replicas if r.capacity == SPOT)
    assert zones == [0, 0, 1, 1]  # spread: two per zone
    w.market(1)  # zone 1 loses its spot capacity
    noticed = [r for r in w.replicas if r.noticed]
    assert len(noticed) == 2 and {r.zone for r in noticed} == {1}
    # The replacements go to the zone that still has spot, not to pending.
    fresh = [r for r in w.replicas if r.capacity == SPOT and not r.noticed]
    assert len(fresh) == 4
    assert all(r.zone == 0 and not r.pending for r in fresh)


def test_with_every_zone_gone_spot_waits_pending_until_one_comes_back() -> None:
    config = WorldConfig(
        cold_start=ColdStart(5.0),
        placement=PlacementConfig(policy="spot", on_demand_baseline=0),
        spot=SpotModel(availability=0.5, changes_per_day=0.001, zones=2),
    )
    w = World([req(0.0)], Scripted(wake=2), config).fleet
    w.market(0)
    w.market(1)
    w.aim(2)
    w.reconcile()
    spot = [r for r in w.replicas if r.capacity == SPOT]
    assert len(spot) == 2 and all(r.pending for r in spot)
    w.market(1)  # zone 1 has spot again
    assert all(not r.pending and r.zone == 1 for r in spot)


def test_more_zones_leave_spot_without_capacity_less_often() -> None:
    # Each zone has spot 48 % of the time (SkyPilot's middle figure); changes
    # are made frequent (100 a day) so that a few simulated hours average
    # out. Without capacity anywhere the dynamic fallback runs on-demand: one
    # zone leaves it so about 52 % of the time, three independent zones about
    # 0.52 ** 3 = 14 %.
    hours = 6
    requests = [req(float(t)) for t in range(0, hours * 3600, 600)]
    share = {}
    for zones in (1, 3):
        on_demand_s = 0.0
        for seed in (1, 2, 3):
            config = WorldConfig(
                cold_start=ColdStart(5.0),
                placement=PlacementConfig(policy="spot", on_demand_baseline=0),
                spot=SpotModel(availability=0.48, changes_per_day=100.0, zones=zones),
                seed=seed,
            )
            result = run_world(requests, AlwaysOn(1), config)
            on_demand_s += sum(
                life.ended_s - life.created_s
                for life in result.replicas
                if life.capacity == ON_DEMAND
            )
        share[zones] = on_demand_s / (3 * hours * 3600)
    assert 0.35 < share[1] < 0.70
    assert share[3] < 0.25


def test_spot_zones_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="zones must be >= 1"):
        SpotModel(zones=0)


def test_tidal_sees_demand_reported_between_its_decisions() -> None:
    # The controller passes the hub's demand_seen_at_s into the Observation, so
    # a request seen only in a report between two decision ticks restarts the
    # idle clock; the simulator's Tidal must decide on the same observation.
    tidal = TidalAutoscaler("tidal", {}, cold_start_s=10.0)  # 2 s decision ticks

    def view(now: float, *, busy: bool) -> View:
        n = 1 if busy else 0
        return View(now=now, ready=1, spec=1, concurrency=float(n), busy=busy, held=0, in_flight=n)

    tidal.tick(view(0.0, busy=False), activation=False)  # decides: idle from 0
    tidal.tick(view(1.0, busy=True), activation=False)  # a report only, no decision
    tidal.tick(view(2.0, busy=False), activation=False)  # decides
    assert tidal.state.idle_since_s == 1.0


def test_a_warm_start_puts_no_spot_replica_in_a_zone_without_spot() -> None:
    # The zone starts (and stays) without spot capacity: a warm fleet's spot
    # part waits pending and on-demand covers it, from time 0.
    config = WorldConfig(
        cold_start=ColdStart(5.0),
        placement=PlacementConfig(policy="spot", on_demand_baseline=0),
        spot=SpotModel(availability=1e-9, changes_per_day=0.001),
    )
    result = run_world([req(0.0), req(30.0)], AlwaysOn(2), config)
    assert {life.capacity for life in result.replicas} == {ON_DEMAND}
    assert result.failed_reason == (None, None)
