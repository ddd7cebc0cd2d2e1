"""One model's world in simulated time: requests, the activator, replicas, an autoscaler.

A discrete-event simulation. Events (a heap ordered by time, then by the
order they were scheduled) are request arrivals, engine steps ending,
replicas becoming ready, spot interruption notices and removals, and a
control tick every simulated second. Nothing sleeps; a one-hour trace runs
in seconds.

What runs here is the product's own code, not a copy:

- **balancing**: ``activator.balancing.least_loaded.pick`` (least in flight by power of two
  choices) over the ready replicas, or the :class:`Balancer` the config's
  ``balancer`` builds (prefix-aware routing: :mod:`simulator.prefix_routing`),
  with the activator's defaults for the hold (``activator.targets``: at most
  ``max-buffered`` requests held, each for at most ``cold-start-timeout``),
  held in the Gate's own queue (``groundwork.fair_hold_queue``): a request
  takes a ready replica at once when nobody is waiting and one has room;
  otherwise it is held, and ready replicas release the held by class, then
  across tenants in turns weighted by tokens (in arrival order when the trace
  has neither field); at ``max-buffered`` a newcomer sheds the lowest class
  held (failure ``shed``) or is refused (``buffer-full``);
- **engine**: each replica runs the continuous-batching model that the
  sandbox's fake vLLM serves from (:class:`~simulator.engine.LlmEngine`),
  stepped from one batch change to the next
  (:class:`~simulator.engine.jump.JumpEngine`; ``WorldConfig.stepper``
  ``"step"`` walks every step, the reference);
- **placement**: ``scaler.policy.split`` turns the autoscaler's total into spot
  and on-demand replica counts every tick, seeing which spot replicas are
  ready (not starting, not under an interruption notice);
- **the autoscaler** is pluggable (:class:`Autoscaler`): Tidal's adapter
  (:mod:`simulator.tidal`) calls ``scaler.policy.decide``; the baselines
  (:mod:`simulator.baselines`) implement HPA, KEDA and Knative as their docs
  describe.

Main decision: **signals are sampled once per simulated second**, as the
time average of the requests held plus in flight over that second (what the
activator's report carries: the integral of ``in_flight + buffered``), and
each autoscaler decides at its own period. A request that arrives when its
model has no replica at all pokes the autoscaler at once (the activator's
``/v1/activate``). A scale-down removes replicas still starting first (newest
first), then the ready ones with the fewest requests in flight (Tidal's
pod-deletion cost); a removed ready replica takes no new request and lets
those in flight finish (Kubernetes' graceful termination), and its GPU is
counted until it is empty.

The engine model refuses a prompt at or over the model's context length
(``LlmParams.max_model_len``) as vLLM does, with a 400: the request fails
(``context-length``) the moment it reaches a replica. A trace with prefix
block hashes (:attr:`TraceRequest.prefix`) lets each replica's engine serve
shared prefixes from its own prefix cache; without them nothing changes.

GPU-seconds run from a replica's creation (the cold start holds the GPU too)
to its removal; *busy* seconds are the engine's step time, *idle* the rest.

**GPU shapes** (``WorldConfig.shapes``, docs/shapes.md): a world may offer
several shapes, each with its engine (the model on that GPU or MIG slice)
and a supply (the most replicas of it the cluster holds at once; more stay
Pending, with no node and no GPU-seconds, until one of it ends). An
autoscaler then answers each tick with replicas per shape, and the view it
sees carries each shape's servers apart (:class:`ShapeView`). The
balancer (``WorldConfig.balancer``) sees each replica's shape. A world
without shapes is as before.
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from activator.balancing.least_loaded import pick
from groundwork.fair_hold_queue import FairHoldQueue
from groundwork.rules.prompt_sizes import PROMPT_SIZE_BOUNDS
from groundwork.rules.routing_keys import DEFAULT_COLD_START_TIMEOUT_S, DEFAULT_MAX_BUFFERED
from scaler.policy import PlacementConfig, split
from simulator import progress
from simulator.columns import Counts, Reasons, Seconds, Times
from simulator.engine import LlmParams
from simulator.engine.jump import JumpEngine, StepEngine
from simulator.traces import TraceRequest

__all__ = [
    "Autoscaler",
    "Balancer",
    "ColdStart",
    "RunResult",
    "ShapeView",
    "SpotModel",
    "View",
    "WorldConfig",
    "WorldShape",
    "run_world",
]

ON_DEMAND = "on-demand"
SPOT = "spot"
#: The engines a world can step replicas with: jumping, and the step-by-step reference.
STEPPERS = ("jump", "step")

# Event kinds, in the order they are handled within the same instant: a
# replica that turns ready at t serves a request that arrives at t.
_READY = 0
_STEP_END = 1
_KILL = 2
_NOTICE = 3
_ARRIVAL = 4
_TICK = 5
_MARKET = 6
# Simulated seconds between two reports to the progress bar.
_PROGRESS_EVERY = 300


@dataclass(frozen=True, slots=True)
class ShapeView:
    """One GPU shape's replicas and servers at a control tick: its replicas
    ``(created_s, ready, pending)``, and what its vLLM servers publish (as
    :class:`View` has them for all)."""

    replicas: tuple[tuple[float, bool, bool], ...] = ()
    prefilled_tokens: int = 0
    generated_tokens: int = 0
    running: int = 0
    server_waiting: int = 0
    running_least: int = 0
    waiting_least: int = 0
    kv_cache_utilization: float = 0.0
    server_ttfts: tuple[float, ...] = ()

    @property
    def ready(self) -> int:
        return sum(1 for _, ready, _ in self.replicas if ready)


@dataclass(frozen=True, slots=True)
class View:
    """What an autoscaler sees at a control tick (one model)."""

    now: float
    ready: int  # replicas serving (not starting, not draining, not under notice)
    spec: int  # replicas asked for (the last total target)
    concurrency: float  # mean of held + in-flight requests over the last second
    busy: bool  # any request held or in flight during the last second
    held: int  # requests held by the activator now
    in_flight: int  # requests on replicas now
    arrivals: int = 0  # requests that arrived during the last second
    arrival_prompt_tokens: int = 0  # their prompt tokens
    arrival_output_tokens: int = 0  # and output tokens
    first_tokens: int = 0  # requests whose first token came during the last second
    prefilled_tokens: int = 0  # their prompt tokens (vLLM's prompt_tokens_total)
    awaiting_first_token: int = 0  # requests held or in flight with no first token yet
    # The fastest prefill of the last second's first tokens: prompt tokens over
    # the time from reaching a replica to the first token (0: none).
    best_prefill_tokens_per_s: float = 0.0
    # What the servers publish (vLLM's metrics), over the serving replicas: tokens
    # generated in the last second; sequences running, requests waiting and the
    # mean KV-cache usage now; the last second's first tokens' TTFT as the
    # servers time it (from reaching the replica).
    generated_tokens: int = 0
    running: int = 0
    server_waiting: int = 0
    # The fewest running and waiting on any one serving replica now.
    running_least: int = 0
    waiting_least: int = 0
    kv_cache_utilization: float = 0.0
    server_ttfts: tuple[float, ...] = ()
    # The last second's arrivals with prompts longer than each of the policy's
    # PROMPT_SIZE_BOUNDS.
    prompts_over: tuple[int, ...] = ()
    # With GPU shapes: each shape's replicas and servers.
    shapes: Mapping[str, ShapeView] = field(default_factory=dict)


class Autoscaler(Protocol):
    """A scaling policy driven by the world.

    ``initial`` is the replica count at time 0, already warm (an always-on
    fleet, HPA's minimum of one; in a world of shapes, of its first shape).
    ``tick`` is called every simulated second with ``activation=False`` and
    at once, with ``activation=True``, when a request finds its model at
    zero replicas; it returns the new total target, or None to keep the
    current one; in a world of shapes, replicas per shape.
    """

    @property
    def name(self) -> str: ...

    @property
    def initial(self) -> int: ...

    def tick(self, view: View, *, activation: bool) -> int | Mapping[str, int] | None: ...


@dataclass(frozen=True, slots=True)
class ColdStart:
    """Seconds from asking for a replica to it serving: a log-normal around ``median_s``.

    ``sigma`` 0 makes every cold start exactly ``median_s`` (reproducible
    comparisons). The README of the traces quotes a diffusion model's load
    p50 23 s, p90 42 s, p99 52 s (Alibaba 2026 GenAI trace): ``sigma`` 0.45
    gives p90/p50 = 1.8 as there.
    """

    median_s: float = 60.0
    sigma: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.median_s) and self.median_s >= 0):
            raise ValueError(f"cold start must be >= 0 s, got {self.median_s!r}")
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise ValueError(f"cold-start sigma must be >= 0, got {self.sigma!r}")

    def draw(self, rng: random.Random) -> float:
        if self.sigma == 0:
            return self.median_s
        return self.median_s * math.exp(rng.gauss(0.0, self.sigma))


@dataclass(frozen=True, slots=True)
class SpotModel:
    """Spot interruptions and availability.

    Three sources, any combination (defaults: none):

    - ``rate_per_hour``: each spot replica is interrupted after an
      exponential time with this rate (per replica-hour);
    - ``times_s`` (a preemption trace): at each time the oldest live spot
      replica gets its notice;
    - ``availability`` below 1: each of ``zones`` zones has spot capacity
      that alternates between available and unavailable stretches
      (exponential, means chosen so that the long-run share available is
      ``availability`` and there are ``changes_per_day`` state changes a day
      in each zone), independently of the other zones. A new spot replica
      goes to the available zone with the fewest spot replicas (spread, as
      SkyServe's SpotHedge places spot replicas over zones); when a zone
      becomes unavailable its spot replicas, and only those, get their
      notice; spot replicas asked for while no zone has capacity stay
      *pending* (no node, no GPU-seconds) until one comes back. SkyPilot's
      spot traces (Wu et al., "Can't Be Late", NSDI 2024; the traces
      README): a 1-GPU spot type available 17 % to 79 % of the time, about
      5.5 state changes a day *per zone*. Independence across zones is the
      optimistic end: SkyServe (Mao et al., EuroSys 2025) finds preemptions
      correlated within a zone and much less across zones and regions,
      which is why it spreads; one zone (the default) is the pessimistic end.

    ``notice_s`` 120 is AWS's two-minute spot interruption notice (GCP
    gives 30 s).
    """

    rate_per_hour: float = 0.0
    notice_s: float = 120.0
    times_s: tuple[float, ...] = ()
    availability: float = 1.0
    changes_per_day: float = 5.5
    zones: int = 1

    def __post_init__(self) -> None:
        if self.zones < 1:
            raise ValueError(f"spot zones must be >= 1, got {self.zones}")
        if not (math.isfinite(self.rate_per_hour) and self.rate_per_hour >= 0):
            raise ValueError(
                f"spot preemption rate must be >= 0 per hour, got {self.rate_per_hour}"
            )
        if not (math.isfinite(self.notice_s) and self.notice_s >= 0):
            raise ValueError(f"spot notice must be >= 0 s, got {self.notice_s}")
        if not 0 < self.availability <= 1:
            raise ValueError(f"spot availability is a share within (0, 1], got {self.availability}")
        if not (math.isfinite(self.changes_per_day) and self.changes_per_day > 0):
            raise ValueError(f"spot changes per day must be > 0, got {self.changes_per_day}")

    def mean_stretch_s(self, *, available: bool) -> float:
        """Mean length of an available (or unavailable) stretch."""
        cycle_s = 2 * 86400.0 / self.changes_per_day
        share = self.availability if available else 1 - self.availability
        return cycle_s * share


class ServingReplica(Protocol):
    """What a balancer sees of a replica: a stable id, its requests in flight, and
    its GPU shape ("" in a world without shapes)."""

    @property
    def rid(self) -> int: ...

    @property
    def in_flight(self) -> int: ...

    @property
    def shape(self) -> str: ...


R = TypeVar("R", bound=ServingReplica)


class Balancer(Protocol):
    """Picks a serving replica for a request (None: hold it), in place of least in flight."""

    def pick(self, request: TraceRequest, serving: Sequence[R], limit: int) -> R | None: ...


@dataclass(frozen=True, slots=True)
class WorldShape:
    """A GPU shape the world offers: the model's engine on it, and its supply (the
    most replicas of it at once; None: as many as asked)."""

    name: str
    engine: LlmParams
    supply: int | None = None

    def __post_init__(self) -> None:
        if self.supply is not None and self.supply < 0:
            raise ValueError(f"shape {self.name}: supply must be >= 0, got {self.supply}")


@dataclass(frozen=True, slots=True)
class WorldConfig:
    engine: LlmParams = field(default_factory=LlmParams)
    cold_start: ColdStart = field(default_factory=ColdStart)
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    spot: SpotModel = field(default_factory=SpotModel)
    cold_start_timeout_s: float = DEFAULT_COLD_START_TIMEOUT_S
    max_buffered: int = DEFAULT_MAX_BUFFERED
    container_concurrency: int = 0  # 0: no per-replica limit (docs/annotations.md default)
    seed: int = 1
    # None: the activator's least-in-flight pick. Built once per run, given the run's rng.
    balancer: Callable[[random.Random], Balancer] | None = None
    # How replicas' engines are stepped: "jump" from one batch change to the next
    # (simulator.engine.jump), or "step", every step (the reference it is checked against).
    stepper: str = "jump"
    # GPU shapes (the module docstring); none: every replica runs ``engine``.
    shapes: tuple[WorldShape, ...] = ()

    def __post_init__(self) -> None:
        if self.stepper not in STEPPERS:
            raise ValueError(f"unknown stepper {self.stepper!r}; choose from {list(STEPPERS)}")
        names = [s.name for s in self.shapes]
        if len(set(names)) != len(names):
            raise ValueError(f"shape names must be distinct, got {names}")

    def engine_of(self, shape: str) -> LlmParams:
        """The engine of a replica of ``shape`` ("": the world's own)."""
        for offered in self.shapes:
            if offered.name == shape:
                return offered.engine
        return self.engine


@dataclass(slots=True)
class _Replica:
    rid: int
    capacity: str
    created_s: float
    engine: JumpEngine | StepEngine
    params: LlmParams
    shape: str = ""  # its GPU shape ("": the world has none)
    ready: bool = False
    draining: bool = False  # removed by a scale-down: no new requests, finishing the rest
    noticed: bool = False  # spot interruption notice received
    pending: bool = False  # spot asked for while no zone has any: no node yet
    zone: int = 0  # the spot zone its node is in (on-demand: 0, never noticed by a zone)
    ended_s: float | None = None
    ready_s: float | None = None  # when its cold start ended
    in_flight: int = 0
    requests: set[int] = field(default_factory=set)

    @property
    def serving(self) -> bool:
        return self.ready and not self.draining and not self.noticed and self.ended_s is None


@dataclass(frozen=True, slots=True)
class ReplicaLife:
    capacity: str
    created_s: float
    ended_s: float
    busy_s: float
    cached_tokens: int = 0  # prompt tokens its prefix cache served
    queried_tokens: int = 0  # prompt tokens of the requests it took (vLLM's cache queries)
    shape: str = ""  # its GPU shape ("": the world has none)
    # When its cold start ended (None: not known, all of its life counts as
    # serving); until then its device-seconds are *starting* on the scorecard.
    ready_s: float | None = None


@dataclass(frozen=True, slots=True)
class Second:
    """The timeline, one entry per simulated second (for charts and checks)."""

    at_s: float
    arrivals: int
    concurrency: float
    ready: int
    spec: int


@dataclass(frozen=True, slots=True)
class RunResult:
    """Everything the scorecard needs from one run.

    The per-request sequences are tuples or, from :func:`run_world`, packed
    columns that read the same (:mod:`simulator.columns`).
    """

    name: str
    arrival_s: Sequence[float]
    first_token_s: Sequence[float | None]  # None: failed
    finished_s: Sequence[float | None]
    output_tokens: Sequence[int]
    failed_reason: Sequence[str | None]
    cold_start_wait_s: tuple[float, ...]  # per request held because nothing was ready
    cold_starts: int  # transitions from zero ready replicas to one or more
    replicas: tuple[ReplicaLife, ...]
    timeline: tuple[Second, ...]
    end_s: float
    preemptions: int
    # Each request's priority class and tenant, as the trace gave them (empty:
    # the trace has none, every request standard and of one tenant).
    priority: Sequence[int] = ()
    tenant: Sequence[str] = ()


def run_world(
    requests: Iterable[TraceRequest],
    autoscaler: Autoscaler,
    config: WorldConfig | None = None,
    *,
    until_s: float | None = None,
) -> RunResult:
    """Replay ``requests`` (sorted by offset) against ``autoscaler``; see the module docstring.

    The run ends at the first tick after the last arrival (or at ``until_s``,
    if later) once every request is answered. ``requests`` is read once, as
    a stream: only requests held or in flight are kept, and per request
    only the packed columns of the result, so a trace of millions runs in
    flat memory.
    """
    return _World(requests, autoscaler, config or WorldConfig()).run(until_s)


class _Fleet:
    """A model's replicas: creating, starting, readying, removing and interrupting them.

    The world owns time and requests; the fleet keeps each capacity pool at
    what ``split`` asks for :attr:`target`, schedules replica events through
    ``push``, hands held requests out through ``dispatch`` when a replica
    turns ready and reports through ``lose`` each request a killed node took
    with it.
    """

    def __init__(
        self,
        config: WorldConfig,
        push: Callable[[float, int, int, object], None],
        dispatch: Callable[[], None],
        lose: Callable[[int], None],
        emitted: Callable[[int, str], None],
    ) -> None:
        self.config = config
        self.push = push
        self.dispatch = dispatch
        self.lose = lose
        self.emitted = emitted
        self.now = 0.0
        self.cold_rng = random.Random(config.seed + 1)
        self.spot_rng = random.Random(config.seed + 2)
        self.replicas: list[_Replica] = []  # alive (not ended)
        self._serving: list[_Replica] | None = None  # the serving ones (None: to count again)
        # Nothing changed since the last reconcile at this target: the next is a no-op.
        self._clean = False
        self._reconciled = 0
        self.lives: list[ReplicaLife] = []
        self.next_rid = 0
        self.target = 0
        self.shape_targets: dict[str, int] = {}  # with shapes: each shape's part of the target
        self.cold_starts = 0
        self.preemptions = 0
        self.ready_count = 0
        # Per zone: does it have spot capacity now?
        self.spot_available = [True] * config.spot.zones

    def open_market(self) -> None:
        """Draw each zone's spot state at time 0 and schedule its first change."""
        if self.config.spot.availability < 1:
            for zone in range(self.config.spot.zones):
                self.spot_available[zone] = self.spot_rng.random() < self.config.spot.availability
                self.schedule_market(zone)

    def _changed(self) -> None:
        """A replica came, went or changed state."""
        self._serving = None
        self._clean = False

    def serving(self) -> list[_Replica]:
        """The replicas taking requests (kept until one starts, stops or changes)."""
        if self._serving is None:
            self._serving = [r for r in self.replicas if r.serving]
        return self._serving

    def create(self, capacity: str, *, warm: bool, shape: str = "") -> None:
        params = self.config.engine_of(shape)
        replica = _Replica(
            rid=self.next_rid,
            capacity=capacity,
            created_s=self.now,
            engine=(JumpEngine if self.config.stepper == "jump" else StepEngine)(params),
            params=params,
            shape=shape,
        )
        self.next_rid += 1
        self.replicas.append(replica)
        self._changed()
        if shape and not self.has_room(shape):
            replica.pending = True  # none of its resource free: Pending, no node
            return
        if capacity == SPOT:
            zone = self.spot_zone()
            if zone is None:
                replica.pending = True
                return
            replica.zone = zone
        self.start(replica, warm=warm)

    def has_room(self, shape: str) -> bool:
        """Whether the cluster has a free ``shape`` for one more replica."""
        supply = next((s.supply for s in self.config.shapes if s.name == shape), None)
        if supply is None:
            return True
        held = sum(1 for r in self.replicas if r.shape == shape and not r.pending)
        return held < supply

    def spot_zone(self) -> int | None:
        """The available zone with the fewest live spot replicas (None: no zone has spot)."""
        counts = [0] * self.config.spot.zones
        for r in self.replicas:
            if r.capacity == SPOT and not r.pending and not r.noticed and r.ended_s is None:
                counts[r.zone] += 1
        open_zones = [z for z, ok in enumerate(self.spot_available) if ok]
        return min(open_zones, key=lambda z: (counts[z], z), default=None)

    def start(self, replica: _Replica, *, warm: bool = False) -> None:
        """The replica has a node: its GPU is held from now, its cold start begins."""
        replica.pending = False
        self._changed()
        replica.created_s = self.now
        if warm:
            replica.ready = True
            replica.ready_s = self.now
            self.ready_count += 1
        else:
            self.push(self.now + self.config.cold_start.draw(self.cold_rng), _READY, 0, replica)
        if replica.capacity == SPOT and self.config.spot.rate_per_hour > 0:
            hours = self.spot_rng.expovariate(self.config.spot.rate_per_hour)
            self.push(self.now + hours * 3600.0, _NOTICE, 0, replica)

    def schedule_market(self, zone: int) -> None:
        mean = self.config.spot.mean_stretch_s(available=self.spot_available[zone])
        self.push(self.now + self.spot_rng.expovariate(1.0 / mean), _MARKET, zone, None)

    def market(self, zone: int) -> None:
        self.spot_available[zone] = not self.spot_available[zone]
        if self.spot_available[zone]:
            for replica in [r for r in self.replicas if r.pending]:
                replica.zone = zone
                self.start(replica)
        else:
            for replica in [
                r for r in self.replicas if r.capacity == SPOT and not r.pending and r.zone == zone
            ]:
                self.notice(replica)
        self.schedule_market(zone)

    def ready(self, replica: _Replica) -> None:
        if replica.ended_s is not None or replica.draining:
            return
        replica.ready = True
        replica.ready_s = self.now
        self._changed()
        if not replica.noticed:
            if self.ready_count == 0:
                self.cold_starts += 1
            self.ready_count += 1
            self.dispatch()

    def end(self, replica: _Replica) -> None:
        if replica.ended_s is not None:
            return
        if replica.serving:
            self.ready_count -= 1
        replica.ended_s = self.now
        self.replicas.remove(replica)
        self._changed()
        if replica.pending:
            return  # never had a node: no GPU time
        self.emitted(replica.engine.settle(self.now), replica.shape)
        self.lives.append(
            ReplicaLife(
                capacity=replica.capacity,
                created_s=replica.created_s,
                ended_s=self.now,
                busy_s=replica.engine.busy_time_s(self.now),
                cached_tokens=replica.engine.cached_tokens,
                queried_tokens=replica.engine.queried_tokens,
                shape=replica.shape,
                ready_s=self.now if replica.ready_s is None else replica.ready_s,
            )
        )
        if replica.shape:
            # Its device is free: the oldest replica of its shape waiting for one gets it.
            waiting = [r for r in self.replicas if r.shape == replica.shape and r.pending]
            if waiting:
                self.start(min(waiting, key=lambda r: r.rid))

    def remove(self, replica: _Replica) -> None:
        """A scale-down picked this replica: stop sending to it; end it once empty."""
        if replica.serving:
            self.ready_count -= 1
        replica.draining = True
        self._changed()
        if replica.in_flight == 0:
            self.end(replica)

    def notice(self, replica: _Replica) -> None:
        if replica.ended_s is not None or replica.noticed or replica.pending:
            return
        if replica.serving:
            self.ready_count -= 1
        replica.noticed = True
        self._changed()
        self.preemptions += 1
        self.push(self.now + self.config.spot.notice_s, _KILL, 0, replica)
        self.reconcile()

    def notice_oldest_spot(self) -> None:
        """A preemption trace's entry: the oldest live spot replica gets its notice."""
        spot = [r for r in self.replicas if r.capacity == SPOT and not r.noticed]
        if spot:
            self.notice(min(spot, key=lambda r: r.created_s))

    def kill(self, replica: _Replica) -> None:
        if replica.ended_s is not None:
            return
        for i in list(replica.requests):
            # The node is gone: what was still running on it is lost.
            replica.engine.abort(i)
            self.lose(i)
        replica.requests.clear()
        replica.in_flight = 0
        self.end(replica)
        self.reconcile()

    def reconcile(self, *, warm: bool = False) -> None:
        """Bring each capacity pool to what ``split`` asks for the current target (in a
        world of shapes, each shape's pool to its part).

        A reconcile that changed nothing, at the same target, with no replica
        changed since, would change nothing again: it is skipped (most ticks).
        """
        if self.config.shapes:
            self.reconcile_shapes(warm=warm)
            return
        if self._clean and self.target == self._reconciled and not warm:
            return
        self._clean = True
        self._reconciled = self.target
        for capacity in (SPOT, ON_DEMAND):
            # Spot first: a warm start makes spot replicas ready at once, and
            # the on-demand count must see them (or it would cover them too).
            alive = [r for r in self.replicas if not r.draining and not r.noticed]
            ready_spot = sum(1 for r in alive if r.capacity == SPOT and r.ready)
            want = split(target=self.target, placement=self.config.placement, ready_spot=ready_spot)
            count = want.spot if capacity == SPOT else want.on_demand
            pool = [r for r in alive if r.capacity == capacity]
            if len(pool) < count:
                for _ in range(count - len(pool)):
                    self.create(capacity, warm=warm)
            elif len(pool) > count:
                # Starting replicas first (newest first), then the least loaded.
                pool.sort(key=lambda r: (r.ready, r.in_flight, -r.created_s))
                for replica in pool[: len(pool) - count]:
                    self.remove(replica)
        if warm:
            self.dispatch()

    def reconcile_shapes(self, *, warm: bool = False) -> None:
        """Bring each shape's replicas to its part of the target (all on demand)."""
        for offered in self.config.shapes:
            count = self.shape_targets.get(offered.name, 0)
            pool = [r for r in self.replicas if r.shape == offered.name and not r.draining]
            if len(pool) < count:
                for _ in range(count - len(pool)):
                    self.create(ON_DEMAND, warm=warm, shape=offered.name)
            elif len(pool) > count:
                # Pending and starting replicas first (newest first), then the least loaded.
                pool.sort(key=lambda r: (r.ready, r.in_flight, -r.created_s))
                for replica in pool[: len(pool) - count]:
                    self.remove(replica)
        if warm:
            self.dispatch()


class _World:
    def __init__(
        self, requests: Iterable[TraceRequest], autoscaler: Autoscaler, config: WorldConfig
    ) -> None:
        self.config = config
        self.autoscaler = autoscaler
        self.pending = iter(requests)
        self.last_offset = -math.inf
        self.live: dict[int, TraceRequest] = {}  # held or in flight
        self.arrival_s = Seconds()
        self.outputs = Counts()
        self.first_token = Times()
        self.finished = Times()
        self.failed = Reasons()
        self.priorities: list[int] | None = None  # once a request has a class
        self.tenants: list[str] | None = None  # once a request has a tenant
        self.held_cold: set[int] = set()  # held while no replica was ready
        self.cold_waits: list[float] = []
        self.where: dict[int, _Replica] = {}
        self.rng = random.Random(config.seed)
        self.balancer = config.balancer(self.rng) if config.balancer is not None else None
        self.events: list[tuple[float, int, int, int, object]] = []
        self.order = 0
        self.fleet = _Fleet(config, self._push, self._dispatch, self._lose, self._emitted)
        self.held: FairHoldQueue[int] = FairHoldQueue()
        # Held + in-flight, and its time integral since the last tick.
        self.outstanding = 0
        self.integral = 0.0
        self.busy_in_second = False
        self.awaiting = 0  # requests with no first token yet (held or in flight)
        self.sent_at: dict[int, float] = {}  # request -> when it reached its replica
        self._new_second()
        self.timeline: list[Second] = []
        self.now = 0.0
        self.spot_times = deque(sorted(config.spot.times_s))
        self.unreported = (0, 0)  # ticks and arrivals not yet told to the progress bar
        self.kind = _TICK  # the kind of event being handled
        self.shape_names = tuple(s.name for s in config.shapes)

    def _new_second(self) -> None:
        """The counts kept over one second of the world, from zero."""
        self.arrivals_in_second: int = 0
        self.tokens_in_second: tuple[int, int] = (0, 0)
        self.prefilled_in_second: tuple[int, int] = (0, 0)  # first tokens, their prompt tokens
        self.best_prefill: float = 0.0
        self.generated_in_second: int = 0
        self.ttfts_in_second: list[float] = []
        self.over_in_second: list[int] = [0] * len(PROMPT_SIZE_BOUNDS)
        # With shapes, per shape: prompt tokens prefilled, tokens generated, TTFTs.
        self.shape_second: dict[str, tuple[int, int, list[float]]] = {}

    # --- events -------------------------------------------------------------------------

    def _push(self, at_s: float, kind: int, key: int, payload: object = None) -> None:
        self.order += 1
        heapq.heappush(self.events, (at_s, kind, self.order, key, payload))

    def _next_arrival(self) -> bool:
        """Schedule the trace's next request (the stream is read one ahead); False: none left."""
        request = next(self.pending, None)
        if request is None:
            return False
        if request.offset_s < self.last_offset:
            raise ValueError(
                f"requests must come in time order: one at {request.offset_s} s follows one at "
                f"{self.last_offset} s"
            )
        self.last_offset = request.offset_s
        self._push(request.offset_s, _ARRIVAL, 0, request)
        return True

    def run(self, until_s: float | None) -> RunResult:
        if not self._next_arrival():
            raise ValueError("a simulation needs at least one request")
        horizon = math.inf
        fleet = self.fleet
        # The zones' spot state is drawn before the warm start, so that warm
        # spot replicas go only to zones that have spot at time 0.
        fleet.open_market()
        initial = self.autoscaler.initial
        if initial > 0:
            fleet.target = initial
            if self.config.shapes:
                fleet.shape_targets = {self.config.shapes[0].name: initial}
            fleet.reconcile(warm=True)
        self._push(0.0, _TICK, 0)
        events = self.events
        while events:
            at_s, kind, _, key, payload = heapq.heappop(events)
            self.kind = kind
            self._advance(at_s)
            if kind == _STEP_END:
                self._step_end(*payload)  # type: ignore[misc]
            elif kind == _ARRIVAL:
                if not self._next_arrival() and horizon == math.inf:
                    horizon = max(math.floor(self.last_offset) + 1.0, until_s or 0.0)
                self._arrive(payload)  # type: ignore[arg-type]
            elif kind == _TICK:
                self._tick()
                if at_s >= horizon and self.outstanding == 0:
                    break  # every policy's run ends at the same time once all is answered
                self._push(at_s + 1.0, _TICK, 0)
            elif kind == _READY:
                fleet.ready(payload)  # type: ignore[arg-type]
            elif kind == _NOTICE:
                fleet.notice(payload)  # type: ignore[arg-type]
            elif kind == _KILL:
                fleet.kill(payload)  # type: ignore[arg-type]
            elif kind == _MARKET:
                fleet.market(key)
        end_s = self.now
        for replica in list(fleet.replicas):
            fleet.end(replica)
        progress.advance(*self.unreported)
        return RunResult(
            name=self.autoscaler.name,
            arrival_s=self.arrival_s,
            first_token_s=self.first_token,
            finished_s=self.finished,
            output_tokens=self.outputs,
            failed_reason=self.failed,
            cold_start_wait_s=tuple(self.cold_waits),
            cold_starts=fleet.cold_starts,
            replicas=tuple(fleet.lives),
            timeline=tuple(self.timeline),
            end_s=end_s,
            preemptions=fleet.preemptions,
            priority=tuple(self.priorities or ()),
            tenant=tuple(self.tenants or ()),
        )

    def _advance(self, at_s: float) -> None:
        if at_s > self.now:
            self.integral += self.outstanding * (at_s - self.now)
            self.now = at_s
            self.fleet.now = at_s

    def _change_outstanding(self, delta: int) -> None:
        self.outstanding += delta
        if self.outstanding > 0:
            self.busy_in_second = True

    # --- requests -------------------------------------------------------------------------

    def _record(self, r: TraceRequest) -> int:
        """A new request's row in the result's columns: its index."""
        i = len(self.arrival_s)
        self.live[i] = r
        self.arrival_s.append(r.offset_s)
        self.outputs.append(r.output_tokens)
        self.first_token.append(None)
        self.finished.append(None)
        self.failed.append(None)
        if r.priority and self.priorities is None:
            self.priorities = [0] * i
        if self.priorities is not None:
            self.priorities.append(r.priority)
        if r.tenant and self.tenants is None:
            self.tenants = [""] * i
        if self.tenants is not None:
            self.tenants.append(r.tenant)
        return i

    def _arrive(self, r: TraceRequest) -> None:
        i = self._record(r)
        self.arrivals_in_second += 1
        prompt, output = self.tokens_in_second
        self.tokens_in_second = (prompt + r.prompt_tokens, output + r.output_tokens)
        # The bounds it is over: those below it (they ascend).
        for b in range(bisect_left(PROMPT_SIZE_BOUNDS, r.prompt_tokens)):
            self.over_in_second[b] += 1
        self._change_outstanding(1)
        self.awaiting += 1
        if not self.held:
            replica = self._pick(i)
            if replica is not None:
                self._assign(i, replica)
                return
        if len(self.held) >= self.config.max_buffered:
            shed = self.held.shed_for(r.priority, r.tenant)
            if shed is None:
                self._fail(i, "buffer-full")
                return
            self.held_cold.discard(shed)
            self._fail(shed, "shed")
        # Weighted by the tokens the request may use, as the activator does.
        self.held.hold(i, self.now, r.priority, r.tenant, r.prompt_tokens + r.output_tokens)
        if self.fleet.ready_count == 0:
            self.held_cold.add(i)
        if self.fleet.target == 0:
            self._decide(activation=True)

    def _fail(self, i: int, reason: str) -> None:
        if self.first_token[i] is None:
            self.awaiting -= 1
        self.failed.set(i, reason)
        del self.live[i]
        self._change_outstanding(-1)

    def _lose(self, i: int) -> None:
        """A killed node took request ``i`` with it."""
        del self.where[i]
        self._fail(i, "preempted")

    def _pick(self, i: int) -> _Replica | None:
        serving = self.fleet.serving()
        if not serving:
            return None
        if self.balancer is not None:
            return self.balancer.pick(self.live[i], serving, self.config.container_concurrency)
        return pick(serving, self.config.container_concurrency, self.rng)

    def _assign(self, i: int, replica: _Replica) -> None:
        r = self.live[i]
        params = replica.params
        limit = min(params.max_model_len, params.kv_cache_tokens)
        prompt = max(1, r.prompt_tokens)
        if prompt >= limit:
            # vLLM answers at once with a 400: the prompt leaves no room for a token.
            self._fail(i, "context-length")
            return
        replica.in_flight += 1
        replica.requests.add(i)
        self.where[i] = replica
        self.sent_at[i] = self.now
        # The engine needs at least one token each way; a trace row with 0
        # output tokens (a failed or empty completion) still costs a prefill.
        # Generation stops at the context length (finish reason "length").
        replica.engine.add(
            i,
            prompt_tokens=prompt,
            output_tokens=min(max(1, r.output_tokens), limit - prompt),
            now=self.now,
            prefix=r.prefix,
        )
        engine = replica.engine
        if not engine.in_step:
            self._begin_step(replica)
            return
        # Steps in flight: the engine ends them where it would admit this request
        # (at once for a step boundary now, when what is handled now comes first).
        end = engine.cut(self.now, inclusive=self.kind < _STEP_END)
        if end is not None:
            self._push(end, _STEP_END, replica.rid, (replica, engine.plan_no))

    def _dispatch(self) -> None:
        for i, since, replica in self.held.hand_out(self._pick):
            if i in self.held_cold:
                self.held_cold.discard(i)
                self.cold_waits.append(self.now - since)
            self._assign(i, replica)

    def _expire_held(self) -> None:
        for i in self.held.expire(self.config.cold_start_timeout_s, self.now):
            self.held_cold.discard(i)
            self._fail(i, "cold-start-timeout")

    # --- engines --------------------------------------------------------------------------

    def _begin_step(self, replica: _Replica) -> None:
        end = replica.engine.begin_step(self.now)
        if end is not None:
            self._push(end, _STEP_END, replica.rid, (replica, replica.engine.plan_no))

    def _emitted(self, tokens: int, shape: str = "") -> None:
        self.generated_in_second += tokens
        if shape and tokens:
            self._shape_counts(shape, generated=tokens)

    def _shape_counts(
        self, shape: str, *, prefilled: int = 0, generated: int = 0, ttft: float | None = None
    ) -> None:
        """Add to ``shape``'s counts of this second."""
        was_prefilled, was_generated, ttfts = self.shape_second.get(shape, (0, 0, []))
        if ttft is not None:
            ttfts.append(ttft)
        self.shape_second[shape] = (was_prefilled + prefilled, was_generated + generated, ttfts)

    def _step_end(self, replica: _Replica, plan_no: int) -> None:
        if replica.ended_s is not None or replica.engine.plan_no != plan_no:
            return  # killed mid-step (spot removal), or the steps were cut short since
        outcome = replica.engine.end_step()
        firsts, prefilled = self.prefilled_in_second
        for i in outcome.first:
            self.first_token.set(i, outcome.end_s)
            firsts += 1
            prompt = self.live[i].prompt_tokens
            prefilled += prompt
            took = outcome.end_s - self.sent_at.pop(i, outcome.end_s)
            self.ttfts_in_second.append(took)
            if took > 0:
                self.best_prefill = max(self.best_prefill, prompt / took)
            if replica.shape:
                self._shape_counts(replica.shape, prefilled=prompt, ttft=took)
        self.awaiting -= len(outcome.first)
        self.prefilled_in_second = (firsts, prefilled)
        self._emitted(outcome.tokens, replica.shape)
        if outcome.finished:
            for i in outcome.finished:
                self.finished.set(i, outcome.end_s)
                replica.requests.discard(i)
                del self.where[i]
                del self.live[i]
            replica.in_flight -= len(outcome.finished)
            self._change_outstanding(-len(outcome.finished))
        if replica.engine.has_work:
            self._begin_step(replica)
        elif replica.draining and replica.in_flight == 0:
            self.fleet.end(replica)
        if outcome.finished and self.held and self.config.container_concurrency > 0:
            self._dispatch()

    # --- control ----------------------------------------------------------------------------

    def _view(self, concurrency: float) -> View:
        in_flight = self.outstanding - len(self.held)
        serving = self.fleet.serving()
        running = waiting = 0
        kv = 0.0
        running_least = waiting_least = 0
        for index, replica in enumerate(serving):
            engine = replica.engine
            running += engine.num_running
            waiting += engine.num_waiting
            kv += engine.kv_usage
            if index == 0 or engine.num_running < running_least:
                running_least = engine.num_running
            if index == 0 or engine.num_waiting < waiting_least:
                waiting_least = engine.num_waiting
        return View(
            now=self.now,
            ready=self.fleet.ready_count,
            spec=self.fleet.target,
            concurrency=concurrency,
            busy=self.busy_in_second or self.outstanding > 0,
            held=len(self.held),
            in_flight=in_flight,
            arrivals=self.arrivals_in_second,
            arrival_prompt_tokens=self.tokens_in_second[0],
            arrival_output_tokens=self.tokens_in_second[1],
            first_tokens=self.prefilled_in_second[0],
            prefilled_tokens=self.prefilled_in_second[1],
            awaiting_first_token=self.awaiting,
            best_prefill_tokens_per_s=self.best_prefill,
            generated_tokens=self.generated_in_second,
            running=running,
            server_waiting=waiting,
            running_least=running_least,
            waiting_least=waiting_least,
            kv_cache_utilization=kv / max(1, len(serving)),
            server_ttfts=tuple(self.ttfts_in_second),
            prompts_over=tuple(self.over_in_second),
            shapes=self._shape_views() if self.config.shapes else {},
        )

    def _shape_views(self) -> dict[str, ShapeView]:
        out = {}
        for offered in self.config.shapes:
            mine = [r for r in self.fleet.replicas if r.shape == offered.name and not r.draining]
            engines = [r.engine for r in mine if r.serving]
            prefilled, generated, ttfts = self.shape_second.get(offered.name, (0, 0, []))
            out[offered.name] = ShapeView(
                replicas=tuple((r.created_s, r.serving, r.pending) for r in mine),
                prefilled_tokens=prefilled,
                generated_tokens=generated,
                running=sum(e.num_running for e in engines),
                server_waiting=sum(e.num_waiting for e in engines),
                running_least=min((e.num_running for e in engines), default=0),
                waiting_least=min((e.num_waiting for e in engines), default=0),
                kv_cache_utilization=sum(e.kv_usage for e in engines) / max(1, len(engines)),
                server_ttfts=tuple(ttfts),
            )
        return out

    def _decide(self, *, activation: bool, concurrency: float | None = None) -> None:
        if concurrency is None:
            concurrency = float(self.outstanding)
        desired = self.autoscaler.tick(self._view(concurrency), activation=activation)
        if isinstance(desired, Mapping):
            if any(n < 0 for n in desired.values()) or set(desired) - set(self.shape_names):
                raise ValueError(
                    f"{self.autoscaler.name} asked for {dict(desired)}; the shapes are "
                    f"{', '.join(self.shape_names)}, each at 0 or more"
                )
            self.fleet.shape_targets = dict(desired)
            self.fleet.target = sum(desired.values())
        elif desired is not None and desired != self.fleet.target:
            if desired < 0:
                raise ValueError(f"{self.autoscaler.name} asked for {desired} replicas")
            self.fleet.target = desired
        self.fleet.reconcile()

    def _tick(self) -> None:
        concurrency = self.integral  # over the last second (ticks are 1 s apart)
        # Steps that ended by now inside a jump count as the step engine's would.
        for replica in self.fleet.replicas:
            if replica.engine.in_step:
                self._emitted(replica.engine.settle(self.now), replica.shape)
        self._expire_held()
        while self.spot_times and self.spot_times[0] <= self.now:
            self.spot_times.popleft()
            self.fleet.notice_oldest_spot()
        self._decide(activation=False, concurrency=concurrency)
        self.timeline.append(
            Second(
                at_s=self.now,
                arrivals=self.arrivals_in_second,
                concurrency=concurrency,
                ready=self.fleet.ready_count,
                spec=self.fleet.target,
            )
        )
        ticks, arrivals = self.unreported
        self.unreported = (ticks + 1, arrivals + self.arrivals_in_second)
        if ticks + 1 >= _PROGRESS_EVERY:
            progress.advance(*self.unreported)
            self.unreported = (0, 0)
        self.integral = 0.0
        self.busy_in_second = self.outstanding > 0
        self._new_second()
