"""Which autoscaler each row's name builds, the world it runs in, and the fleet it starts with.

The baselines (``hpa``, ``keda-http``, ``knative-kpa``,
``knative-tidal-idle``, ``planner``), the ``reactive`` yardstick and the
Tidal rows all share the run's concurrency target and replica ceiling; the
baselines hold requests through a cold start as their own proxies do
(:data:`simulator.baselines.HOLD_TIMEOUTS_S`, :func:`world_for`).

Every autoscaler starts as ``options.start`` says (``--start``): ``warm``
gives each the fleet the first minute needs
(:func:`simulator.reactive.first_minute_fleet`), held through that minute,
``zero`` gives each nothing; fixed fleets are always warm. (``tidal-pool``
and ``tidal-warm`` run in their own pooled world and always start from
zero.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from simulator.baselines import HOLD_TIMEOUTS_S, Hpa, Keda, Knative
from simulator.planner import Planner
from simulator.profile import DEFAULT_ITL_S, decode_tokens_per_s, prefill_tokens_per_s
from simulator.reactive import FIRST_MINUTE_S, Reactive, demand_per_second, first_minute_fleet
from simulator.runner.options import SimulationOptions, tidal_annotations
from simulator.tidal import TidalAutoscaler
from simulator.traces import TraceRequest
from simulator.world import Autoscaler, View, WorldConfig

__all__ = ["Factory", "factories", "tidal_factory", "with_starting_fleet", "world_for"]


#: Builds one model's autoscaler from its requests (the reactive oracle reads them).
Factory = Callable[[Sequence[TraceRequest]], Autoscaler]


class _Started:
    """An autoscaler given the run's starting fleet in place of its own.

    The fleet is held through the first minute (what a policy running for a
    while before the trace began would have): an autoscaler whose history is
    empty at time 0 would otherwise drop it at its first decision.
    """

    def __init__(self, inner: Autoscaler, initial: int) -> None:
        self.inner = inner
        self._initial = initial

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def initial(self) -> int:
        return self._initial

    def tick(self, view: View, *, activation: bool) -> int | Mapping[str, int] | None:
        desired = self.inner.tick(view, activation=activation)
        # Replicas per shape hand the starting fleet over themselves (a shape
        # leaves only once the others serve).
        if desired is None or isinstance(desired, Mapping) or view.now >= FIRST_MINUTE_S:
            return desired
        return max(desired, self._initial)


def tidal_factory(name: str, options: SimulationOptions) -> Factory:
    annotations = tidal_annotations(name, options)
    return lambda _: TidalAutoscaler(name, annotations, cold_start_s=options.cold_start.median_s)


def factories(options: SimulationOptions) -> dict[str, Factory]:
    target, top = options.target_concurrency, options.max_replicas
    engine = options.world.engine
    return {
        "hpa": lambda _: Hpa(target=target, max_replicas=top),
        "keda-http": lambda _: Keda(target=target, max_replicas=top),
        "knative-kpa": lambda _: Knative(target=target, max_replicas=top),
        # Tidal's idle defaults (scaler.policy.ScalingConfig): 5 min grace, 60 s delay.
        "knative-tidal-idle": lambda _: Knative(
            target=target,
            max_replicas=top,
            scale_to_zero_grace_s=300.0,
            scale_down_delay_s=60.0,
            name="knative-tidal-idle",
        ),
        "planner": lambda _: Planner(
            prefill=lambda isl: prefill_tokens_per_s(engine, isl),
            decode=lambda isl, osl: decode_tokens_per_s(engine, isl, osl, DEFAULT_ITL_S),
            max_replicas=top,
        ),
        "reactive": lambda group: Reactive(
            demand_per_second(group, engine),
            break_even_s=options.cold_start.median_s,
            max_replicas=top,
        ),
        **{
            name: tidal_factory(name, options)
            for name in ("tidal", "tidal-concurrency", "tidal-tuned", "tidal-adaptive")
        },
    }


def with_starting_fleet(
    autoscaler: Autoscaler, group: Sequence[TraceRequest], options: SimulationOptions
) -> Autoscaler:
    """``autoscaler`` with the run's starting fleet (see the module docstring)."""
    if options.start == "zero":
        return _Started(autoscaler, 0)
    demand = demand_per_second(group, options.world.engine)
    warm = first_minute_fleet(demand, options.max_replicas)
    return _Started(autoscaler, max(warm, autoscaler.initial))


def world_for(policy: str, options: SimulationOptions) -> WorldConfig:
    """The world a policy runs in: the baselines hold requests as their proxies do."""
    timeout = HOLD_TIMEOUTS_S.get(policy)
    if timeout is None:
        return options.world
    return replace(options.world, cold_start_timeout_s=timeout)
