"""Run a trace through Tidal and every baseline, and score each run.

What ``tidal simulate`` and the benchmark call. The policies, all with the
same per-replica concurrency target and replica ceiling; each baseline holds
requests as its own proxy does (:data:`simulator.baselines.HOLD_TIMEOUTS_S`):

- ``always-on``: the smallest fixed fleet whose SLO attainment reaches
  99 %, or the ceiling when even that misses, and then its scorecard says
  ``reaches_target`` false; the run scores every fleet from 1 to the
  ceiling on the way (the frontier, :func:`fleet_frontier`);
  ``always-on-N`` runs the fleet of N alone;
- ``hpa``, ``keda-http``, ``knative-kpa``, ``knative-tidal-idle`` (Knative
  with Tidal's grace period and scale-down delay), ``planner`` (Dynamo's
  SLA planner, prefill and decode sized on profiles of the engine model,
  :mod:`simulator.planner`): :mod:`simulator.baselines`;
- ``reactive``: the best a purely reactive policy can do, demand measured
  perfectly and capacity one cold start late (:mod:`simulator.reactive`);
- ``oracle``: not a run but a lower bound on the GPU-seconds of any
  schedule meeting the attainment goal (:mod:`simulator.oracle`);
- ``tidal``: the scaler's defaults with the scorecard's objective as its
  ``slo-ttft`` annotation (SLO-first scaling, :mod:`scaler.policy.slo.decide`);
  only the shared ceiling besides (the shared concurrency target is not
  used with an SLO);
- ``tidal-concurrency`` (only when asked for): the scaler's
  concurrency-based defaults, no objective, so that sweeps of their
  annotations (``panic-window-percentage``, ``scale-to-zero-grace-period``)
  move the row;
- ``tidal-tuned``: the annotations in :data:`TUNED_ANNOTATIONS`, found by
  :func:`simulator.tuning.tune` on the *conversation* trace, so that an
  evaluation on the code trace is not fitted to it;
- ``tidal-adaptive``: the defaults with ``scale-to-zero-grace-period: adaptive``;
- ``tidal-pool`` and ``tidal-warm`` (only when asked for: ``--policies``):
  ``tidal``'s annotations with every model on one pool of time-sliced GPUs
  (:mod:`simulator.warm_tier`), scale-to-zero alone against the warm tier
  (``sleep-after``, :data:`WARM_ANNOTATIONS` unless the caller's
  annotations set it); the pool model decides only when a model's one pod
  starts, sleeps and goes to zero, so the objective does not size them;
- ``tidal-spot`` (only when a spot placement is given): ``tidal``'s policy
  with that placement (``scaler.policy.split`` each tick, spot
  interruptions as the world's spot model says), beside ``tidal``, which
  stays all on-demand, so that one run compares the two. The three
  variants carry exactly ``tidal``'s annotations (:func:`tidal_annotations`)
  and differ only in what their names say.

Every autoscaler starts as ``options.start`` says (``--start``): ``warm``
gives each the fleet the first minute needs
(:func:`simulator.reactive.first_minute_fleet`), held through that minute,
``zero`` gives each nothing; fixed fleets are always warm. (``tidal-pool`` and ``tidal-warm``
run in their own pooled world and always start from zero.)

A trace whose requests name models (a pool of many small deployments) runs
each model in its own world with its own autoscaler; the runs are merged
into one scorecard per policy (GPU-seconds add up; the timeline sums
replicas and load per second).
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from scaler.policy import PlacementConfig
from simulator.baselines import HOLD_TIMEOUTS_S, AlwaysOn, Hpa, Keda, Knative
from simulator.fleet_cache import FleetCache
from simulator.frontier import FleetPoint, Frontier, fleet_frontier
from simulator.oracle import cacheable_tokens, fleet_cache_hits, oracle_bound, servable
from simulator.parallel import run_tasks
from simulator.planner import Planner
from simulator.profile import DEFAULT_ITL_S, decode_tokens_per_s, prefill_tokens_per_s
from simulator.reactive import FIRST_MINUTE_S, Reactive, demand_per_second, first_minute_fleet
from simulator.scorecard import Prices, Scorecard, score
from simulator.tidal import TidalAutoscaler
from simulator.trace_stream import StreamedTrace
from simulator.traces import TraceRequest
from simulator.warm_tier import POOL_POLICIES, PoolConfig, run_pool
from simulator.world import (
    Autoscaler,
    ColdStart,
    RunResult,
    Second,
    View,
    WorldConfig,
    run_world,
)

__all__ = [
    "OPTIONAL_POLICIES",
    "POLICY_NAMES",
    "STARTS",
    "TUNED_ANNOTATIONS",
    "WARM_ANNOTATIONS",
    "PolicyRun",
    "SimulationOptions",
    "by_model",
    "merge_runs",
    "run_policies",
    "smallest_always_on",
    "task_count",
    "tidal_annotations",
]

_A = "autoscaling.tidal.dev/"

#: Tidal's tuned knobs: ``python -m simulator.tuning --trace conv`` (a grid
#: over stable window, scale-down delay and panic window on the Azure
#: conversation trace with 60 s cold starts; the fewest GPU-seconds at no
#: loss of SLO attainment, ties to the fewest changed defaults). Result on
#: 2026-11-23: no scale-down delay and a panic window as long as the stable
#: window (60 s, the cold start's length), 4,767 GPU-seconds against the
#: defaults' 7,977 at the same attainment (98.8 %). The panic window joined
#: the grid after the code trace showed it to be what short bursts cost
#: (docs/simulator.md); its value was chosen on the conversation trace, not
#: on the code trace it is scored on.
TUNED_ANNOTATIONS: Mapping[str, str] = {
    _A + "scale-down-delay": "0s",
    _A + "panic-window-percentage": "100",
}

#: The warm tier's defaults for ``tidal-warm``: sleep after a minute idle, at
#: level 1 (weights kept in host RAM: the fastest wake).
WARM_ANNOTATIONS: Mapping[str, str] = {
    _A + "sleep-after": "60s",
    _A + "sleep-level": "1",
}

POLICY_NAMES = (
    "always-on",
    "hpa",
    "keda-http",
    "knative-kpa",
    "knative-tidal-idle",
    "planner",
    "tidal",
    "tidal-tuned",
    "tidal-adaptive",
    "reactive",
    "oracle",
)
#: Run only when named (besides ``always-on-N`` and the pool policies).
OPTIONAL_POLICIES = ("tidal-concurrency",)
STARTS = ("warm", "zero")
_FIXED = re.compile(r"always-on-([1-9][0-9]*)")


@dataclass(frozen=True, slots=True)
class SimulationOptions:
    slo_ttft_s: float = 2.0
    target_concurrency: float = 16.0
    max_replicas: int = 10
    always_on_attainment: float = 0.99
    prices: Prices = field(default_factory=Prices)
    world: WorldConfig = field(default_factory=WorldConfig)
    tidal_annotations: Mapping[str, str] = field(default_factory=dict)
    tuned_annotations: Mapping[str, str] = field(default_factory=lambda: dict(TUNED_ANNOTATIONS))
    policies: tuple[str, ...] = POLICY_NAMES
    spot_placement: PlacementConfig | None = None
    # warm: every autoscaler starts with the fleet the first minute needs; zero: none.
    start: str = "warm"
    # The time-sliced GPUs of tidal-pool and tidal-warm.
    pool: PoolConfig = field(default_factory=PoolConfig)
    warm_annotations: Mapping[str, str] = field(default_factory=lambda: dict(WARM_ANNOTATIONS))
    # Where fixed fleets' runs are reused from (None: each is run; simulator.fleet_cache).
    fleet_cache: FleetCache | None = None
    # Rows run side by side in this many processes (1: one after another, here).
    jobs: int = 1

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise ValueError(f"jobs must be >= 1 process, got {self.jobs}")
        if self.spot_placement is not None and self.spot_placement.policy == "on-demand":
            raise ValueError("spot_placement needs a spot policy, got on-demand")
        known = (*POLICY_NAMES, *OPTIONAL_POLICIES, *POOL_POLICIES)
        unknown = [p for p in self.policies if p not in known and not _FIXED.fullmatch(p)]
        if unknown:
            raise ValueError(
                f"unknown policies {unknown}; choose from {list(known)} or always-on-N "
                "(a fixed fleet of N >= 1)"
            )
        if self.start not in STARTS:
            raise ValueError(f"unknown start {self.start!r}; choose from {list(STARTS)}")
        if self.max_replicas < 1:
            raise ValueError(f"max replicas must be >= 1, got {self.max_replicas}")
        if not 0 < self.always_on_attainment <= 1:
            raise ValueError(
                f"the always-on attainment goal is a share within (0, 1], got "
                f"{self.always_on_attainment}"
            )

    @property
    def cold_start(self) -> ColdStart:
        return self.world.cold_start

    def slo_annotations(self) -> dict[str, str]:
        """The ``tidal`` row's: the caller's annotations, with the scorecard's
        objective as ``slo-ttft`` unless they set one."""
        return {_A + "slo-ttft": f"{self.slo_ttft_s:g}s", **self.tidal_annotations}

    def shared_annotations(self) -> dict[str, str]:
        """The knobs every Tidal variant shares with the baselines."""
        return {
            _A + "target-concurrency": f"{self.target_concurrency:g}",
            _A + "max-scale": str(self.max_replicas),
        }


def tidal_annotations(policy: str, options: SimulationOptions) -> dict[str, str]:
    """The annotations a Tidal row runs with, the shared knobs included.

    ``tidal`` and its variants (``tidal-spot``, ``tidal-pool``,
    ``tidal-warm``) share one set, the objective included; the pool rows
    then add or strip the warm tier's keys.
    """
    shared = options.shared_annotations()
    if policy in ("tidal", "tidal-spot", *POOL_POLICIES):
        return {**shared, **options.slo_annotations()}
    if policy == "tidal-concurrency":
        return {**shared, **options.tidal_annotations}
    if policy == "tidal-tuned":
        return {**shared, **options.tuned_annotations}
    if policy == "tidal-adaptive":
        adaptive = {_A + "scale-to-zero-grace-period": "adaptive"}
        return {**shared, **options.tidal_annotations, **adaptive}
    raise ValueError(f"{policy!r} is not a Tidal row")


@dataclass(frozen=True, slots=True)
class PolicyRun:
    scorecard: Scorecard
    result: RunResult | None  # None: the oracle, a bound rather than a run
    # always-on: every fleet from 1 to the ceiling (the frontier); else empty.
    fleets: tuple[FleetPoint, ...] = ()
    # CPU seconds the row took (the first fixed-fleet row carries the frontier's).
    cpu_s: float = 0.0


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


def _tidal(name: str, options: SimulationOptions) -> Factory:
    annotations = tidal_annotations(name, options)
    return lambda _: TidalAutoscaler(name, annotations, cold_start_s=options.cold_start.median_s)


def _factories(options: SimulationOptions) -> dict[str, Factory]:
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
            name: _tidal(name, options)
            for name in ("tidal", "tidal-concurrency", "tidal-tuned", "tidal-adaptive")
        },
    }


def _start(
    autoscaler: Autoscaler, group: Sequence[TraceRequest], options: SimulationOptions
) -> Autoscaler:
    """``autoscaler`` with the run's starting fleet (see the module docstring)."""
    if options.start == "zero":
        return _Started(autoscaler, 0)
    demand = demand_per_second(group, options.world.engine)
    warm = first_minute_fleet(demand, options.max_replicas)
    return _Started(autoscaler, max(warm, autoscaler.initial))


