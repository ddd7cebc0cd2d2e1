"""One target's balancing across GPU shapes, from the scaler's word on its endpoints.

A model on several GPU shapes (docs/shapes.md) has replicas that are not
alike. The leading scaler names, for each of its endpoints, the shape, the
``weight`` (how much one replica of that shape takes against the others)
and the ``reach`` (the longest prompt it prefills within the objective),
in its answers to the stats reports (:mod:`groundwork.rules.stats_report`
says the format and reads it into :class:`ShapeRoute` values). The registry
keeps that word once (:class:`~activator.holding.scaler_word.ScalerWord`), and a
target with some gets a :class:`ShapeBalancer`, which picks with
:func:`activator.balancing.by_capacity.pick`: a replica whose reach covers
the prompt (else one of the longest reach), then by in-flight over weight.

Main decisions:

- **The prompt's length is known where the body was read.** The activator
  parses a body only to route by ``model`` (as for prefix balancing); a
  model reached by host or path prefix is balanced by capacity alone, every
  prompt taken as a short one.
- **A held request keeps its prompt's length.** When every replica that
  fits its prompt is full, a long prompt is held for one of them, while the
  requests behind it go to the replicas that have room
  (:meth:`~activator.holding.gate.Gate.acquire` with its own ``choose``).
- **An endpoint the scaler has not named yet** (a pod that just started) is
  taken as the least of the model's shapes: the smallest weight and the
  shortest reach, so a long prompt never goes to it on a guess.
- **With prefix balancing too**, the prefix router chooses among the
  replicas that fit the prompt (by its cache, then by load), not by weight.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

from activator.balancing.by_capacity import fitting, pick
from activator.replicas.readiness import EndpointTracker
from groundwork.rules.stats_report import ShapeRoute

__all__ = ["ShapeBalancer", "ShapeRoute"]

# A way to choose among the ready replicas (ready, per-replica limit, rng).
_Choose = Callable[[Sequence[EndpointTracker], int, random.Random], EndpointTracker | None]


class ShapeBalancer:
    """Picks a target's replica by each one's shape (module docstring)."""

    __slots__ = ("_least", "routes")

    def __init__(self, routes: Mapping[str, ShapeRoute]) -> None:
        if not routes:
            raise ValueError("a shape balancer needs the scaler's word on some endpoint")
        self.routes = routes
        known = [r.reach for r in routes.values() if r.reach is not None]
        self._least = ShapeRoute(
            "", min(r.weight for r in routes.values()), min(known) if known else None
        )

    def route(self, tracker: EndpointTracker) -> ShapeRoute:
        return self.routes.get(tracker.key, self._least)

    def weight(self, tracker: EndpointTracker) -> float:
        return self.routes.get(tracker.key, self._least).weight

    def reach(self, tracker: EndpointTracker) -> float | None:
        return self.routes.get(tracker.key, self._least).reach

    def pick(
        self, tokens: int, ready: Sequence[EndpointTracker], limit: int, rng: random.Random
    ) -> EndpointTracker | None:
        """The replica for a prompt of ``tokens`` (estimated) among ``ready``."""
        return pick(
            ready, weight=self.weight, reach=self.reach, prompt_tokens=tokens, limit=limit, rng=rng
        )

    def choose(self, tokens: int, then: _Choose | None = None) -> _Choose:
        """How a request with a prompt of ``tokens`` chooses: by shape, or with ``then``
        (the prefix router's pick) among the replicas that fit it."""
        if then is None:
            return lambda ready, limit, rng: self.pick(tokens, ready, limit, rng)

        def among_fitting(
            ready: Sequence[EndpointTracker], limit: int, rng: random.Random
        ) -> EndpointTracker | None:
            return then(fitting(ready, self.reach, tokens), limit, rng) if ready else None

        return among_fitting
