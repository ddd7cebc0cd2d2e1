"""Tuning picks (simulator.tuning.best).

Covers: the cheapest point that keeps the defaults' SLO attainment wins; a
cheaper point that loses attainment does not; among equally cheap points
the one that changes the fewest defaults wins; no fit point gives None; the
defaults it compares with are the annotations' real defaults, for every grid knob.
"""

from __future__ import annotations

from dataclasses import replace

from scaler.policy.annotations import parse_scaling_config
from simulator.scorecard import Scorecard
from simulator.tuning import DEFAULTS, GRID, TuningPoint, best

A = "autoscaling.tidal.dev/"

BASE = Scorecard(
    name="tidal",
    requests=10,
    slo_ttft_s=2.0,
    slo_attainment=0.9,
    goodput_rps=1.0,
    completed=10,
    failed=0,
    failed_by_reason={},
    ttft_p50_s=0.1,
    ttft_p99_s=1.0,
    cold_starts=1,
    cold_start_wait_p50_s=None,
    cold_start_wait_p99_s=None,
    gpu_seconds=100.0,
    gpu_seconds_busy=50.0,
    gpu_seconds_idle=50.0,
    gpu_seconds_spot=0.0,
    gpu_seconds_on_demand=100.0,
    cost=1.0,
    peak_replicas=1,
    preemptions=0,
    duration_s=10.0,
)


def point(gpu_s: float, attainment: float, **knobs: str) -> TuningPoint:
    annotations = {**DEFAULTS, **{A + k.replace("_", "-"): v for k, v in knobs.items()}}
    return TuningPoint(annotations, replace(BASE, gpu_seconds=gpu_s, slo_attainment=attainment))


def test_cheapest_point_that_keeps_attainment() -> None:
    cheap_but_worse = point(50, 0.8, window="30s")
    good = point(80, 0.9, window="30s")
    winner = best(BASE, [cheap_but_worse, good, point(90, 0.95)])
    assert winner is good


def test_ties_keep_the_defaults() -> None:
    changes_two = point(80, 0.9, window="30s", scale_to_zero_grace_period="60s")
    changes_one = point(80, 0.9, window="30s")
    assert best(BASE, [changes_two, changes_one]) is changes_one


def test_nothing_fits() -> None:
    assert best(BASE, [point(10, 0.5)]) is None


def test_the_defaults_tuning_keeps_on_ties_are_the_policys_defaults() -> None:
    # Ties go to the point that changes the fewest DEFAULTS; if DEFAULTS drifted
    # from the annotations' real defaults, a tie would keep a changed knob.
    assert parse_scaling_config(dict(DEFAULTS)) == parse_scaling_config({})
    assert set(DEFAULTS) == set(GRID)
