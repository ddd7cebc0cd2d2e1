"""Running every policy (simulator.runner).

Covers: always-on is the smallest fleet that meets the attainment goal (one
fewer misses it), and the frontier scores every fleet to the ceiling, those
above the first meeting every servable request carried from it, an
``always-on-N`` row the frontier's point N; ``tidal-spot``, ``tidal-pool``
and ``tidal-warm`` parse to ``tidal``'s configuration, objective included,
and ``tidal-concurrency`` to the defaults without one; a warm start gives
every autoscaler the fleet the first minute needs (no request lost to a
first cold start) and a zero start none, fixed fleets warm in both; every
policy of the list runs, in order, on the same requests; a trace naming
models runs one world per model and the scorecard adds them up; a spot
placement adds a tidal-spot run; bad options are named; always-on says when
no fleet up to the ceiling reaches 99 %; each baseline holds requests for
its own proxy's timeout (KEDA's interceptor 20 s, Knative's activator
300 s), so a 60 s cold start fails KEDA's held requests.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaler.policy import PlacementConfig
from scaler.policy.protocol import PurePolicy
from simulator.runner import (
    POLICY_NAMES,
    SimulationOptions,
    run_policies,
    smallest_always_on,
    tidal_annotations,
    world_for,
)
from simulator.scorecard import score
from simulator.traces import TraceRequest
from simulator.world import ColdStart, WorldConfig

# Bursts of 60 long prompts every 20 s: one replica cannot keep TTFT under 2 s.
BURSTS = [TraceRequest(start + i * 0.01, 3000, 5) for start in (1.0, 21.0, 41.0) for i in range(60)]
OPTIONS = SimulationOptions(world=WorldConfig(cold_start=ColdStart(5.0)), max_replicas=8)


def test_always_on_is_the_smallest_fleet_meeting_the_goal() -> None:
    n, result = smallest_always_on(BURSTS, OPTIONS)
    assert 1 < n < 8
    assert score(result).slo_attainment >= 0.99
    _, smaller = smallest_always_on(BURSTS, replace(OPTIONS, max_replicas=n - 1))
    assert score(smaller).slo_attainment < 0.99


def test_every_policy_runs_in_order() -> None:
    runs = run_policies(BURSTS, OPTIONS)
    names = [r.scorecard.name for r in runs]
    assert names[0].startswith("always-on-")
    assert names[1:] == list(POLICY_NAMES[1:])
    assert all(r.scorecard.requests == len(BURSTS) for r in runs)


def test_models_run_apart_and_add_up() -> None:
    two = [replace(r, model="a") for r in BURSTS[:60]] + [
        replace(r, model="b", offset_s=r.offset_s + 0.005) for r in BURSTS[:60]
    ]
    (run,) = run_policies(
        sorted(two, key=lambda r: r.offset_s),
        replace(OPTIONS, policies=("tidal",), start="zero"),
    )
    # Each model woke on its own: two cold starts, replicas from both.
    assert run.scorecard.cold_starts == 2
    assert run.scorecard.requests == 120


def test_spot_placement_adds_a_tidal_spot_run() -> None:
    options = replace(
        OPTIONS,
        policies=("tidal",),
        spot_placement=PlacementConfig(policy="spot-with-on-demand-baseline"),
    )
    runs = run_policies(BURSTS, options)
    assert [r.scorecard.name for r in runs] == ["tidal", "tidal-spot"]
    assert runs[1].scorecard.gpu_seconds_spot > 0
    assert runs[0].scorecard.gpu_seconds_spot == 0


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="unknown policies"):
        SimulationOptions(policies=("vpa",))
    with pytest.raises(ValueError, match="max replicas"):
        SimulationOptions(max_replicas=0)
    with pytest.raises(ValueError, match="needs a spot policy"):
        SimulationOptions(spot_placement=PlacementConfig())


def test_always_on_says_when_the_ceiling_misses_the_goal() -> None:
    (run,) = run_policies(BURSTS, replace(OPTIONS, policies=("always-on",), max_replicas=1))
    assert run.scorecard.name == "always-on-1"
    assert run.scorecard.reaches_target is False
    assert run.scorecard.as_json()["reaches_target"] is False
    (enough,) = run_policies(BURSTS, replace(OPTIONS, policies=("always-on",)))
    assert enough.scorecard.reaches_target is True


def test_each_baseline_holds_requests_as_its_proxy_does() -> None:
    assert world_for("keda-http", OPTIONS).cold_start_timeout_s == 20.0
    assert world_for("knative-kpa", OPTIONS).cold_start_timeout_s == 300.0
    assert world_for("tidal", OPTIONS).cold_start_timeout_s == 600.0
    lone = [TraceRequest(1.0, 100, 5)]
    options = replace(
        OPTIONS,
        world=WorldConfig(cold_start=ColdStart(60.0)),
        policies=("keda-http", "knative-kpa", "knative-tidal-idle"),
        start="zero",
    )
    keda, knative, tidal_idle = (r.scorecard for r in run_policies(lone, options))
    assert keda.failed_by_reason == {"cold-start-timeout": 1}
    assert knative.failed == 0
    assert tidal_idle.failed == 0


def test_the_frontier_scores_every_fleet_and_always_on_is_its_smallest_at_the_goal() -> None:
    runs = run_policies(BURSTS, replace(OPTIONS, policies=("always-on", "always-on-2")))
    always, two = runs
    points = always.fleets
    assert [p.replicas for p in points] == list(range(1, 9))
    n, _ = smallest_always_on(BURSTS, OPTIONS)
    assert always.scorecard.name == f"always-on-{n}"
    assert min(p.replicas for p in points if p.slo_attainment >= 0.99) == n
    # Past the first fleet meeting every request, points are carried: same
    # attainment, GPU-seconds in proportion to the size.
    last = max(p.replicas for p in points if p.simulated)
    assert last < 8 and points[last - 1].slo_attainment == pytest.approx(1.0)
    for p in points[last:]:
        assert not p.simulated and p.slo_attainment == points[last - 1].slo_attainment
        assert p.gpu_seconds == pytest.approx(points[last - 1].gpu_seconds * p.replicas / last)
    assert two.scorecard.name == "always-on-2"
    assert two.scorecard.slo_attainment == pytest.approx(points[1].slo_attainment)
    assert two.scorecard.gpu_seconds == pytest.approx(points[1].gpu_seconds)


def test_tidal_variants_run_tidals_configuration() -> None:
    options = replace(OPTIONS, tidal_annotations={"autoscaling.tidal.dev/window": "30s"})
    policy = PurePolicy(cold_start_estimate_s=5.0)
    tidal = policy.parse(tidal_annotations("tidal", options))
    assert tidal.slo_ttft_s == options.slo_ttft_s
    for variant in ("tidal-spot", "tidal-pool", "tidal-warm"):
        assert policy.parse(tidal_annotations(variant, options)) == tidal
    concurrency = policy.parse(tidal_annotations("tidal-concurrency", options))
    assert concurrency.slo_ttft_s is None
    assert concurrency.window_s == tidal.window_s == 30.0


def test_a_warm_start_gives_every_autoscaler_the_first_minute_and_zero_gives_none() -> None:
    names = ("always-on", "hpa", "keda-http", "knative-kpa", "planner", "tidal", "reactive")
    warm = run_policies(BURSTS, replace(OPTIONS, policies=names))
    zero = run_policies(BURSTS, replace(OPTIONS, policies=names, start="zero"))
    assert all(r.scorecard.first_cold_start_missed == 0 for r in warm)
    assert all(r.result is not None and r.result.timeline[0].ready > 1 for r in warm)
    fixed, *scaled = zero
    assert fixed.scorecard == warm[0].scorecard
    for run in scaled:
        assert run.scorecard.first_cold_start_missed > 0, run.scorecard.name