def by_model(requests: Sequence[TraceRequest]) -> list[Sequence[TraceRequest]]:
    """The trace split by model; one model's trace is itself (a stream stays a stream)."""
    if isinstance(requests, StreamedTrace):
        if requests.models == 1:
            return [requests]
    elif len({r.model for r in requests}) == 1:
        return [requests]
    groups: dict[str, list[TraceRequest]] = {}
    for r in requests:
        groups.setdefault(r.model, []).append(r)
    return list(groups.values())


def merge_runs(name: str, results: Sequence[RunResult]) -> RunResult:
    if len(results) == 1:
        return replace(results[0], name=name)
    length = max(len(r.timeline) for r in results)
    timeline = []
    for index in range(length):
        seconds = [r.timeline[index] for r in results if index < len(r.timeline)]
        timeline.append(
            Second(
                at_s=float(index),
                arrivals=sum(s.arrivals for s in seconds),
                concurrency=sum(s.concurrency for s in seconds),
                ready=sum(s.ready for s in seconds),
                spec=sum(s.spec for s in seconds),
            )
        )
    return RunResult(
        name=name,
        arrival_s=tuple(itertools.chain.from_iterable(r.arrival_s for r in results)),
        first_token_s=tuple(itertools.chain.from_iterable(r.first_token_s for r in results)),
        finished_s=tuple(itertools.chain.from_iterable(r.finished_s for r in results)),
        output_tokens=tuple(itertools.chain.from_iterable(r.output_tokens for r in results)),
        failed_reason=tuple(itertools.chain.from_iterable(r.failed_reason for r in results)),
        cold_start_wait_s=tuple(
            itertools.chain.from_iterable(r.cold_start_wait_s for r in results)
        ),
        cold_starts=sum(r.cold_starts for r in results),
        replicas=tuple(itertools.chain.from_iterable(r.replicas for r in results)),
        timeline=tuple(timeline),
        end_s=max(r.end_s for r in results),
        preemptions=sum(r.preemptions for r in results),
        priority=tuple(itertools.chain.from_iterable(r.priority for r in results)),
        tenant=tuple(itertools.chain.from_iterable(r.tenant for r in results)),
    )


