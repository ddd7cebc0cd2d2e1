"""Tidal on several GPU shapes in the simulator: the scaler's shape step and the activator's pick.

:class:`TidalShapes` is :class:`~simulator.tidal.TidalAutoscaler` for a
model that lists shapes (docs/shapes.md): the same hub, activator reports
and server scrape (each shape's servers apart, as the scrape reads a
model's pods by shape), and at each decision the scaler's own step,
:func:`~scaler.policy.shapes.decide.decide_shapes`: each shape sized alone
on what its replicas measured, the cheapest mix, capped shapes, the
hand-over. It answers the world with replicas per shape, and tells the
activator's side (:class:`ShapeRouting`) each shape's weight and reach,
as the scaler's answer to ``/v1/stats`` does.

:class:`ShapeBalancer` is the activator's pick over a world's replicas
(:func:`activator.balancing.by_capacity.pick`). It also counts, against
the engines' true prefill rates (not what the scaler learned), the
requests it sent to a shape that cannot prefill them within the objective
while a listed shape could (:attr:`ShapeBalancer.too_slow`): the
simulator's check that routing by reach does what it says.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from activator.balancing.by_capacity import pick
from scaler.policy.api import Decision
from scaler.policy.placement.availability import CapacityType, PodFacts
from scaler.policy.shapes.capacity import relative, target_ratio
from scaler.policy.shapes.decide import ShapeSeen, ShapesState, decide_shapes
from simulator.gpu_shapes import SimShapes
from simulator.tidal import TARGET_KEY, TidalAutoscaler
from simulator.traces import TraceRequest
from simulator.world import R, View

__all__ = ["ShapeBalancer", "ShapeRouting", "TidalShapes"]


class ShapeRouting:
    """What the activator knows of each shape: how much a replica takes (weight) and the
    longest prompt it serves in time (reach; None: any). Written by the scaler's side."""

    def __init__(self, shapes: SimShapes) -> None:
        base = shapes.chosen[0].shape.capacity
        # Before the first decision: the priors' ratios, and no reach.
        self.weights: dict[str, float] = {
            c.shape.name: target_ratio(relative(c.shape.capacity, base)) for c in shapes.chosen
        }
        self.reach: dict[str, float | None] = {c.shape.name: None for c in shapes.chosen}

    def update(self, weights: Mapping[str, float], reach: Mapping[str, float | None]) -> None:
        self.weights.update(weights)
        self.reach.update(reach)


class ShapeBalancer:
    """The activator's pick by capacity and reach (a world's ``Balancer``)."""

    def __init__(
        self, routing: ShapeRouting, shapes: SimShapes, rng: random.Random, *, slo_ttft_s: float
    ) -> None:
        self.routing = routing
        self.rng = rng
        # The engines' own prefill rates, for the check (module docstring).
        self._true_reach = {
            w.name: w.engine.prefill_tokens_per_s * slo_ttft_s for w in shapes.world
        }
        self._fastest = max(self._true_reach.values())
        self.too_slow = 0
        self.picked = 0

    def pick(self, request: TraceRequest, serving: Sequence[R], limit: int) -> R | None:
        routing = self.routing
        chosen = pick(
            serving,
            weight=lambda r: routing.weights.get(r.shape, 1.0),
            reach=lambda r: routing.reach.get(r.shape),
            prompt_tokens=request.prompt_tokens,
            limit=limit,
            rng=self.rng,
        )
        if chosen is not None:
            self.picked += 1
            tokens = request.prompt_tokens
            if self._true_reach[chosen.shape] < tokens <= self._fastest:
                self.too_slow += 1
        return chosen


class TidalShapes(TidalAutoscaler):
    """One model under Tidal's shape step (see the module docstring)."""

    def __init__(
        self,
        name: str,
        annotations: Mapping[str, str],
        *,
        shapes: SimShapes,
        routing: ShapeRouting,
        cold_start_s: float,
        warm_start: int = 0,
    ) -> None:
        super().__init__(name, annotations, cold_start_s=cold_start_s, warm_start=warm_start)
        self.shapes = shapes
        self.routing = routing
        self.shapes_state: ShapesState | None = None
        self.asks: dict[str, int] = {}

    def decide(self, view: View, *, activation: bool) -> Decision:
        chosen = self.shapes.chosen
        now = view.now
        current = {name: len(s.replicas) for name, s in view.shapes.items()}
        if self.shapes_state is None:
            self.shapes_state = ShapesState.running(
                {n: c for n, c in current.items() if c > 0}, chosen
            )
        signals = self.hub.observe(TARGET_KEY, self.config, now=now)
        seen = {
            name: ShapeSeen(
                ready=shape.ready,
                pods=tuple(
                    PodFacts(
                        name=f"{name}-{i}",
                        capacity_type=CapacityType.ON_DEMAND,
                        phase="Pending" if pending else "Running",
                        ready=ready,
                        created_at=created_s,
                    )
                    for i, (created_s, ready, pending) in enumerate(shape.replicas)
                ),
                load=signals.groups.get(name),
            )
            for name, shape in view.shapes.items()
        }
        state = self.shapes_state
        observation = signals.observation(
            ready=view.ready, spec=sum(state.targets.values()), activation=activation
        )
        outcome = decide_shapes(
            policy=self.policy,
            config=self.config,
            shapes=chosen,
            base=chosen[0].shape.name,
            observation=observation,
            seen=seen,
            current=current,
            state=state,
            now=now,
            now_wall=now,
        )
        self.shapes_state = outcome.shapes
        self.state = outcome.state
        self.asks = dict(outcome.asks)
        self.routing.update(outcome.weights, outcome.limits)
        return outcome.decision

    def answer(self, decision: Decision) -> Mapping[str, int]:
        return {name: self.asks.get(name, 0) for name in self.shapes.names}
