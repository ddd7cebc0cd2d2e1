"""The oracle: a lower bound on the GPU-seconds any schedule needs to meet an attainment.

The scoreboard's physical limit. Given a trace, the engine model, the cold
start ``C`` and a goal (a share ``A`` of requests with TTFT within the
objective), no schedule of replicas, however clairvoyant (replicas asked
for exactly one cold start before they are needed and removed the moment
they are not), uses fewer GPU-seconds than :func:`oracle_bound` returns.
It is a bound, not a schedule: it may be below what is achievable, never
above it. Each term and why it holds:

1. **Which requests can meet the objective at all.** A request alone on an
   idle replica gets its first token after its prefill steps, ``k`` steps
   of at most ``max_num_batched_tokens`` each:
   ``ttft_min = k x step_base_s + prompt / prefill_tokens_per_s``. A
   request whose ``ttft_min`` exceeds the objective, or whose prompt is over
   the context length (refused with a 400), misses in every schedule.
   (Prompt tokens a prefix cache could hold, blocks seen in an earlier
   request, are taken as free everywhere below.) The
   attainment the bound is computed for is the goal or, when fewer requests
   can meet it, the share that can ("the best the engine allows").
2. **Work.** Every step costs ``step_base_s + step_per_seq_s x decoding +
   prefill_tokens / prefill_tokens_per_s`` and decodes at most
   ``max_num_seqs`` sequences, so a request served costs the GPU at least
   ``w = prompt / prefill_tokens_per_s + (output - 1) x (step_base_s /
   max_num_seqs + step_per_seq_s)`` busy seconds (its cached prefix, when
   the trace names one, taken as free). The requests a schedule may let
   miss are at best the most expensive ones, so the work bound drops the
   ``m`` largest ``w`` (``m``: the requests the goal lets miss), adds the
   rest, and adds one cold start (every run starts from zero replicas, and
   a starting replica holds its GPU).

   **The prefix cache no better than the fleet's KV cache.** Taking every
   block seen before as cached is one infinitely large cache. The fleet
   holds at most ``max_replicas x kv_cache_tokens`` tokens of KV, so no
   schedule's caches together serve more prompt blocks than Belady's
   optimal replacement (evict the block used furthest in the future) on
   one cache of that size serves from the trace's block sequence
   (:func:`fleet_cache_hits`): Belady's is the most hits any cache of that
   size gets on that sequence, splitting it over replicas only loses hits,
   and a prefix hit is a hit. So the work is also at least the
   ``must_serve`` smallest uncached works less those hits' prefill; the
   work bound is the larger of the two.
3. **Presence.** A request that meets the objective needs a ready replica
   at its first token (within ``[a, a + slo]``) and until it finishes, no
   earlier than ``a + e2e_min`` (``e2e_min``: ``ttft_min`` plus one step
   of at least ``step_base_s + step_per_seq_s`` per further token). So some
   replica is ready throughout ``[a + slo, a + e2e_min]`` when that is not
   empty, and at some point of each request's window ``[a, a + max(slo,
   e2e_min)]``. Windows that overlap form clusters. Between two clusters
   some replica either stays ready the whole gap (``gap`` GPU-seconds) or
   none is ready at some moment of it, and then a replica that becomes
   ready after that moment pays a whole cold start ``C`` (distinct gaps
   need distinct replicas: each becomes ready once, within its own gap or
   the cluster after it). Hence ``C + |union of required intervals| + sum
   of min(gap, C)``. Letting ``m`` requests miss lowers this by at most
   the best fractional knapsack over "drop a whole cluster" (its required
   time and the gap after it, for its request count) and "drop one
   request" (its own required time): an upper bound on any real saving,
   so the result stays a lower bound. (Dropping a run of clusters removes
   the gaps inside and beside it and adds back the merged gap,
   ``min(merged, C) >= min(left gap, C)``, so the saving is at most the run's
   required time plus the gaps after each of its clusters; a run that ends
   the trace has no merged gap, and its last cluster is charged the gap
   before it instead.)

4. **Several replicas at once.** Requests arriving within ``[t, t + d]``
   must all have their prompts prefilled by ``t + d + slo``, and a replica
   prefills at most ``prefill_tokens_per_s``, so at some moment of the
   cluster at least ``k = ceil(P / (prefill_tokens_per_s x (d + slo)))``
   replicas are ready (``P``: those prompts, the cluster's ``m`` largest
   left out; ``d`` over a fixed ladder of lengths, each window found with
   two pointers). Counting replicas ready at ``t`` as levels (level ``j``
   is ready while at least ``j`` replicas are), every level ``j >= 2`` is
   ready in each cluster whose ``k >= j``, and the argument of (3) holds per
   level: a replica turning ready lifts exactly one level, so each level
   pays its own first cold start and, per gap between the clusters that
   need it, ``min(gap, C)``.

5. **Presence inside a cluster.** Term 3 charges a cluster only its
   required intervals, nothing for requests whose answers are short. But a
   request served within the objective needs a ready replica at some moment
   of ``[a, a + slo]``, and level 1 (some replica ready), once down, pays a
   cold start ``C`` to come back (a replica turning ready lifts one level;
   the first rise after a gap is the gap's, term 3, every further rise
   inside the cluster its own). Serve a cluster's arrivals ``a_1 <= ... <=
   a_n`` with ``m`` stretches of level 1: a stretch serving ``a_i..a_j`` is
   up from no later than ``a_i + slo`` to no earlier than ``a_j`` (with
   windows of one length, the stretches serve consecutive arrivals), so the
   cluster costs at least ``sum over stretches of max(0, a_j - a_i - slo) +
   (m - 1) C >= sum of min(gap, C - slo) - slo`` over its consecutive
   arrivals (each gap either stays inside a stretch or separates two, at
   ``C - slo`` at least). The cluster is charged the larger of this and its
   required time. With misses allowed, dropping one request saves at most
   its required time plus ``min(gap, C - slo)`` of the larger gap beside it
   (a run of dropped requests merges its gaps, and the merged gap still
   costs at least one of its parts), which the knapsack of term 3 adds per
   request. This term is what makes a steady trickle of
   short requests (a chat service at night) cost a replica all the time, as
   it must: without it the bound charged a dense hour of such requests one
   cold start.

The bound is the larger of (2) and the sum of (3), (4) and (5). It is still loose
(levels are charged only at one moment of a cluster, not for as long as a
burst needs them): read the gap between a policy and the oracle as an upper
bound on what a better policy could save.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from simulator.engine import LlmParams
from simulator.traces import TraceRequest

__all__ = ["OracleBound", "cacheable_tokens", "fleet_cache_hits", "oracle_bound", "servable"]


@dataclass(frozen=True, slots=True)
class OracleBound:
    gpu_seconds: float
    busy_seconds: float  # the work term (2), without the cold start
    attainment: float  # the share of requests the bound is computed for
    cold_starts: int  # the cold starts the bound charges (not a bound on any schedule's count)
    requests: int


@dataclass(slots=True)
class _Cluster:
    start: float
    end: float
    count: int
    required: list[tuple[float, float]]
    prompts: list[tuple[float, int]]  # (arrival, prompt tokens to prefill)
    own_required: list[float]  # per request, in arrival order: its required time


# Window lengths (s) over which a cluster's prefill must fit: the bound takes
# the most demanding, so more rungs only tighten it.
_LADDER_S = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)


def _replicas_needed(
    prompts: list[tuple[float, int]], *, params: LlmParams, slo_ttft_s: float, may_miss: int
) -> int:
    """Replicas ready at once somewhere in the cluster (term 4 of the module docstring)."""
    if may_miss >= len(prompts):
        return 0
    kept = sorted(prompts, key=lambda p: p[1])[: len(prompts) - may_miss] if may_miss else prompts
    kept = sorted(kept)
    best = 1
    for span in _LADDER_S:
        lo, tokens, most = 0, 0, 0
        for arrival, prompt in kept:
            tokens += prompt
            while kept[lo][0] < arrival - span:
                tokens -= kept[lo][1]
                lo += 1
            most = max(most, tokens)
        need = math.ceil(most / (params.prefill_tokens_per_s * (span + slo_ttft_s)) - 1e-9)
        best = max(best, need)
    return best


def _ttft_min(prompt: int, params: LlmParams) -> float:
    steps = max(1, math.ceil(prompt / params.max_num_batched_tokens))
    return steps * params.step_base_s + prompt / params.prefill_tokens_per_s


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for lo, hi in sorted(intervals):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total


def cacheable_tokens(requests: Sequence[TraceRequest], block_tokens: int) -> list[int]:
    """Per request, the most prompt tokens any prefix cache could hold for it.

    Its leading blocks that some earlier request carried: no replica's cache
    can hold a block before a request brought it.
    """
    seen: set[int | str] = set()
    out: list[int] = []
    for r in requests:
        hits = 0
        for block in r.prefix:
            if block not in seen:
                break
            hits += 1
        out.append(hits * block_tokens)
        seen.update(r.prefix)
    return out


def fleet_cache_hits(requests: Sequence[TraceRequest], capacity_blocks: int) -> int:
    """Block hits of Belady's optimal replacement on one cache of ``capacity_blocks``.

    The requests' prompt blocks in arrival order are the access sequence; a
    hit is an access to a block in the cache. Belady's rule (on a miss with
    the cache full, evict the block whose next use is furthest away, or
    never) maximizes hits for the size, and so bounds any fleet of that
    total size; a block that is never used again is not kept at all.
    """
    accesses = [block for r in requests for block in r.prefix]
    if capacity_blocks <= 0 or not accesses:
        return 0
    never = len(accesses)
    following = [never] * len(accesses)
    last: dict[int | str, int] = {}
    for index in range(len(accesses) - 1, -1, -1):
        following[index] = last.get(accesses[index], never)
        last[accesses[index]] = index
    if len(last) <= capacity_blocks:
        # Everything fits: every access after a block's first is a hit.
        return len(accesses) - len(last)
    cached: dict[int | str, int] = {}  # block -> its next use
    heap: list[tuple[int, int | str]] = []  # (-next use, block), stale entries skipped
    hits = 0
    for index, block in enumerate(accesses):
        if block in cached:
            hits += 1
        elif len(cached) >= capacity_blocks:
            while True:
                use, victim = heapq.heappop(heap)
                if cached.get(victim) == -use:
                    break
            if -use < following[index]:
                # The newcomer is needed later than anything cached: keep them.
                heapq.heappush(heap, (use, victim))
                continue
            del cached[victim]
        if following[index] == never:
            cached.pop(block, None)
            continue
        cached[block] = following[index]
        heapq.heappush(heap, (-following[index], block))
    return hits


def servable(
    requests: Sequence[TraceRequest],
    *,
    params: LlmParams,
    slo_ttft_s: float,
    cached_tokens: Sequence[int] | None = None,
) -> int:
    """How many of ``requests`` any schedule could meet the objective for (term 1).

    A prompt at or over the context length is refused; one whose prefill
    alone, on an idle replica, takes longer than the objective misses.
    """
    limit = min(params.max_model_len, params.kv_cache_tokens)
    count = 0
    for index, r in enumerate(requests):
        prompt = max(1, r.prompt_tokens)
        if prompt >= limit:
            continue
        cached = 0 if cached_tokens is None else min(cached_tokens[index], prompt - 1)
        if _ttft_min(prompt - cached, params) <= slo_ttft_s + 1e-9:
            count += 1
    return count


def oracle_bound(
    requests: Sequence[TraceRequest],
    *,
    params: LlmParams,
    cold_start_s: float,
    slo_ttft_s: float,
    attainment: float = 0.99,
    context_tokens: int | None = None,
    cached_tokens: Sequence[int] | None = None,
    fleet_cached_tokens: int | None = None,
) -> OracleBound:
    """The lower bound of the module docstring for one model's ``requests``.

    ``cached_tokens``: per request, the most of its prompt any cache could
    hold (:func:`cacheable_tokens`); ``fleet_cached_tokens``: the most
    prompt tokens the fleet's caches can serve in all (Belady's hits,
    :func:`fleet_cache_hits`, times the block size; None: no such cap).
    """
    if not 0 < attainment <= 1:
        raise ValueError(f"the attainment goal is a share within (0, 1], got {attainment}")
    n = len(requests)
    if n == 0:
        raise ValueError("the oracle needs at least one request")
    decode_step_s = params.step_base_s + params.step_per_seq_s
    per_token_work = params.step_base_s / params.max_num_seqs + params.step_per_seq_s
    works: list[float] = []
    uncached: list[float] = []  # the same requests' works with no prefix cached
    windows: list[tuple[float, float, tuple[float, float] | None, int]] = []
    for index, r in enumerate(requests):
        prompt, output = max(1, r.prompt_tokens), max(1, r.output_tokens)
        if context_tokens is not None and prompt >= context_tokens:
            continue
        cached = 0 if cached_tokens is None else min(cached_tokens[index], prompt - 1)
        fresh = prompt - cached
        ttft = _ttft_min(fresh, params)
        if ttft > slo_ttft_s + 1e-9:
            continue
        decode = (output - 1) * per_token_work
        works.append(fresh / params.prefill_tokens_per_s + decode)
        uncached.append(prompt / params.prefill_tokens_per_s + decode)
        e2e = ttft + (output - 1) * decode_step_s
        start = r.offset_s
        required = (start + slo_ttft_s, start + e2e) if e2e > slo_ttft_s else None
        windows.append((start, start + max(slo_ttft_s, e2e), required, fresh))
    feasible = len(works)
    goal = min(attainment, feasible / n)
    must_serve = math.ceil(goal * n - 1e-9)
    may_miss = max(0, feasible - must_serve)
    if must_serve == 0:
        return OracleBound(0.0, 0.0, goal, 0, n)
    works.sort()
    busy = sum(works[: len(works) - may_miss])
    if fleet_cached_tokens is not None:
        uncached.sort()
        capped = sum(uncached[: len(uncached) - may_miss])
        busy = max(busy, capped - fleet_cached_tokens / params.prefill_tokens_per_s)
    work_bound = cold_start_s + busy
    presence, starts = _presence(
        windows, cold_start_s, may_miss, params=params, slo_ttft_s=slo_ttft_s
    )
    return OracleBound(max(work_bound, presence), busy, goal, starts, n)


def _presence(
    windows: list[tuple[float, float, tuple[float, float] | None, int]],
    c: float,
    may_miss: int,
    *,
    params: LlmParams,
    slo_ttft_s: float,
) -> tuple[float, int]:
    windows.sort(key=lambda w: w[0])
    clusters: list[_Cluster] = []
    for lo, hi, required, fresh in windows:
        if clusters and lo <= clusters[-1].end:
            last = clusters[-1]
            last.end = max(last.end, hi)
            last.count += 1
        else:
            clusters.append(_Cluster(lo, hi, 1, [], [], []))
        clusters[-1].prompts.append((lo, fresh))
        clusters[-1].own_required.append(0.0 if required is None else required[1] - required[0])
        if required is not None:
            clusters[-1].required.append(required)
    levels, level_starts = _upper_levels(
        clusters, c, may_miss, params=params, slo_ttft_s=slo_ttft_s
    )
    gaps = [b.start - a.end for a, b in itertools.pairwise(clusters)]
    # Within a cluster: the required time, or the piercing time (term 5).
    lengths = [max(_union_length(k.required), _pierced(k, c, slo_ttft_s)) for k in clusters]
    total = c + sum(lengths) + sum(min(g, c) for g in gaps)
    starts = 1 + sum(1 for g in gaps if g > c) + level_starts
    if may_miss == 0:
        return total + levels, starts
    # Items (value, weight): drop a whole cluster, or one request's required time.
    items: list[tuple[float, int]] = []
    for index, cluster in enumerate(clusters):
        # Each cluster is charged the gap after it (the last one the gap
        # before it): dropping a run of clusters saves at most the gaps
        # inside and beside the run less the merged gap, and that is at most
        # the run's right-hand gaps (see the module docstring).
        if index < len(gaps):
            beside = min(gaps[index], c)
        else:
            beside = min(gaps[index - 1], c) if index > 0 else 0.0
        items.append((lengths[index] + beside, cluster.count))
        # One request: its required time, plus (term 5) at most the larger
        # of its gaps to the arrivals beside it in the cluster.
        arrivals = [a for a, _ in cluster.prompts]
        keep_up = max(0.0, c - slo_ttft_s)
        steps = [0.0, *(min(b - a, keep_up) for a, b in itertools.pairwise(arrivals)), 0.0]
        items.extend(
            (own + max(steps[i], steps[i + 1]), 1) for i, own in enumerate(cluster.own_required)
        )
    items.sort(key=lambda item: item[0] / item[1], reverse=True)
    budget, saving = float(may_miss), 0.0
    for value, weight in items:
        if budget <= 0:
            break
        take = min(1.0, budget / weight)
        saving += value * take
        budget -= weight * take
    return max(c, total - saving) + levels, starts


def _pierced(cluster: _Cluster, c: float, slo_ttft_s: float) -> float:
    """Term 5 for one cluster: ``sum of min(gap, C - slo) - slo`` over its arrivals."""
    arrivals = [a for a, _ in cluster.prompts]
    keep_up = max(0.0, c - slo_ttft_s)
    total = sum(min(b - a, keep_up) for a, b in itertools.pairwise(arrivals))
    return max(0.0, total - slo_ttft_s)


def _upper_levels(
    clusters: list[_Cluster], c: float, may_miss: int, *, params: LlmParams, slo_ttft_s: float
) -> tuple[float, int]:
    """Levels 2 and up (term 4): their cold starts and the gaps they bridge."""
    needs = [
        _replicas_needed(k.prompts, params=params, slo_ttft_s=slo_ttft_s, may_miss=may_miss)
        for k in clusters
    ]
    cost, starts = 0.0, 0
    for level in range(2, max(needs, default=0) + 1):
        previous: _Cluster | None = None
        for cluster, need in zip(clusters, needs, strict=True):
            if need < level:
                continue
            if previous is None:
                cost += c
                starts += 1
            else:
                gap = cluster.start - previous.end
                cost += min(gap, c)
                starts += gap > c
            previous = cluster
    return cost, starts