def world_for(policy: str, options: SimulationOptions) -> WorldConfig:
    """The world a policy runs in: the baselines hold requests as their proxies do."""
    timeout = HOLD_TIMEOUTS_S.get(policy)
    if timeout is None:
        return options.world
    return replace(options.world, cold_start_timeout_s=timeout)


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
            card = _oracle_card(requests, by_model(requests), runs, options)
            runs.append(PolicyRun(card, None, cpu_s=time.process_time() - started))
        elif _is_fixed(policy):
            assert isinstance(frontier, _FrontierRun)  # built whenever a fixed fleet is asked for
            started = time.process_time()
            row = _fixed_row(policy, frontier.frontier, options)
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
    rows = [p for p in policies if p != "oracle" and not _is_fixed(p)]
    frontier = [_FRONTIER] if _wants_fleets(policies) else []
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
            frontier = _frontier(models, self.options)
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
        factory = _tidal("tidal-spot", options)
    else:
        world = world_for(policy, options)
        factory = _factories(options)[policy]
    results = [run_world(group, _start(factory(group), group, options), world) for group in models]
    result = merge_runs(policy, results)
    card = score(result, slo_ttft_s=options.slo_ttft_s, prices=options.prices)
    return PolicyRun(card, result)


def _is_fixed(policy: str) -> bool:
    return policy == "always-on" or _FIXED.fullmatch(policy) is not None


