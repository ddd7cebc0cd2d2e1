"""Running every policy (scaler.sim.runner).

Covers: always-on is the smallest fleet that meets the attainment goal (one
fewer misses it); every policy of the list runs, in order, on the same
requests; a trace naming models runs one world per model and the scorecard
adds them up; a spot placement adds a tidal-spot run; bad options are named;
always-on says when no fleet up to the ceiling reaches 99 %; each baseline
holds requests for its own proxy's timeout (KEDA's interceptor 20 s,
Knative's activator 300 s), so a 60 s cold start fails KEDA's held requests.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaler.policy import PlacementConfig
from scaler.sim.runner import (
    POLICY_NAMES,
    SimulationOptions,
    run_policies,
    smallest_always_on,
    world_for,
)
from scaler.sim.scorecard import score
from scaler.sim.traces import TraceRequest
from scaler.sim.world import ColdStart, WorldConfig

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
        sorted(two, key=lambda r: r.offset_s), replace(OPTIONS, policies=("tidal",))
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
    )
    keda, knative, tidal_idle = (r.scorecard for r in run_policies(lone, options))
    assert keda.failed_by_reason == {"cold-start-timeout": 1}
    assert knative.failed == 0
    assert tidal_idle.failed == 0
