"""The oracle's row: its lower bound on GPU-seconds, summed over models, as a scorecard.

Not a run but a bound on any schedule meeting the attainment goal
(:func:`simulator.oracle.oracle_bound`), so its row has no run and no
latencies; its prefix cache is capped at what the ceiling's replicas'
caches could hold together.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.oracle import cacheable_tokens, fleet_cache_hits, oracle_bound
from simulator.runner.options import SimulationOptions
from simulator.runner.result import PolicyRun
from simulator.scorecard import Scorecard
from simulator.traces import TraceRequest

__all__ = ["oracle_card"]


def _fleet_cached_tokens(group: Sequence[TraceRequest], options: SimulationOptions) -> int:
    """The most prompt tokens the ceiling's caches together can serve (the oracle's cap)."""
    engine = options.world.engine
    if not any(r.prefix for r in group):
        return 0
    blocks = options.max_replicas * engine.kv_cache_tokens // engine.prefix_block_tokens
    return fleet_cache_hits(group, blocks) * engine.prefix_block_tokens


def oracle_card(
    requests: Sequence[TraceRequest],
    models: Sequence[Sequence[TraceRequest]],
    runs: Sequence[PolicyRun],
    options: SimulationOptions,
) -> Scorecard:
    """The oracle's bound, summed over models, as a scorecard row."""
    bounds = [
        oracle_bound(
            group,
            params=options.world.engine,
            cold_start_s=options.cold_start.median_s,
            slo_ttft_s=options.slo_ttft_s,
            attainment=options.always_on_attainment,
            context_tokens=min(
                options.world.engine.max_model_len, options.world.engine.kv_cache_tokens
            ),
            cached_tokens=cacheable_tokens(group, options.world.engine.prefix_block_tokens),
            fleet_cached_tokens=_fleet_cached_tokens(group, options),
        )
        for group in models
    ]
    n = len(requests)
    met = sum(b.attainment * b.requests for b in bounds)
    gpu_s = sum(b.gpu_seconds for b in bounds)
    busy = min(gpu_s, sum(b.busy_seconds for b in bounds))
    duration = max((r.scorecard.duration_s for r in runs), default=requests[-1].offset_s)
    attainment = met / n
    return Scorecard(
        name="oracle",
        requests=n,
        slo_ttft_s=options.slo_ttft_s,
        slo_attainment=attainment,
        goodput_rps=met / max(duration, 1e-9),
        completed=n,
        failed=0,
        failed_by_reason={},
        ttft_p50_s=None,
        ttft_p99_s=None,
        cold_starts=sum(b.cold_starts for b in bounds),
        cold_start_wait_p50_s=None,
        cold_start_wait_p99_s=None,
        gpu_seconds=gpu_s,
        gpu_seconds_busy=busy,
        gpu_seconds_idle=gpu_s - busy,
        gpu_seconds_spot=0.0,
        gpu_seconds_on_demand=gpu_s,
        cost=gpu_s * options.prices.on_demand_per_gpu_hour / 3600.0,
        peak_replicas=0,
        preemptions=0,
        duration_s=duration,
        gpu_seconds_serving=gpu_s,
        reaches_target=attainment >= options.always_on_attainment - 1e-9,
    )
