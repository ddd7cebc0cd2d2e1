"""The oracle's lower bound (simulator.oracle).

Covers: two lone requests further apart than a cold start cost two cold
starts (gap bridged by neither); closer than one, the gap itself; prompts
too long for the objective lower the attainment it is computed for; the
requests the goal lets miss lower the bound; a steady trickle of short
requests costs a replica ready all along (the presence inside a cluster);
the bound is below what every simulated policy spent for at least its
attainment on a bursty trace; the work term is each request's prefill and
its decode at the fullest batch, plus a cold start; a burst of prompts one
replica cannot prefill within the objective charges a cold start per extra
replica (the levels); the fleet's cache serves no more than Belady's
replacement on one cache of its size, which exhaustive search over every
eviction choice confirms is the most hits, and capping it raises the work.
"""

from __future__ import annotations

import pytest

from simulator.engine import LlmParams
from simulator.oracle import cacheable_tokens, fleet_cache_hits, oracle_bound
from simulator.runner import SimulationOptions, run_policies
from simulator.traces import TraceRequest
from simulator.world import ColdStart, WorldConfig

PARAMS = LlmParams()


def bound(requests: list[TraceRequest], **kwargs: float) -> float:
    options = {"cold_start_s": 60.0, "slo_ttft_s": 2.0, "attainment": 1.0, **kwargs}
    return oracle_bound(requests, params=PARAMS, **options).gpu_seconds  # type: ignore[arg-type]


def test_lone_requests_cost_a_cold_start_or_the_gap_between_them() -> None:
    far = [TraceRequest(0.0, 100, 1), TraceRequest(1000.0, 100, 1)]
    assert bound(far) == pytest.approx(120.0, abs=0.1)  # 60 + min(gap, 60)
    near = [TraceRequest(0.0, 100, 1), TraceRequest(30.0, 100, 1)]
    assert bound(near) == pytest.approx(60.0 + 28.0, abs=0.1)  # the 28 s between windows


def test_prompts_too_long_for_the_objective_lower_the_attainment() -> None:
    # 100,000 tokens take 4 s of prefill at 25,000 tokens/s: never within 2 s.
    requests = [TraceRequest(float(i), 100, 1) for i in range(3)] + [TraceRequest(3.0, 100_000, 1)]
    result = oracle_bound(
        requests, params=PARAMS, cold_start_s=60.0, slo_ttft_s=2.0, attainment=0.99
    )
    assert result.attainment == pytest.approx(0.75)


def test_requests_allowed_to_miss_lower_the_bound() -> None:
    lone = [TraceRequest(0.0, 100, 1)] + [TraceRequest(5000.0 + i, 100, 1) for i in range(99)]
    # Two cold starts, and a replica ready from 5002 s (the first of the
    # second cluster's objectives) to 5098 s (the last arrival): 96 s.
    assert bound(lone, attainment=1.0) == pytest.approx(120.0 + 96.0, abs=1.0)
    # 99 % may leave out the lone early request: its cold start goes.
    assert bound(lone, attainment=0.99) == pytest.approx(60.0 + 96.0, abs=1.0)


def test_a_steady_trickle_costs_a_replica_all_along() -> None:
    # One short request a second for ten minutes: some replica must be ready
    # within 2 s of each, and going down costs a 60 s cold start to come back.
    trickle = [TraceRequest(float(i), 100, 1) for i in range(600)]
    assert bound(trickle) == pytest.approx(60.0 + 599.0 - 2.0, abs=1.0)


def test_the_bound_is_below_every_policy_at_its_attainment() -> None:
    bursts = [
        TraceRequest(start + i * 0.02, 2000, 20) for start in (1.0, 200.0, 260.0) for i in range(80)
    ]
    options = SimulationOptions(world=WorldConfig(cold_start=ColdStart(20.0)), max_replicas=6)
    runs = run_policies(bursts, options)
    oracle = next(r.scorecard for r in runs if r.scorecard.name == "oracle")
    assert oracle.slo_attainment == pytest.approx(0.99, abs=0.005)
    compared = [
        r.scorecard
        for r in runs
        if r.scorecard.name != "oracle" and r.scorecard.slo_attainment >= oracle.slo_attainment
    ]
    assert compared  # always-on at least
    for card in compared:
        assert card.gpu_seconds >= oracle.gpu_seconds, card.name


