"""Least-loaded against prefix-aware routing, scored in the simulator.

The world balances with the activator's least-in-flight pick unless its
config names a :class:`~simulator.world.Balancer`; this module supplies
two, both the product's code:

- :class:`LeastLoaded`: ``activator.balancing.least_loaded.pick``, as the world does by
  itself (so the two rows differ only in routing);
- :class:`PrefixRouted`: ``activator.balancing.prefix_affinity.PrefixAffinity``, one
  per simulated activator. With ``activators`` > 1 each request goes
  through one of them drawn at random (a Service spreading connections),
  each with its own history; all see the replicas' true in-flight counts.
  A real activator sees only its own share, about ``1/N`` of each: the
  bound's factor is relative to the mean, so that part is the same, but its
  chance term (``1.5 * sqrt(m)``) is relatively wider on smaller counts, so
  real activators spill less than these do and may let the load spread a
  little further.

Both sample every replica's in-flight count at each pick (at arrivals,
which by PASTA sample the time average) to report the **load spread**: per
minute, the busiest replica's mean in-flight over the mean of all.

:func:`compare` scores each routing on a trace whose requests carry prompt
block ids:

- **hit rate**: prompt tokens served from a replica's prefix cache over
  all prompt tokens (vLLM's ``prefix_cache_hits / prefix_cache_queries``),
  beside what one infinitely large replica would reach (every block seen
  before is cached: ``simulator.oracle.cacheable_tokens``);
- **equal attainment**: the smallest always-on fleet meeting the
  attainment goal (99 % within the TTFT objective) under each routing, and
  its GPU-seconds;
- **TTFT** p50 and p99 and the load spread on the same fixed fleet (the
  least-loaded one's), so that the routing alone differs.

``python -m simulator.prefix_routing`` prints the table for the synthetic
multi-turn chat trace (:mod:`simulator.chat_trace`) or a trace file with
``--prefix-field``; ``docs/prefix-routing.md`` holds the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import cast

from activator.balancing.least_loaded import pick
from activator.balancing.prefix_affinity import AffinityConfig, PrefixAffinity
from groundwork.rules.routing_keys import BALANCING_MODES
from simulator.baselines import AlwaysOn
from simulator.chat_trace import ChatSpec, generate_chat
from simulator.engine import KvEventRecorder, LlmEngine, LlmParams
from simulator.kv_events import apply_batch
from simulator.kv_events import batch as kv_batch
from simulator.prefix_ceiling import fleet_cache_hit_rate, infinite_cache_hit_rate
from simulator.prefix_workloads import WORKLOADS, WorkloadSpec, anchor_of, generate_workload
from simulator.runner import SimulationOptions, run_policies, smallest_always_on
from simulator.scorecard import score
from simulator.traces import TraceFormat, TraceRequest, find_trace, read_trace
from simulator.world import R, RunResult, ServingReplica, run_world

__all__ = [
    "ROUTINGS",
    "AutoscaledRow",
    "Comparison",
    "LeastLoaded",
    "LoadSpread",
    "PrefixRouted",
    "RoutingRow",
    "balancer",
    "compare",
    "hit_rate",
]

# The routing.tidal.dev/balancing modes the replay compares.
ROUTINGS = BALANCING_MODES


class LoadSpread:
    """In-flight samples per minute per replica, taken at each pick."""

    def __init__(self) -> None:
        # minute -> replica id -> [sum of samples, count]
        self._minutes: dict[int, dict[int, list[float]]] = defaultdict(dict)
        self._now = 0.0

    def sample(self, at_s: float, serving: Sequence[R]) -> None:
        minute = self._minutes[int(at_s // 60)]
        for r in serving:
            acc = minute.setdefault(r.rid, [0.0, 0.0])
            acc[0] += r.in_flight
            acc[1] += 1

    def worst(self, *, min_mean: float = 1.0) -> float:
        """The highest busiest-over-mean ratio of any minute whose mean is at least ``min_mean``.

        Quieter minutes are left out: with under one request in flight per
        replica, one request is already twice the mean.
        """
        worst = 1.0
        for per_replica in self._minutes.values():
            means = [s / n for s, n in per_replica.values() if n]
            if len(means) < 2:
                continue
            mean = sum(means) / len(means)
            if mean >= min_mean:
                worst = max(worst, max(means) / mean)
        return worst


class LeastLoaded:
    """The activator's least-in-flight pick (power of two choices)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.spread = LoadSpread()

    def pick(self, request: TraceRequest, serving: Sequence[R], limit: int) -> R | None:
        self.spread.sample(request.offset_s, serving)
        return pick(serving, limit, self.rng)