def _wants_fleets(policies: Sequence[str]) -> bool:
    return any(_is_fixed(p) for p in policies)


def _frontier(models: Sequence[Sequence[TraceRequest]], options: SimulationOptions) -> Frontier:
    engine = options.world.engine
    sizes = [int(m.group(1)) for p in options.policies if (m := _FIXED.fullmatch(p))]
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


def _fixed_row(policy: str, frontier: Frontier, options: SimulationOptions) -> PolicyRun:
    """``always-on`` (the smallest fleet reaching the goal) or ``always-on-N``: frontier runs."""
    fixed = _FIXED.fullmatch(policy)
    results = [
        runs[int(fixed.group(1)) if fixed else smallest]
        for smallest, runs in zip(frontier.smallest, frontier.runs, strict=True)
    ]
    if fixed:
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


def _fleet_cached_tokens(group: Sequence[TraceRequest], options: SimulationOptions) -> int:
    """The most prompt tokens the ceiling's caches together can serve (the oracle's cap)."""
    engine = options.world.engine
    if not any(r.prefix for r in group):
        return 0
    blocks = options.max_replicas * engine.kv_cache_tokens // engine.prefix_block_tokens
    return fleet_cache_hits(group, blocks) * engine.prefix_block_tokens


def _oracle_card(
    requests: Sequence[TraceRequest],
    models: Sequence[Sequence[TraceRequest]],
    runs: Sequence[PolicyRun],
    options: SimulationOptions,
) -> Scorecard:
    """The oracle's bound, summed over models, as a scorecard row."""
    bounds = [
        oracle_bound(
            group,
            params=options.world.engine,
            cold_start_s=options.cold_start.median_s,
            slo_ttft_s=options.slo_ttft_s,
            attainment=options.always_on_attainment,
            context_tokens=min(
                options.world.engine.max_model_len, options.world.engine.kv_cache_tokens
            ),
            cached_tokens=cacheable_tokens(group, options.world.engine.prefix_block_tokens),
            fleet_cached_tokens=_fleet_cached_tokens(group, options),
        )
        for group in models
    ]
    n = len(requests)
    met = sum(b.attainment * b.requests for b in bounds)
    gpu_s = sum(b.gpu_seconds for b in bounds)
    busy = min(gpu_s, sum(b.busy_seconds for b in bounds))
    duration = max((r.scorecard.duration_s for r in runs), default=requests[-1].offset_s)
    attainment = met / n
    return Scorecard(
        name="oracle",
        requests=n,
        slo_ttft_s=options.slo_ttft_s,
        slo_attainment=attainment,
        goodput_rps=met / max(duration, 1e-9),
        completed=n,
        failed=0,
        failed_by_reason={},
        ttft_p50_s=None,
        ttft_p99_s=None,
        cold_starts=sum(b.cold_starts for b in bounds),
        cold_start_wait_p50_s=None,
        cold_start_wait_p99_s=None,
        gpu_seconds=gpu_s,
        gpu_seconds_busy=busy,
        gpu_seconds_idle=gpu_s - busy,
        gpu_seconds_spot=0.0,
        gpu_seconds_on_demand=gpu_s,
        cost=gpu_s * options.prices.on_demand_per_gpu_hour / 3600.0,
        peak_replicas=0,
        preemptions=0,
        duration_s=duration,
        gpu_seconds_serving=gpu_s,
        reaches_target=attainment >= options.always_on_attainment - 1e-9,
    )
