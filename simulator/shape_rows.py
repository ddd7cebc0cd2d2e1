"""Tidal on each GPU shape alone and on the mix of them: the rows of ``tidal simulate --shapes``.

For one trace and one set of shapes (:mod:`simulator.gpu_shapes`), each row
is Tidal (its ``tidal`` annotations, the scorecard's objective as
``slo-ttft``) in a world that offers:

- ``tidal``: no shapes, Tidal as it runs a pod template today, on whole
  GPUs of the reference (one H100: the engine's own figures), priced as
  the first shape (whole H100s in the list prices' table);
- ``tidal:<shape>``: that shape alone, listed alone (the model autoscaled by
  Tidal on it, as a pod template of that shape would be);
- ``tidal-mix``: every shape, listed in the table's order, the first one
  the base (the shape of the user's template: whole H100s in the list
  prices' table).

Every row runs the scaler's shape step (:class:`~simulator.tidal_shapes.TidalShapes`)
and the activator's pick (:class:`~simulator.tidal_shapes.ShapeBalancer`),
each model of the trace in its own world, and is scored with each shape's
price per replica-hour. Each row also says how many requests went to a
shape that cannot prefill them within the objective while a listed shape
could (``too_slow``, against the engines' true rates), and the
replica-hours of each shape.

A warm start (``--start warm``) gives each row the fleet the first minute
needs on its first shape; a shape's supply (``--shape-supply``) bounds its
replicas at once, more stay Pending until one ends.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from simulator.gpu_shapes import SimShapes
from simulator.parallel import run_tasks
from simulator.reactive import demand_per_second, first_minute_fleet
from simulator.runner import (
    SimulationOptions,
    by_model,
    merge_runs,
    run_policies,
    tidal_annotations,
)
from simulator.scorecard import Scorecard, score
from simulator.tidal_shapes import ShapeBalancer, ShapeRouting, TidalShapes
from simulator.traces import TraceRequest
from simulator.world import RunResult, run_world

__all__ = ["MIX", "PLAIN", "ShapeRow", "shape_rows"]

MIX = "tidal-mix"
PLAIN = "tidal"


@dataclass(frozen=True, slots=True)
class ShapeRow:
    """One row: its scorecard (cost at the shapes' prices), requests sent too slow,
    requests picked, and replica-hours by shape."""

    scorecard: Scorecard
    too_slow: int
    picked: int
    replica_hours: dict[str, float]
    cpu_s: float = 0.0

    def as_json(self) -> dict[str, object]:
        return {
            **self.scorecard.as_json(),
            "too_slow": self.too_slow,
            "picked": self.picked,
            "replica_hours": {k: round(v, 4) for k, v in self.replica_hours.items()},
            "cpu_s": round(self.cpu_s, 3),
        }


class _Job:
    """One trace, one set of shapes: runs any row of them."""

    def __init__(
        self, requests: Sequence[TraceRequest], options: SimulationOptions, shapes: SimShapes
    ) -> None:
        self.requests = requests
        self.options = options
        self.shapes = shapes

    def listed(self, row: str) -> tuple[str, ...]:
        return self.shapes.names if row == MIX else (row.removeprefix("tidal:"),)

    def __call__(self, row: str) -> ShapeRow:
        started = time.process_time()
        if row == PLAIN:
            plain = replace(self.options, policies=(PLAIN,), jobs=1, spot_placement=None)
            result = run_policies(self.requests, plain)[0].result
            assert result is not None
            prices = replace(
                self.options.prices,
                on_demand_per_gpu_hour=self.shapes.chosen[0].shape.prices.on_demand,
            )
            card = score(result, slo_ttft_s=self.options.slo_ttft_s, prices=prices)
            whole = sum(life.ended_s - life.created_s for life in result.replicas) / 3600
            return ShapeRow(card, 0, 0, {"": whole}, time.process_time() - started)
        sub = self.shapes.only(self.listed(row))
        options = self.options
        annotations = {**tidal_annotations("tidal", options), **sub.annotations()}
        results: list[RunResult] = []
        too_slow = picked = 0
        for group in by_model(self.requests):
            result, balancers = self._model(row, group, sub, annotations)
            results.append(result)
            too_slow += sum(b.too_slow for b in balancers)
            picked += sum(b.picked for b in balancers)
        result = merge_runs(row, results)
        prices = replace(options.prices, per_shape=sub.prices)
        hours: dict[str, float] = {}
        for life in result.replicas:
            hours[life.shape] = hours.get(life.shape, 0.0) + (life.ended_s - life.created_s) / 3600
        return ShapeRow(
            score(result, slo_ttft_s=options.slo_ttft_s, prices=prices),
            too_slow,
            picked,
            dict(sorted(hours.items())),
            time.process_time() - started,
        )

    def _model(
        self,
        row: str,
        group: Sequence[TraceRequest],
        sub: SimShapes,
        annotations: Mapping[str, str],
    ) -> tuple[RunResult, list[ShapeBalancer]]:
        """One model's world: its autoscaler and its activator's pick share the routing."""
        options = self.options
        routing = ShapeRouting(sub)
        balancers: list[ShapeBalancer] = []

        def balancer(rng: random.Random) -> ShapeBalancer:
            made = ShapeBalancer(routing, sub, rng, slo_ttft_s=options.slo_ttft_s)
            balancers.append(made)
            return made

        autoscaler = TidalShapes(
            row,
            annotations,
            shapes=sub,
            routing=routing,
            cold_start_s=options.cold_start.median_s,
            warm_start=self._warm(group, sub),
        )
        world = replace(options.world, shapes=sub.world, balancer=balancer)
        return run_world(group, autoscaler, world), balancers

    def _warm(self, group: Sequence[TraceRequest], sub: SimShapes) -> int:
        """The first minute's fleet (0 with ``--start zero``), on the row's first shape:
        the reference GPU's, over that shape's slower phase against it."""
        if self.options.start == "zero":
            return 0
        demand = demand_per_second(group, self.options.world.engine)
        reference = first_minute_fleet(demand, self.options.max_replicas)
        first, base = sub.world[0].engine, self.options.world.engine
        ratio = min(
            first.prefill_tokens_per_s / base.prefill_tokens_per_s,
            base.step_base_s / first.step_base_s,
        )
        return min(self.options.max_replicas, math.ceil(reference / ratio - 1e-9))


def shape_rows(
    requests: Sequence[TraceRequest], options: SimulationOptions, shapes: SimShapes
) -> list[ShapeRow]:
    """Every shape alone, then the mix (module docstring); rows side by side in
    ``options.jobs`` processes."""
    if not requests:
        raise ValueError("the trace has no requests")
    rows = [PLAIN, *(f"tidal:{name}" for name in shapes.names), MIX]
    return list(run_tasks(_Job(requests, options, shapes), rows, options.jobs))


def ratio(cost: float, against: float) -> float:
    """``cost`` over ``against`` (inf when ``against`` is 0 and ``cost`` is not)."""
    if against > 0:
        return cost / against
    return 0.0 if cost == 0 else math.inf