class PrefixRouted:
    """``activators`` prefix routers, each request through one drawn at random.

    ``anchor_of``: a request's anchor depth, where the trace knows it (the
    synthetic workloads name their system prompt; None: the config's).
    ``exact``: the replicas publish their KV-cache events (vLLM's
    ``--kv-events-config``), and every router applies them before each pick
    instead of recording what it sent.
    """

    def __init__(
        self,
        rng: random.Random,
        *,
        activators: int,
        config: AffinityConfig,
        anchor_of: Callable[[TraceRequest], int | None] | None = None,
        exact: bool = False,
    ) -> None:
        if activators < 1:
            raise ValueError(f"activators must be at least 1, got {activators}")
        self.rng = rng
        self.spread = LoadSpread()
        self.routers: list[PrefixAffinity[ServingReplica]] = [
            PrefixAffinity(config, _replica_name) for _ in range(activators)
        ]
        self.reasons: dict[str, int] = defaultdict(int)
        self.anchor_of = anchor_of
        self.exact = exact

    def pick(self, request: TraceRequest, serving: Sequence[R], limit: int) -> R | None:
        self.spread.sample(request.offset_s, serving)
        if self.exact:
            self._apply_events(serving)
        # One activator needs no draw: the run's random sequence stays least-loaded's.
        many = len(self.routers) > 1
        router = self.routers[self.rng.randrange(len(self.routers))] if many else self.routers[0]
        anchor = self.anchor_of(request) if self.anchor_of is not None else None
        chosen, reason = router.choose(request.prefix, serving, limit, anchor=anchor)
        self.reasons[reason] += 1
        if reason == "no-blocks":
            return pick(serving, limit, self.rng)
        return cast("R | None", chosen)

    def _apply_events(self, serving: Sequence[ServingReplica]) -> None:
        for replica in serving:
            # The world's replicas carry their engine; a new one is subscribed
            # at its first pick, before any request has filled its cache.
            engine: LlmEngine = getattr(replica, "engine")  # noqa: B009
            if engine.kv.events is None:
                engine.kv.events = KvEventRecorder(engine.params.prefix_block_tokens)
            events = engine.kv.events.take()
            if events:
                for router in self.routers:
                    apply_batch(router.index, _replica_name(replica), kv_batch(0.0, events))


def _replica_name(replica: ServingReplica) -> str:
    return f"replica-{replica.rid}"


def hit_rate(result: RunResult, requests: Sequence[TraceRequest]) -> float:
    """Prompt tokens served from prefix caches over prompt tokens of requests that reached one."""
    served = sum(
        r.prompt_tokens
        for r, failed in zip(requests, result.failed_reason, strict=True)
        if failed is None
    )
    cached = sum(life.cached_tokens for life in result.replicas)
    return cached / served if served else 0.0


@dataclass(frozen=True, slots=True)
class RoutingRow:
    routing: str
    activators: int
    fleet: int  # smallest always-on fleet meeting the goal
    reaches_target: bool
    gpu_seconds: float  # of that fleet
    hit_rate: float  # on the shared fleet
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    attainment: float
    load_spread: float  # busiest replica's mean in-flight over the mean, worst minute


Routed = LeastLoaded | PrefixRouted