def test_the_work_term_is_prefill_and_decode_at_the_fullest_batch() -> None:
    # Back to back, so that presence is one cluster and the work decides.
    requests = [TraceRequest(i * 0.5, 20_000, 400) for i in range(100)]
    result = oracle_bound(requests, params=PARAMS, cold_start_s=60.0, slo_ttft_s=2.0, attainment=1)
    per_token = PARAMS.step_base_s / PARAMS.max_num_seqs + PARAMS.step_per_seq_s
    work = 100 * (20_000 / PARAMS.prefill_tokens_per_s + 399 * per_token)
    assert result.busy_seconds == pytest.approx(work)
    assert result.gpu_seconds >= 60.0 + work


def test_a_burst_one_replica_cannot_prefill_in_time_charges_more_replicas() -> None:
    # 10 x 20,000 tokens at once: 200,000 / (25,000 x 2 s) = 4 replicas ready together.
    burst = [TraceRequest(0.0, 20_000, 1) for _ in range(10)]
    assert bound([TraceRequest(0.0, 20_000, 1)]) < 2 * 60.0
    assert bound(burst) >= 4 * 60.0


def _best_hits(accesses: list[int], capacity: int) -> int:
    """The most hits of any replacement, by trying every choice (tiny inputs only)."""
    best = 0

    def go(index: int, cache: frozenset[int], hits: int) -> None:
        nonlocal best
        if index == len(accesses):
            best = max(best, hits)
            return
        block = accesses[index]
        if block in cache:
            go(index + 1, cache, hits + 1)
            return
        go(index + 1, cache, hits)  # not kept
        if len(cache) < capacity:
            go(index + 1, cache | {block}, hits)
        else:
            for victim in cache:
                go(index + 1, (cache - {victim}) | {block}, hits)

    go(0, frozenset(), 0)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_beladys_replacement_gets_the_most_hits_any_cache_of_its_size_gets(seed: int) -> None:
    import random

    rng = random.Random(seed)
    accesses = [rng.randrange(5) for _ in range(10)]
    requests = [TraceRequest(float(i), 16, 1, prefix=(b,)) for i, b in enumerate(accesses)]
    for capacity in (1, 2, 3):
        assert fleet_cache_hits(requests, capacity) == _best_hits(accesses, capacity)


def test_a_fleet_cache_smaller_than_the_trace_raises_the_work() -> None:
    # Ten prompts cycling over three 4-block prefixes: one infinite cache hits
    # from the fourth on; a cache of 4 blocks holds one prefix at a time.
    prefixes = [tuple(range(k * 10, k * 10 + 4)) for k in range(3)]
    requests = [TraceRequest(float(i), 4 * 512, 1, prefix=prefixes[i % 3]) for i in range(10)]
    cached = cacheable_tokens(requests, 512)
    small = fleet_cache_hits(requests, 4) * 512
    assert small < sum(cached)
    common = {"params": PARAMS, "cold_start_s": 60.0, "slo_ttft_s": 2.0, "attainment": 1.0}
    infinite = oracle_bound(requests, cached_tokens=cached, **common)  # type: ignore[arg-type]
    capped = oracle_bound(
        requests,
        cached_tokens=cached,
        fleet_cached_tokens=small,
        **common,  # type: ignore[arg-type]
    )
    assert capped.busy_seconds > infinite.busy_seconds
    assert capped.busy_seconds == pytest.approx(
        (10 * 4 * 512 - small) / PARAMS.prefill_tokens_per_s
    )
