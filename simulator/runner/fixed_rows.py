"""The fixed-fleet rows: the frontier of fleets 1 to the ceiling, and the row chosen from it.

``always-on`` is the smallest fixed fleet whose SLO attainment reaches the
goal (99 %), or the ceiling when even that misses, and then its scorecard
says ``reaches_target`` false; the run scores every fleet from 1 to the
ceiling on the way (the frontier, :func:`simulator.frontier.fleet_frontier`),
which the row carries for the frontier verdicts. ``always-on-N`` is the
fleet of N, taken from the same frontier. With several models, each
model's fleet is chosen on its own and the runs merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from simulator.baselines import AlwaysOn
from simulator.frontier import Frontier, fleet_frontier
from simulator.oracle import cacheable_tokens, servable
from simulator.runner.models import merge_runs
from simulator.runner.options import SimulationOptions, fixed_size, is_fixed
from simulator.runner.result import PolicyRun
from simulator.scorecard import score
from simulator.traces import TraceRequest
from simulator.world import RunResult, run_world

__all__ = ["fixed_row", "frontier_for", "smallest_always_on", "wants_fleets"]


def smallest_always_on(
    requests: Sequence[TraceRequest], options: SimulationOptions
) -> tuple[int, RunResult]:
    """The smallest fixed fleet (up to the ceiling) that meets the attainment goal.

    When even the ceiling misses it, the ceiling's run (the caller checks).
    """
    cache: dict[int, RunResult] = {}

    def attainment(n: int) -> float:
        if n not in cache:
            cache[n] = run_world(requests, AlwaysOn(n), options.world)
        return score(cache[n], slo_ttft_s=options.slo_ttft_s).slo_attainment

    lo, hi = 1, options.max_replicas
    if attainment(hi) < options.always_on_attainment:
        return hi, cache[hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if attainment(mid) >= options.always_on_attainment:
            hi = mid
        else:
            lo = mid + 1
    attainment(lo)
    return lo, cache[lo]


def wants_fleets(policies: Sequence[str]) -> bool:
    return any(is_fixed(p) for p in policies)


def frontier_for(models: Sequence[Sequence[TraceRequest]], options: SimulationOptions) -> Frontier:
    engine = options.world.engine
    sizes = [n for p in options.policies if (n := fixed_size(p)) is not None]
    servable_counts = [
        servable(
            group,
            params=engine,
            slo_ttft_s=options.slo_ttft_s,
            cached_tokens=cacheable_tokens(group, engine.prefix_block_tokens),
        )
        for group in models
    ]
    return fleet_frontier(
        models,
        world=options.world,
        slo_ttft_s=options.slo_ttft_s,
        prices=options.prices,
        ceiling=max([options.max_replicas, *sizes]),
        servable=servable_counts,
        goal=options.always_on_attainment,
        keep=sizes,
        cache=options.fleet_cache,
    )


def fixed_row(policy: str, frontier: Frontier, options: SimulationOptions) -> PolicyRun:
    """``always-on`` (the smallest fleet reaching the goal) or ``always-on-N``: frontier runs."""
    size = fixed_size(policy)
    results = [
        runs[size if size is not None else smallest]
        for smallest, runs in zip(frontier.smallest, frontier.runs, strict=True)
    ]
    if size is not None:
        result = merge_runs(policy, results)
        card = score(result, slo_ttft_s=options.slo_ttft_s, prices=options.prices)
        return PolicyRun(card, result)
    result = merge_runs(f"always-on-{sum(frontier.smallest)}", results)
    card = score(result, slo_ttft_s=options.slo_ttft_s, prices=options.prices)
    reaches = all(
        score(r, slo_ttft_s=options.slo_ttft_s).slo_attainment >= options.always_on_attainment
        for r in results
    )
    return PolicyRun(replace(card, reaches_target=reaches), result, frontier.points)