def balancer(
    routing: str,
    activators: int = 1,
    config: AffinityConfig | None = None,
    *,
    engine: LlmParams | None = None,
    anchor_of: Callable[[TraceRequest], int | None] | None = None,
    exact: bool = False,
) -> Callable[[random.Random], Routed]:
    """The world's balancer factory for ``routing`` (one of :data:`ROUTINGS`).

    ``engine``: the replicas' engine, whose KV cache (in its blocks, shared
    by ``activators``) sizes each router's record, as an activator's record
    is sized to its share of the replica's cache.
    """
    config = config or AffinityConfig()
    if engine is not None:
        blocks = engine.kv_cache_tokens // engine.prefix_block_tokens
        config = replace(config, capacity_blocks=max(1, blocks // activators))
    if routing == "least-loaded":
        return LeastLoaded
    if routing == "prefix":
        routed = config
        return lambda rng: PrefixRouted(
            rng, activators=activators, config=routed, anchor_of=anchor_of, exact=exact
        )
    raise ValueError(f"unknown routing {routing!r}; choose from {list(ROUTINGS)}")


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every routing on one trace, beside the ceilings (:mod:`simulator.prefix_ceiling`)."""

    infinite: float  # one infinitely large cache's hit rate
    finite: float  # one LRU cache with the shared fleet's total KV capacity
    fleet: int  # the fixed fleet the hit rates, TTFT and spread are measured on
    rows: list[RoutingRow]
    autoscaled: list[AutoscaledRow]


@dataclass(frozen=True, slots=True)
class AutoscaledRow:
    routing: str
    activators: int
    gpu_seconds: float
    attainment: float
    hit_rate: float
    ttft_p50_s: float | None
    peak_replicas: int


def _recording(
    make: Callable[[random.Random], Routed], built: list[Routed]
) -> Callable[[random.Random], Routed]:
    def factory(rng: random.Random) -> Routed:
        made = make(rng)
        built.append(made)
        return made

    return factory


def compare(
    requests: Sequence[TraceRequest],
    options: SimulationOptions,
    *,
    activators: Sequence[int] = (1,),
    config: AffinityConfig | None = None,
    fleet: int | None = None,
    anchor_of: Callable[[TraceRequest], int | None] | None = None,
    autoscaled: bool = False,
    exact: bool = False,
) -> Comparison:
    """A row per routing (prefix: per activator count), and the ceilings.

    ``fleet``: the fixed fleet every routing is scored on, instead of the
    least-loaded goal fleet; the search for each routing's goal fleet is then
    skipped (its columns repeat ``fleet``). ``autoscaled``: also run each
    routing with Tidal scaling the fleet (:func:`autoscaled_rows`).
    """
    engine = options.world.engine
    plans = [("least-loaded", 1)] + [("prefix", n) for n in activators]
    rows: list[RoutingRow] = []
    shared_fleet = fleet
    for routing, n in plans:
        built: list[Routed] = []
        make = balancer(routing, n, config, engine=engine, anchor_of=anchor_of, exact=exact)
        world = replace(options.world, balancer=_recording(make, built))
        routed = replace(options, world=world)
        if fleet is None:
            needed, needed_run = smallest_always_on(requests, routed)
            goal = score(needed_run, slo_ttft_s=options.slo_ttft_s)
            shared_fleet = shared_fleet or needed
        built.clear()
        assert shared_fleet is not None
        run = run_world(requests, AlwaysOn(shared_fleet), world)
        card = score(run, slo_ttft_s=options.slo_ttft_s)
        if fleet is not None:
            needed, goal = fleet, card
        rows.append(
            RoutingRow(
                routing=routing,
                activators=n,
                fleet=needed,
                reaches_target=goal.slo_attainment >= options.always_on_attainment,
                gpu_seconds=goal.gpu_seconds,
                hit_rate=hit_rate(run, requests),
                ttft_p50_s=card.ttft_p50_s,
                ttft_p99_s=card.ttft_p99_s,
                attainment=card.slo_attainment,
                load_spread=built[-1].spread.worst(),
            )
        )
    assert shared_fleet is not None
    block = engine.prefix_block_tokens
    capacity = shared_fleet * (engine.kv_cache_tokens // block)
    return Comparison(
        infinite=infinite_cache_hit_rate(requests, block),
        finite=fleet_cache_hit_rate(requests, block, capacity),
        fleet=shared_fleet,
        rows=rows,
        autoscaled=(
            autoscaled_rows(requests, options, plans, config, anchor_of, exact=exact)
            if autoscaled
            else []
        ),
    )


def autoscaled_rows(
    requests: Sequence[TraceRequest],
    options: SimulationOptions,
    plans: Sequence[tuple[str, int]],
    config: AffinityConfig | None = None,
    anchor_of: Callable[[TraceRequest], int | None] | None = None,
    *,
    exact: bool = False,
) -> list[AutoscaledRow]:
    """Each (routing, activators) with Tidal's policy (the ``tidal`` row) scaling the fleet."""
    out = []
    for routing, n in plans:
        engine = options.world.engine
        make = balancer(routing, n, config, engine=engine, anchor_of=anchor_of, exact=exact)
        world = replace(options.world, balancer=make)
        (run,) = run_policies(requests, replace(options, world=world, policies=("tidal",)))
        assert run.result is not None
        card = run.scorecard
        out.append(
            AutoscaledRow(
                routing=routing,
                activators=n,
                gpu_seconds=card.gpu_seconds,
                attainment=card.slo_attainment,
                hit_rate=hit_rate(run.result, requests),
                ttft_p50_s=card.ttft_p50_s,
                peak_replicas=card.peak_replicas,
            )
        )
    return out


def _table(result: Comparison) -> str:
    lines = [
        f"hit rate of one infinitely large cache: {result.infinite:.3f}; of one LRU cache with "
        f"the fleet of {result.fleet}'s KV capacity: {result.finite:.3f}",
        "routing        activators  fleet@goal  GPU-s@goal  hit    x finite  TTFT p50  p99     "
        "SLO     load spread",
    ]
    for r in result.rows:
        star = "" if r.reaches_target else "*"
        p50 = f"{r.ttft_p50_s:.3f}" if r.ttft_p50_s is not None else "-"
        p99 = f"{r.ttft_p99_s:.3f}" if r.ttft_p99_s is not None else "-"
        ratio = r.hit_rate / result.finite if result.finite else 0.0
        lines.append(
            f"{r.routing:<14} {r.activators:>10}  {r.fleet:>9}{star:1} {r.gpu_seconds:>10.0f}  "
            f"{r.hit_rate:.3f}  {ratio:>8.2f}  {p50:>8}  {p99:>6}  "
            f"{r.attainment:.4f}  {r.load_spread:>11.2f}"
        )
    if result.autoscaled:
        lines.append("with Tidal scaling the fleet:")
        lines.append("routing        activators  GPU-s     SLO     hit    TTFT p50  peak replicas")
        for a in result.autoscaled:
            p50 = f"{a.ttft_p50_s:.3f}" if a.ttft_p50_s is not None else "-"
            lines.append(
                f"{a.routing:<14} {a.activators:>10}  {a.gpu_seconds:>8.0f}  {a.attainment:.4f}  "
                f"{a.hit_rate:.3f}  {p50:>8}  {a.peak_replicas:>13}"
            )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m simulator.prefix_routing",
        description="Least-loaded against prefix-aware routing on a trace with prompt block ids.",
    )
    kinds = ", ".join(f"synthetic:{k}" for k in ("chat", *WORKLOADS))
    parser.add_argument(
        "--trace",
        default="synthetic:chat",
        metavar="NAME|PATH",
        help=f"{kinds} (simulator.chat_trace, simulator.prefix_workloads) or a trace file "
        "with --prefix-field (default: synthetic:chat)",
    )
    parser.add_argument(
        "--prefix-field", default="hash_ids", metavar="FIELD", help="a file's block-id field"
    )
    parser.add_argument("--time-field", default="timestamp", metavar="FIELD", help="a file's")
    parser.add_argument("--time-unit", default="ms", choices=("s", "ms"), help="a file's")
    parser.add_argument("--prompt-field", default="input_length", metavar="FIELD", help="a file's")
    parser.add_argument("--output-field", default="output_length", metavar="FIELD", help="a file's")
    parser.add_argument(
        "--block-tokens",
        type=int,
        default=None,
        metavar="N",
        help="tokens per block id (default: 16 for a synthetic trace, 512 for a file)",
    )
    parser.add_argument(
        "--duration", type=float, default=600.0, metavar="S", help="synthetic: seconds"
    )
    parser.add_argument(
        "--conversations-per-s", type=float, default=25.0, metavar="R", help="synthetic:chat"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=20.0,
        metavar="R",
        help="synthetic documents and few-shot: requests/s; agents: tasks/s (default 20)",
    )
    parser.add_argument(
        "--think", type=float, default=20.0, metavar="S", help="synthetic:chat mean think time"
    )
    parser.add_argument(
        "--activators", default="1,2,4", metavar="N,N", help="prefix rows: activator counts"
    )
    parser.add_argument(
        "--anchor-blocks",
        type=int,
        default=None,
        metavar="N",
        help="leading blocks hashed onto the ring (default: a synthetic trace's system prompt "
        "and one more block, as the activator anchors a chat; a file: 8)",
    )
    parser.add_argument(
        "--fleet",
        type=int,
        default=None,
        metavar="N",
        help="score every routing on this fixed fleet (default: least-loaded's smallest fleet "
        "meeting the goal, after searching each routing's own)",
    )
    parser.add_argument(
        "--load-factor",
        type=float,
        default=AffinityConfig().load_factor,
        metavar="X",
        help="the router's bound: at most X times the mean in flight (default %(default)s)",
    )
    parser.add_argument(
        "--chance-sigmas",
        type=float,
        default=AffinityConfig().chance_sigmas,
        metavar="K",
        help="or the mean plus K standard deviations of chance, when more (default %(default)s)",
    )
    parser.add_argument(
        "--autoscaled", action="store_true", help="also each routing with Tidal scaling the fleet"
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="replicas publish KV-cache events and the routers track them exactly "
        "(default: each router records what it sent, aged as the cache would)",
    )
    parser.add_argument("--slo-ttft", type=float, default=2.0, metavar="S", help="TTFT objective")
    parser.add_argument("--max-replicas", type=int, default=16, metavar="N", help="fleet ceiling")
    parser.add_argument("--seed", type=int, default=1, metavar="N", help="random seed")
    parser.add_argument("--json", action="store_true", help="one JSON line instead of the table")
    return parser


def _workload(
    args: argparse.Namespace,
) -> tuple[list[TraceRequest], int, AffinityConfig, Callable[[TraceRequest], int | None] | None]:
    """The trace, its block size, the router's config and its anchors."""
    if args.trace == "synthetic:chat":
        block = args.block_tokens or 16
        spec = ChatSpec(
            duration_s=args.duration,
            conversations_per_s=args.conversations_per_s,
            think_s=args.think,
            block_tokens=block,
            seed=args.seed,
        )
        anchor = args.anchor_blocks or spec.system_tokens // block + 1
        return generate_chat(spec), block, AffinityConfig(anchor_blocks=anchor), None
    kind = args.trace.removeprefix("synthetic:")
    if args.trace.startswith("synthetic:"):
        block = args.block_tokens or 16
        requests = generate_workload(
            WorkloadSpec(
                kind=kind,
                duration_s=args.duration,
                rate_per_s=args.rate,
                block_tokens=block,
                seed=args.seed,
            )
        )
        return requests, block, AffinityConfig(), None if args.anchor_blocks else anchor_of
    block = args.block_tokens or 512
    fmt = TraceFormat(
        time_field=args.time_field,
        prompt_field=args.prompt_field,
        output_field=args.output_field,
        prefix_field=args.prefix_field,
        time_unit=args.time_unit,
    )
    anchor = args.anchor_blocks or AffinityConfig().anchor_blocks
    requests = read_trace(find_trace(args.trace), fmt)
    return requests, block, AffinityConfig(anchor_blocks=anchor), None


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        counts = tuple(int(x) for x in args.activators.split(","))
        requests, block, config, anchors = _workload(args)
    except ValueError as e:
        parser.error(f"{e} (--activators takes counts like 1,2,4)")
    options = SimulationOptions(
        slo_ttft_s=args.slo_ttft,
        max_replicas=args.max_replicas,
        world=replace(
            SimulationOptions().world,
            engine=LlmParams(prefix_block_tokens=block),
            seed=args.seed,
        ),
    )
    config = replace(config, load_factor=args.load_factor, chance_sigmas=args.chance_sigmas)
    result = compare(
        requests,
        options,
        activators=counts,
        config=config,
        fleet=args.fleet,
        anchor_of=anchors,
        autoscaled=args.autoscaled,
        exact=args.exact,
    )
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print(f"{len(requests)} requests, {args.trace}")
        print(_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
