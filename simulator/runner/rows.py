"""Every selected row over one trace: the tasks, run side by side, and the rows in order.

A row is a task (:class:`_Job` runs any one), except the fixed-fleet rows,
which share one task, the frontier, and the oracle's, a bound computed
from the trace once the other rows are in. With ``options.jobs`` above 1
the tasks run in that many processes (:mod:`simulator.parallel`); the rows
come back in the order ``options.policies`` names them, the answers the
same, each with the CPU it took (the first fixed-fleet row carries the
frontier's).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from simulator.frontier import Frontier
from simulator.parallel import run_tasks
from simulator.runner.autoscalers import factories, tidal_factory, with_starting_fleet, world_for
from simulator.runner.fixed_rows import fixed_row, frontier_for, wants_fleets
from simulator.runner.models import by_model, merge_runs
from simulator.runner.options import (
    WARM_ANNOTATIONS,
    SimulationOptions,
    is_fixed,
    tidal_annotations,
)
from simulator.runner.oracle_row import oracle_card
from simulator.runner.result import PolicyRun
from simulator.scorecard import score
from simulator.traces import TraceRequest
from simulator.warm_tier import POOL_POLICIES, run_pool
from simulator.world import run_world

__all__ = ["run_policies", "task_count"]


def run_policies(
    requests: Sequence[TraceRequest], options: SimulationOptions | None = None
) -> list[PolicyRun]:
    """Every selected policy over ``requests``, in the order ``options.policies`` names them.

    With ``options.jobs`` above 1 the rows (and the frontier) run side by
    side in that many processes (:mod:`simulator.parallel`); the answers
    are the same.
    """
    options = options or SimulationOptions()
    if not requests:
        raise ValueError("the trace has no requests")
    tasks = _tasks(options.policies, spot=options.spot_placement is not None)
    done = dict(zip(tasks, run_tasks(_Job(requests, options), tasks, options.jobs), strict=True))
    frontier = done.pop(_FRONTIER, None)
    runs: list[PolicyRun] = []
    frontier_cpu = 0.0 if frontier is None else frontier.cpu_s
    for policy in options.policies:
        if policy == "oracle":
            started = time.process_time()
            card = oracle_card(requests, by_model(requests), runs, options)
            runs.append(PolicyRun(card, None, cpu_s=time.process_time() - started))
        elif is_fixed(policy):
            assert isinstance(frontier, _FrontierRun)  # built whenever a fixed fleet is asked for
            started = time.process_time()
            row = fixed_row(policy, frontier.frontier, options)
            spent = time.process_time() - started + frontier_cpu
            frontier_cpu = 0.0
            runs.append(replace(row, cpu_s=spent))
        else:
            run = done[policy]
            assert isinstance(run, PolicyRun)
            runs.append(run)
    if options.spot_placement is not None:
        spot = done["tidal-spot"]
        assert isinstance(spot, PolicyRun)
        runs.append(spot)
    return runs


# The task that builds the frontier, beside the rows' own names.
_FRONTIER = "<frontier>"


def _tasks(policies: Sequence[str], *, spot: bool) -> list[str]:
    """What runs: the frontier (for the fixed rows), each other row but the oracle's."""
    rows = [p for p in policies if p != "oracle" and not is_fixed(p)]
    frontier = [_FRONTIER] if wants_fleets(policies) else []
    return [*frontier, *rows, *(["tidal-spot"] if spot else [])]


def task_count(policies: Sequence[str], *, spot: bool) -> int:
    """How many runs :func:`run_policies` makes for these policies (for a progress bar)."""
    return len(_tasks(policies, spot=spot))


@dataclass(frozen=True, slots=True)
class _FrontierRun:
    frontier: Frontier
    cpu_s: float


class _Job:
    """One trace under one set of options: runs any row of it, or the frontier."""

    def __init__(self, requests: Sequence[TraceRequest], options: SimulationOptions) -> None:
        self.requests = requests
        self.options = options

    def __call__(self, task: str) -> PolicyRun | _FrontierRun:
        started = time.process_time()
        models = by_model(self.requests)
        if task == _FRONTIER:
            frontier = frontier_for(models, self.options)
            return _FrontierRun(frontier, time.process_time() - started)
        if task in POOL_POLICIES:
            run = _pool_row(task, self.requests, self.options)
        else:
            run = _world_row(task, models, self.options)
        return replace(run, cpu_s=time.process_time() - started)


def _world_row(
    policy: str, models: Sequence[Sequence[TraceRequest]], options: SimulationOptions
) -> PolicyRun:
    """An autoscaler's row: one world per model, merged, scored."""
    if policy == "tidal-spot":
        assert options.spot_placement is not None
        world = replace(options.world, placement=options.spot_placement)
        factory = tidal_factory("tidal-spot", options)
    else:
        world = world_for(policy, options)
        factory = factories(options)[policy]
    results = [
        run_world(group, with_starting_fleet(factory(group), group, options), world)
        for group in models
    ]
    result = merge_runs(policy, results)
    card = score(result, slo_ttft_s=options.slo_ttft_s, prices=options.prices)
    return PolicyRun(card, result)


def _pool_row(
    policy: str, requests: Sequence[TraceRequest], options: SimulationOptions
) -> PolicyRun:
    annotations = tidal_annotations(policy, options)
    if policy == "tidal-warm":
        annotations = {**annotations, **options.warm_annotations}
    else:  # scale-to-zero alone, even when the caller's annotations set the tier
        annotations = {k: v for k, v in annotations.items() if k not in WARM_ANNOTATIONS}
    pooled = run_pool(
        requests,
        name=policy,
        annotations=annotations,
        pool=options.pool,
        world=options.world,
        slo_ttft_s=options.slo_ttft_s,
        prices=options.prices,
    )
    return PolicyRun(pooled.scorecard, pooled.result)
