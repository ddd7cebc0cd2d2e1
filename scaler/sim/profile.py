"""What one replica can carry at a TTFT objective: a profile of the engine model.

The predictive planner baseline (Dynamo's SLA planner) sizes a fleet as
predicted load over per-replica capacity, where the capacity comes from
profiling the engine before deployment. This module does that profiling on
the very engine model the simulated replicas run: requests of the given
mean prompt and output lengths arrive evenly spaced for
:data:`PROFILE_SECONDS`, and the capacity is the highest rate (requests per
second, found by bisection) at which their mean TTFT stays within the
objective, as Dynamo's profiler picks the highest throughput per GPU that
meets the TTFT target.

Main decision: lengths are rounded to buckets about 10 % apart before
profiling, and results are cached per bucket, so a planner that predicts a
slightly different mean length every interval does not profile again (one
profile costs about a second of CPU).
"""

from __future__ import annotations

import math
from functools import lru_cache

from scaler.sim.engine import Arrival, LlmParams, simulate

__all__ = ["PROFILE_SECONDS", "capacity_rps"]

PROFILE_SECONDS = 30.0
_BUCKET = 1.1
_STEPS = 12


def _bucket(tokens: float) -> int:
    """``tokens`` rounded to the nearest power of 1.1 (at least 1)."""
    if tokens <= 1:
        return 1
    return max(1, round(_BUCKET ** round(math.log(tokens, _BUCKET))))


def capacity_rps(params: LlmParams, isl: float, osl: float, slo_ttft_s: float) -> float:
    """Requests per second one replica serves with mean TTFT within ``slo_ttft_s``.

    0 when even one request alone misses the objective (its prompt is too
    long for it).
    """
    if not slo_ttft_s > 0:
        raise ValueError(f"the TTFT objective must be > 0 s, got {slo_ttft_s}")
    return _capacity(params, _bucket(isl), _bucket(osl), slo_ttft_s)


def _mean_ttft(params: LlmParams, isl: int, osl: int, rate: float) -> float:
    count = max(1, int(rate * PROFILE_SECONDS))
    prompt = min(isl, params.kv_cache_tokens - osl) if osl < params.kv_cache_tokens else 1
    arrivals = [Arrival(i / rate, max(1, prompt), max(1, osl)) for i in range(count)]
    result = simulate(arrivals, params)
    return sum(r.ttft_s for r in result.records) / len(result.records)


@lru_cache(maxsize=256)
def _capacity(params: LlmParams, isl: int, osl: int, slo_ttft_s: float) -> float:
    if _mean_ttft(params, isl, osl, 1.0 / PROFILE_SECONDS) > slo_ttft_s:
        return 0.0
    lo, hi = 1.0 / PROFILE_SECONDS, 1.0
    while _mean_ttft(params, isl, osl, hi) <= slo_ttft_s and hi < 10_000:
        lo, hi = hi, hi * 2
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        if _mean_ttft(params, isl, osl, mid) <= slo_ttft_s:
            lo = mid
        else:
            hi = mid
    return lo
