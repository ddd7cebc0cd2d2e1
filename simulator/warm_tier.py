"""The warm tier in ``tidal simulate``: many models on a pool of time-sliced devices.

:mod:`simulator.world` follows each model on devices of its own; the warm
tier's gain is about many rarely used models *sharing* devices, so this
module runs a whole pool, in two policies scored on the same scorecard:

- ``tidal-pool``: Tidal's scale-to-zero alone. A model's pod exists from its
  first request (after a cold start) until it has been idle for the grace
  period; while it exists it is awake and holds its memory, so a device
  holds only as many pods as fit awake (and at most ``slices``, the NVIDIA
  device plugin's time-sliced replicas); a new pod takes the first device
  where it fits.
- ``tidal-warm``: the same plus ``sleep-after`` and ``sleep-level``: an idle
  pod sleeps, and a request for it waits for a wake and a one-token warm-up
  instead of a cold start. The product's rules decide
  (:mod:`scaler.policy.warm_tier`):

  - *where a new pod goes*: beside models already serving, where its sleep
    will cost nothing and a sleeper there can still wake
    (:func:`~scaler.policy.warm_tier.choose_site`); a device is opened only
    when no held one has room;
  - *how deep a pod sleeps*: level 1 where its node's host memory holds the
    weights, else level 2, and at the end of the grace period level or zero,
    on expected cost with each rung's way back
    (:func:`~scaler.policy.warm_tier.choose_depth`);
  - *room*: what sleeps so that a wake or a new pod fits, a wake that waits
    for a request about to finish, an idle pod slept early to keep a hole
    for its sleeping neighbours (:mod:`scaler.policy.warm_tier.room`);
  - *emptying*: a device left holding only sleepers is emptied when that is
    cheaper than keeping it (:func:`~scaler.policy.warm_tier.plan_emptying`):
    each sleeper is moved as a cluster moves a pod (a replacement starts on
    a serving device, and the old pod is removed once it is ready; a request
    meanwhile wakes the old one) or goes to zero.

The bill (:mod:`simulator.pool_books`): a device counts whole from its first
pod to its last, split into serving, starting and sleeping-only seconds.

Simplifications, said plainly: each model has one pod (two while it moves);
a request is served as if alone on it (prefill, then one decode step per
output token, timed by the engine model's :class:`~simulator.engine.LlmParams`),
which suits rarely used models but not busy ones; each device is its own
node; the adaptive grace period is not modelled (its configured value is
used). A request held longer than the activator's cold-start timeout fails,
as in the world.

Main decision: both policies share one event loop and differ only in what
the tier's deadlines and placement do, so any difference in the scorecard
comes from the tier.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scaler.policy.protocol import PurePolicy
from simulator.pool_books import PoolConfig, WarmCounts
from simulator.pool_run import PoolSim
from simulator.scorecard import Prices, Scorecard, score
from simulator.traces import TraceRequest
from simulator.world import RunResult, Second, WorldConfig

__all__ = ["POOL_POLICIES", "PoolConfig", "PoolRun", "WarmCounts", "run_pool"]

POOL_POLICIES = ("tidal-pool", "tidal-warm")


@dataclass(frozen=True, slots=True)
class PoolRun:
    scorecard: Scorecard
    result: RunResult
    counts: WarmCounts


def _timeline(
    requests: Sequence[TraceRequest], finished: Sequence[float | None], end_s: float
) -> tuple[Second, ...]:
    seconds = math.ceil(end_s) + 1
    arrivals = [0] * seconds
    load = [0.0] * seconds
    for r, done in zip(requests, finished, strict=True):
        arrivals[min(int(r.offset_s), seconds - 1)] += 1
        stop = r.offset_s if done is None else done
        t = r.offset_s
        while t < stop:  # held plus in flight, averaged over each second
            edge = min(stop, math.floor(t) + 1.0)
            load[min(int(t), seconds - 1)] += edge - t
            t = edge
    return tuple(Second(float(s), arrivals[s], load[s], 0, 0) for s in range(seconds))


def run_pool(
    requests: Sequence[TraceRequest],
    *,
    name: str,
    annotations: Mapping[str, str],
    pool: PoolConfig | None = None,
    world: WorldConfig | None = None,
    slo_ttft_s: float = 2.0,
    prices: Prices | None = None,
) -> PoolRun:
    """Run the pool under Tidal's policy as ``annotations`` configure it, and score it.

    With ``autoscaling.tidal.dev/sleep-after`` set the warm tier is on; without,
    it is scale-to-zero alone. ``requests`` are sorted by offset; their
    ``model`` field says which model each wants.
    """
    if not requests:
        raise ValueError("a simulation needs at least one request")
    world = world or WorldConfig()
    config = PurePolicy(cold_start_estimate_s=world.cold_start.median_s).parse(dict(annotations))
    sim = PoolSim(config, pool or PoolConfig(), world, slo_ttft_s=slo_ttft_s)
    first: list[float | None] = []
    done: list[float | None] = []
    failed: list[str | None] = []
    held_waits: list[float] = []
    for r in requests:
        token, finished, reason, held = sim.request(r)
        first.append(token)
        done.append(finished)
        failed.append(reason)
        if held:
            held_waits.append(
                (token if token is not None else r.offset_s + world.cold_start_timeout_s)
                - r.offset_s
            )
    last = max([r.offset_s for r in requests] + [d for d in done if d is not None])
    end_s = sim.finish(float(math.floor(last) + 1))
    books = sim.books
    result = RunResult(
        name=name,
        arrival_s=tuple(r.offset_s for r in requests),
        first_token_s=tuple(first),
        finished_s=tuple(done),
        output_tokens=tuple(r.output_tokens for r in requests),
        failed_reason=tuple(failed),
        cold_start_wait_s=tuple(held_waits),
        cold_starts=sim.cold_starts,
        replicas=tuple(books.lives),
        timeline=_timeline(requests, done, end_s),
        end_s=end_s,
        preemptions=0,
    )
    card = score(result, slo_ttft_s=slo_ttft_s, prices=prices)
    card = replace(
        card,
        gpu_seconds_serving=books.seconds.serving,
        gpu_seconds_sleeping_only=books.seconds.sleeping_only,
        gpu_seconds_starting=books.seconds.starting,
        wakes=sim.counts.wakes,
        peak_replicas=books.peak,
    )
    counts = replace(sim.counts, peak_gpus=books.peak)
    return PoolRun(card, result, counts)
