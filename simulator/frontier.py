"""The fixed-fleet frontier: every fleet from one replica to the ceiling, scored in one run.

A policy's row means little without the fleets around it: "not dominated"
by the smallest fleet that reaches the goal says nothing of a fleet a third
its size that does nearly as well. So every fixed fleet of 1 to
``max_replicas`` replicas (per model) is scored, and the Pareto chart draws
them as a line.

Main decision, what keeps a ceiling of 30 cheap: fleets are run from one
replica up, and a model stops being run at the first fleet that

- meets every request any schedule can meet (those whose prompt fits the
  context and whose prefill alone meets the objective,
  :func:`simulator.oracle.servable`): no larger fleet can meet more, so
  larger fleets cannot matter; or
- is on a plateau: within 90 % of that most, and this fleet and the one
  before each met fewer than 0.1 % more requests than the one below them
  (a rule of thumb, not a proof: what is left to gain is the requests that
  miss however many replicas are ready, prompts just short of the limit).

Each fleet's run is taken from a :class:`~simulator.fleet_cache.FleetCache`
when the caller gives one (a fleet's run depends on the trace and the
world, never on the row or the objective it is scored for).

A fixed fleet holds every replica for the whole run, so each larger fleet
is carried from the last run: the same requests met, GPU-seconds and cost
in proportion to its size (such points say ``simulated`` false).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from simulator.baselines import AlwaysOn
from simulator.fleet_cache import FleetCache
from simulator.scorecard import Prices, score
from simulator.traces import TraceRequest
from simulator.world import RunResult, WorldConfig, run_world

__all__ = ["FleetPoint", "Frontier", "fleet_frontier"]


@dataclass(frozen=True, slots=True)
class FleetPoint:
    """One fixed fleet's score; ``replicas`` per model."""

    replicas: int
    slo_attainment: float
    gpu_seconds: float
    cost: float
    simulated: bool  # False: carried from the smallest fleet that meets all it can

    def as_json(self) -> dict[str, object]:
        return {
            "replicas": self.replicas,
            "slo_attainment": round(self.slo_attainment, 4),
            "gpu_seconds": round(self.gpu_seconds, 1),
            "cost": round(self.cost, 4),
            "simulated": self.simulated,
        }


@dataclass(frozen=True, slots=True)
class Frontier:
    points: tuple[FleetPoint, ...]
    # Per model, the runs kept: the fleet sizes asked for, the smallest to
    # reach the goal, and the last one run.
    runs: tuple[dict[int, RunResult], ...]
    smallest: tuple[int, ...]  # per model: the smallest fleet reaching the goal, else the best


@dataclass(slots=True)
class _Model:
    met: dict[int, int]
    gpu_s: dict[int, float]
    cost: dict[int, float]
    runs: dict[int, RunResult]
    smallest: int
    last_run: int = 0  # the largest fleet simulated


def _one_model(
    requests: Sequence[TraceRequest],
    *,
    world: WorldConfig,
    slo_ttft_s: float,
    prices: Prices,
    ceiling: int,
    servable: int,
    goal: float,
    keep: Iterable[int],
    cache: FleetCache | None,
) -> _Model:
    wanted = set(keep)
    model = _Model({}, {}, {}, {}, 0)
    n = len(requests)
    trace_key = "" if cache is None else cache.trace_key(requests)

    def fleet(size: int) -> RunResult:
        def simulate() -> RunResult:
            return run_world(requests, AlwaysOn(size), world)

        if cache is None:
            return simulate()
        return cache.run(requests, trace_key, size, world, simulate)

    for size in range(1, ceiling + 1):
        result = fleet(size)
        model.last_run = size
        card = score(result, slo_ttft_s=slo_ttft_s, prices=prices)
        met = round(card.slo_attainment * n)
        model.met[size], model.gpu_s[size], model.cost[size] = met, card.gpu_seconds, card.cost
        reached = not model.smallest and card.slo_attainment >= goal - 1e-12
        done = met >= servable or size == ceiling or _plateau(model.met, size, n, servable)
        if reached or done:
            model.smallest = model.smallest or size
        if reached or done or size in wanted:
            model.runs[size] = result
        if done:
            for larger in range(size + 1, ceiling + 1):
                model.met[larger] = met
                model.gpu_s[larger] = card.gpu_seconds * larger / size
                model.cost[larger] = card.cost * larger / size
            break
    # A size asked for by name is simulated even above the first fleet that meets all.
    for size in sorted(wanted - set(model.runs)):
        model.runs[size] = fleet(size)
    return model


def _plateau(met: dict[int, int], size: int, n: int, servable: int) -> bool:
    """Two sizes in a row each adding under 0.1 % of requests, within 90 % of the most."""
    if size < 3 or met[size] < 0.9 * servable:
        return False
    step = 0.001 * n
    return met[size] - met[size - 1] < step and met[size - 1] - met[size - 2] < step


def fleet_frontier(
    models: Sequence[Sequence[TraceRequest]],
    *,
    world: WorldConfig,
    slo_ttft_s: float,
    prices: Prices,
    ceiling: int,
    servable: Sequence[int],
    goal: float,
    keep: Iterable[int] = (),
    cache: FleetCache | None = None,
) -> Frontier:
    """Every fleet of 1 to ``ceiling`` replicas per model (see the module docstring).

    ``servable``: per model, how many of its requests any schedule can meet;
    ``goal``: the attainment ``smallest`` looks for; ``keep``: fleet sizes
    whose runs the caller wants back; ``cache``: where runs of fixed fleets
    are reused from and kept (:mod:`simulator.fleet_cache`; None: all run).
    """
    wanted = tuple(keep)
    per_model = [
        _one_model(
            group,
            world=world,
            slo_ttft_s=slo_ttft_s,
            prices=prices,
            ceiling=ceiling,
            servable=can,
            goal=goal,
            keep=wanted,
            cache=cache,
        )
        for group, can in zip(models, servable, strict=True)
    ]
    total = sum(len(group) for group in models)
    points = []
    for size in range(1, ceiling + 1):
        simulated = all(size <= m.last_run for m in per_model)
        points.append(
            FleetPoint(
                replicas=size,
                slo_attainment=sum(m.met[size] for m in per_model) / total,
                gpu_seconds=sum(m.gpu_s[size] for m in per_model),
                cost=sum(m.cost[size] for m in per_model),
                simulated=simulated,
            )
        )
    return Frontier(
        points=tuple(points),
        runs=tuple(m.runs for m in per_model),
        smallest=tuple(m.smallest for m in per_model),
    )
