"""The scorecard of one simulated run: latency as a user feels it, and what it cost.

Per policy:

- **SLO attainment**: the share of *all* requests whose time to first token
  is within one threshold (default 2 s). A request that waited for a cold
  start counts with its whole wait, as its user felt it; a failed request
  misses the SLO.
- **goodput**: requests that met the SLO per second of the run.
- **cold starts**: transitions from zero ready replicas to one or more, and
  the wait they added to the requests held through them (p50, p99).
- **failed**: requests refused or timed out (the proxy's buffer full, its
  hold timeout), refused by the server (a prompt over the context length)
  or lost with a preempted spot replica, by reason.
- **GPU-seconds**: the devices held, each whole from its first pod to its
  last (one replica's own device, from its creation to its removal; on the
  warm tier's shared pool, a device however many pods share it), split into
  busy (the engine stepping) and idle, into spot and on-demand, and into
  serving, starting (in a cold start, nothing served yet) and sleeping-only
  (every pod there asleep: paid for nothing); **cost** at the stated prices
  (spot a fraction of on-demand, 0.35 by default).
- **first cold start**: the requests that arrived before the run's first
  replica was ready and missed the objective, what starting from zero cost
  the row (0 for a warm start).
- **prefix hit rate** (``tidal simulate --routing``): prompt tokens served
  from the replicas' prefix caches over all they were sent, vLLM's
  ``prefix_cache_hits / prefix_cache_queries`` (:func:`prefix_hit_rate`).

Percentiles are nearest-rank (the value at or below which the given share
of samples falls), so they are always one of the observed values.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from simulator.world import SPOT, RunResult

__all__ = ["Prices", "Scorecard", "percentile", "prefix_hit_rate", "score"]


@dataclass(frozen=True, slots=True)
class Prices:
    """GPU prices per hour. The on-demand default is illustrative (about what clouds
    charged for one H100 in 2025); only ratios between policies matter."""

    on_demand_per_gpu_hour: float = 4.0
    spot_ratio: float = 0.35
    # A world of GPU shapes: dollars per replica-hour of each (on demand).
    per_shape: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.on_demand_per_gpu_hour) and self.on_demand_per_gpu_hour >= 0):
            raise ValueError(
                f"on-demand price must be >= 0 per GPU-hour, got {self.on_demand_per_gpu_hour}"
            )
        if not (math.isfinite(self.spot_ratio) and 0 <= self.spot_ratio <= 1):
            raise ValueError(f"spot price ratio must be within 0..1, got {self.spot_ratio}")


def percentile(values: Sequence[float], share: float) -> float | None:
    """Nearest-rank percentile (``share`` in 0..100) of ``values``; None when empty."""
    if not 0 <= share <= 100:
        raise ValueError(f"a percentile is within 0..100, got {share}")
    if not values:
        return None
    return _ranked(sorted(values), share)


def _ranked(ordered: Sequence[float], share: float) -> float | None:
    """:func:`percentile` of values already in order (a day's TTFTs are sorted once)."""
    if not ordered:
        return None
    rank = max(1, math.ceil(share / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class Scorecard:
    name: str
    requests: int
    slo_ttft_s: float
    slo_attainment: float
    goodput_rps: float
    completed: int
    failed: int
    failed_by_reason: dict[str, int]
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    cold_starts: int
    cold_start_wait_p50_s: float | None
    cold_start_wait_p99_s: float | None
    gpu_seconds: float
    gpu_seconds_busy: float
    gpu_seconds_idle: float
    gpu_seconds_spot: float
    gpu_seconds_on_demand: float
    cost: float
    peak_replicas: int
    preemptions: int
    duration_s: float
    # The GPU-seconds held, each device counted whole however many pods
    # share it, split by what its pods were doing (scaler.policy.warm_tier.gpu_use):
    # serving (a pod awake or waking there), starting (none awake, one in its
    # cold start), sleeping-only (every pod there asleep: paid for nothing).
    # The three add up to ``gpu_seconds``; wakes are the warm tier's.
    gpu_seconds_serving: float = 0.0
    gpu_seconds_sleeping_only: float = 0.0
    gpu_seconds_starting: float = 0.0
    wakes: int = 0
    # always-on and the oracle: whether the attainment goal (99 %) is met;
    # None (left out of the JSON) for the autoscalers, which have no goal.
    reaches_target: bool | None = None
    # ``tidal simulate --routing``: the balancing the run used, and the share
    # of prompt tokens served from prefix caches (None, left out of the JSON,
    # without the flag or for a trace with no prompt block ids).
    routing: str | None = None
    prefix_hit_rate: float | None = None
    # Requests that arrived before the run's first replica was ready and
    # missed the objective: what the first cold start cost (0 when warm).
    first_cold_start_missed: int = 0
    # ``tidal simulate --cold-start`` with a list: the median this row ran with.
    cold_start_s: float | None = None

    def as_json(self) -> dict[str, object]:
        data = asdict(self)
        for optional in ("reaches_target", "routing", "prefix_hit_rate", "cold_start_s"):
            if data[optional] is None:
                del data[optional]
        for key, value in data.items():
            if isinstance(value, float):
                data[key] = round(value, 4)
        return data


def prefix_hit_rate(result: RunResult) -> float | None:
    """Prompt tokens served from the replicas' prefix caches over those they were sent.

    vLLM's ``prefix_cache_hits / prefix_cache_queries`` summed over the
    replicas; None when no replica took a request (the oracle, an idle run).
    """
    queried = sum(life.queried_tokens for life in result.replicas)
    if not queried:
        return None
    return sum(life.cached_tokens for life in result.replicas) / queried


def score(result: RunResult, *, slo_ttft_s: float = 2.0, prices: Prices | None = None) -> Scorecard:
    """Score ``result`` (see the module docstring)."""
    if not slo_ttft_s > 0:
        raise ValueError(f"the TTFT threshold must be > 0 s, got {slo_ttft_s}")
    prices = prices or Prices()
    n = len(result.arrival_s)
    # A request lost with a preempted replica may have had its first token:
    # it failed all the same, so it neither meets the SLO nor counts in TTFT.
    # Sorted as they are drawn: a day of requests is never held twice.
    ttfts = sorted(
        first - arrival
        for arrival, first, failed in zip(
            result.arrival_s, result.first_token_s, result.failed_reason, strict=True
        )
        if first is not None and failed is None
    )
    met = bisect_right(ttfts, slo_ttft_s + 1e-9)
    first_ready = next((s.at_s for s in result.timeline if s.ready > 0), math.inf)
    first_missed = sum(
        1
        for arrival, first, failed in zip(
            result.arrival_s, result.first_token_s, result.failed_reason, strict=True
        )
        if arrival < first_ready
        and (failed is not None or first is None or first - arrival > slo_ttft_s + 1e-9)
    )
    reasons = Counter(r for r in result.failed_reason if r is not None)
    completed = sum(1 for f in result.finished_s if f is not None)
    total = busy = spot = starting = cost = 0.0
    per_second = prices.on_demand_per_gpu_hour / 3600.0
    for life in result.replicas:
        seconds = life.ended_s - life.created_s
        total += seconds
        busy += life.busy_s
        if life.ready_s is not None:
            starting += min(max(0.0, life.ready_s - life.created_s), seconds)
        if life.shape in prices.per_shape:  # a GPU shape's own price per replica-hour
            cost += seconds * prices.per_shape[life.shape] / 3600.0
        elif life.capacity == SPOT:
            spot += seconds
            cost += seconds * per_second * prices.spot_ratio
        else:
            cost += seconds * per_second
    on_demand = total - spot
    duration = max(result.end_s, 1e-9)
    return Scorecard(
        name=result.name,
        requests=n,
        slo_ttft_s=slo_ttft_s,
        slo_attainment=met / n if n else 0.0,
        goodput_rps=met / duration,
        completed=completed,
        failed=sum(reasons.values()),
        failed_by_reason=dict(sorted(reasons.items())),
        ttft_p50_s=_ranked(ttfts, 50),
        ttft_p99_s=_ranked(ttfts, 99),
        cold_starts=result.cold_starts,
        cold_start_wait_p50_s=percentile(result.cold_start_wait_s, 50),
        cold_start_wait_p99_s=percentile(result.cold_start_wait_s, 99),
        gpu_seconds=total,
        gpu_seconds_busy=busy,
        gpu_seconds_idle=total - busy,
        gpu_seconds_spot=spot,
        gpu_seconds_on_demand=on_demand,
        cost=cost,
        peak_replicas=max((s.ready for s in result.timeline), default=0),
        preemptions=result.preemptions,
        duration_s=result.end_s,
        gpu_seconds_serving=total - starting,
        gpu_seconds_starting=starting,
        first_cold_start_missed=first_missed,
    )
