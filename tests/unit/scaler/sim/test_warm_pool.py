"""The warm tier on a pool of shared GPUs, against scale-to-zero alone (scaler.sim.warm_pool)."""

from __future__ import annotations

import pytest

from scaler.sim.warm_pool import PoolConfig, rare_models, simulate_pool

# Two awake models fit on a GPU; four slices; short timings for hand checks.
CONFIG = PoolConfig(
    slices=4, gpu_memory_mib=80_000, model_mib=36_000, asleep_mib=600, cold_start_s=60.0,
    wake_s=1.0, evict_s=3.0, sleep_after_s=60.0, grace_s=600.0, slo_wait_s=5.0,
)  # fmt: skip


def test_a_request_after_sleep_waits_for_a_wake_not_a_cold_start() -> None:
    arrivals = [[0.0, 300.0]]  # idle 240 s after being served at 60 s: asleep, not gone
    warm = simulate_pool(arrivals, CONFIG, warm=True)
    zero = simulate_pool(arrivals, CONFIG, warm=False)
    assert (warm.cold_starts, warm.wakes, warm.total_wait_s) == (1, 1, 61.0)
    assert (zero.cold_starts, zero.wakes, zero.total_wait_s) == (1, 0, 60.0)
    # The same pod lives from 0 to 300 + 1 + 600 (warm) or 300 + 600 (zero) on one GPU.
    assert warm.gpu_seconds == pytest.approx(901.0)
    assert zero.gpu_seconds == pytest.approx(900.0)


def test_three_models_alternating_fit_one_gpu_only_with_the_tier() -> None:
    # A, B, C in turn every 100 s for an hour: never idle past the grace period.
    arrivals = [[float(t) for t in range(i * 100, 3600, 300)] for i in range(3)]
    warm = simulate_pool(arrivals, CONFIG, warm=True)
    zero = simulate_pool(arrivals, CONFIG, warm=False)
    assert zero.peak_gpus == 2 and warm.peak_gpus == 1
    assert warm.gpu_hours < zero.gpu_hours
    assert warm.cold_starts == zero.cold_starts == 3
    assert warm.wakes > 0 and warm.evictions == 0  # each sleeps after 60 s on its own
    assert warm.slo_attainment == zero.slo_attainment  # only the three cold starts miss


def test_on_a_full_gpu_every_wake_evicts_one() -> None:
    config = PoolConfig(
        slices=4, gpu_memory_mib=80_000, model_mib=36_000, sleep_after_s=500.0, grace_s=900.0
    )
    # A, B, C each every 120 s: nobody sleeps on their own, so each wake evicts the LRU.
    arrivals = [[float(t) for t in range(i * 40, 1800, 120)] for i in range(3)]
    warm = simulate_pool(arrivals, config, warm=True)
    assert warm.peak_gpus == 1
    # C's cold start evicted one (A and B were awake), then every wake one more.
    assert warm.evictions == warm.wakes + 1


def test_bad_config_is_refused() -> None:
    with pytest.raises(ValueError, match="sleep_after_s < grace_s"):
        PoolConfig(sleep_after_s=900.0, grace_s=600.0)


def test_rare_models_are_reproducible() -> None:
    a = rare_models(5, duration_s=3600, mean_gap_s=(300, 1200), seed=3)
    b = rare_models(5, duration_s=3600, mean_gap_s=(300, 1200), seed=3)
    assert a == b and all(times == sorted(times) for times in a)
