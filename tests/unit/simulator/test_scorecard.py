"""Scorecard arithmetic (simulator.scorecard) on a hand-made run.

Covers: SLO attainment over all requests (failed ones miss it, even after a
first token; the threshold is inclusive); goodput; nearest-rank percentiles;
GPU-seconds busy/idle and spot/on-demand from replica lifetimes; cost at the stated prices with the
spot ratio; failures counted by reason; bad thresholds and prices refused.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.scorecard import Prices, percentile, score
from simulator.world import ON_DEMAND, SPOT, ReplicaLife, RunResult, Second


def run() -> RunResult:
    return RunResult(
        name="x",
        arrival_s=(0.0, 1.0, 2.0, 3.0),
        # TTFTs 0.5, 2.0 (at the threshold: met), 3.0 (missed), and one failed.
        first_token_s=(0.5, 3.0, 5.0, None),
        finished_s=(1.0, 4.0, 6.0, None),
        output_tokens=(1, 1, 1, 1),
        failed_reason=(None, None, None, "cold-start-timeout"),
        cold_start_wait_s=(1.0, 3.0),
        cold_starts=1,
        replicas=(
            ReplicaLife(ON_DEMAND, created_s=0.0, ended_s=3600.0, busy_s=600.0),
            ReplicaLife(SPOT, created_s=0.0, ended_s=1800.0, busy_s=900.0),
        ),
        timeline=(Second(0, 1, 1.0, 0, 1), Second(1, 1, 1.0, 2, 2)),
        end_s=10.0,
        preemptions=0,
    )


def test_attainment_goodput_and_failures() -> None:
    card = score(run(), slo_ttft_s=2.0)
    assert card.slo_attainment == pytest.approx(2 / 4)
    assert card.goodput_rps == pytest.approx(2 / 10.0)
    assert (card.completed, card.failed) == (3, 1)
    assert card.failed_by_reason == {"cold-start-timeout": 1}
    assert card.ttft_p50_s == pytest.approx(2.0)
    assert card.ttft_p99_s == pytest.approx(3.0)
    assert card.peak_replicas == 2


def test_gpu_seconds_and_cost() -> None:
    card = score(run(), prices=Prices(on_demand_per_gpu_hour=4.0, spot_ratio=0.25))
    assert card.gpu_seconds == 5400.0
    assert card.gpu_seconds_busy == 1500.0
    assert card.gpu_seconds_idle == 3900.0
    assert (card.gpu_seconds_on_demand, card.gpu_seconds_spot) == (3600.0, 1800.0)
    # One on-demand hour at 4, half a spot hour at 4 x 0.25.
    assert card.cost == pytest.approx(4.0 + 0.5)


def test_a_request_lost_after_its_first_token_misses_the_slo() -> None:
    lost = replace(
        run(),
        first_token_s=(0.5, 3.0, 5.0, 3.5),
        failed_reason=(None, None, None, "preempted"),
    )
    card = score(lost)
    assert card.slo_attainment == pytest.approx(2 / 4)
    assert card.failed_by_reason == {"preempted": 1}


def test_cold_start_waits() -> None:
    card = score(run())
    assert (card.cold_starts, card.cold_start_wait_p50_s, card.cold_start_wait_p99_s) == (
        1,
        1.0,
        3.0,
    )


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile(values, 101)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="TTFT threshold"):
        score(run(), slo_ttft_s=0)
    with pytest.raises(ValueError, match="spot price ratio"):
        Prices(spot_ratio=1.5)
    with pytest.raises(ValueError, match="on-demand price"):
        Prices(on_demand_per_gpu_hour=-1)
