"""A model's replicas in a world: created, started, ready, removed, interrupted, and their engines.

The control loop (:mod:`simulator.world.control`) sets the fleet's target;
:meth:`Fleet.reconcile` brings each capacity pool to what the product's
placement (``scaler.policy.split``) asks for it, seeing which spot replicas
are ready (not starting, not under an interruption notice). Each replica
runs the continuous-batching engine model the sandbox's fake vLLM serves
from, stepped from one batch change to the next
(:class:`~simulator.engine.jump.JumpEngine`; ``WorldConfig.stepper``
``"step"`` walks every step, the reference).

Main decision: **a scale-down removes replicas still starting first (newest
first), then the ready ones with the fewest requests in flight** (Tidal's
pod-deletion cost); a removed ready replica takes no new request and lets
those in flight finish (Kubernetes' graceful termination), and its GPU is
counted until it is empty. A spot replica's notice takes it out of service
at once and the placement covers it; at the notice's end its node is gone
with what still ran on it.

**GPU shapes** (``WorldConfig.shapes``, docs/shapes.md): each shape has its
engine and a supply (the most replicas of it the cluster holds at once);
more stay Pending, with no node and no GPU-seconds, until one of it ends,
and each shape's pool is brought to its own part of the target.

A replica refuses a prompt at or over the model's context length
(``LlmParams.max_model_len``) as vLLM does, with a 400 (:meth:`Replica.take`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from scaler.policy import split
from simulator.engine import LlmParams
from simulator.engine.jump import JumpEngine, StepEngine
from simulator.traces import TraceRequest
from simulator.world.agenda import KILL, NOTICE, READY, Agenda
from simulator.world.config import ON_DEMAND, SPOT, WorldConfig
from simulator.world.result import ReplicaLife
from simulator.world.spot_market import SpotMarket

__all__ = ["Fleet", "Replica"]


@dataclass(slots=True)
class Replica:
    """One replica: its engine, the requests on it, and where it is in its life."""

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

    def take(self, i: int, r: TraceRequest, now: float) -> bool:
        """Queue request ``i`` on the engine; False when vLLM would answer 400 instead.

        The engine needs at least one token each way; a trace row with 0
        output tokens (a failed or empty completion) still costs a prefill.
        Generation stops at the context length (finish reason "length").
        """
        params = self.params
        limit = min(params.max_model_len, params.kv_cache_tokens)
        prompt = max(1, r.prompt_tokens)
        if prompt >= limit:
            return False  # the prompt leaves no room for a token
        self.in_flight += 1
        self.requests.add(i)
        self.engine.add(
            i,
            prompt_tokens=prompt,
            output_tokens=min(max(1, r.output_tokens), limit - prompt),
            now=now,
            prefix=r.prefix,
        )
        return True

    def finished(self, done: tuple[int, ...]) -> None:
        """Requests ``done`` have their last token: they leave the replica."""
        for i in done:
            self.requests.discard(i)
        self.in_flight -= len(done)

    def drop_all(self) -> list[int]:
        """Its node is gone: what still ran on it is lost; the requests it had."""
        lost = list(self.requests)
        for i in lost:
            self.engine.abort(i)
        self.requests.clear()
        self.in_flight = 0
        return lost


class Fleet:
    """A model's replicas: creating, starting, readying, removing and interrupting them.

    The world owns time and requests; the fleet keeps each capacity pool at
    what ``split`` asks for its target, schedules replica events on the
    agenda, hands held requests out through ``dispatch`` when a replica
    turns ready, reports through ``lose`` each request a killed node took
    with it and through ``emitted`` the tokens an ending replica's engine
    emitted since it was last asked.
    """

    def __init__(
        self,
        config: WorldConfig,
        *,
        agenda: Agenda,
        spot: SpotMarket,
        dispatch: Callable[[], None],
        lose: Callable[[int], None],
        emitted: Callable[[int, str], None],
    ) -> None:
        self.config = config
        self._agenda = agenda
        self._spot = spot
        self._dispatch = dispatch
        self._lose = lose
        self._emitted = emitted
        self._cold_rng = random.Random(config.seed + 1)
        self._engine = JumpEngine if config.stepper == "jump" else StepEngine
        self.replicas: list[Replica] = []  # alive (not ended)
        self._serving: list[Replica] | None = None  # the serving ones (None: to count again)
        # Nothing changed since the last reconcile at this target: the next is a no-op.
        self._clean = False
        self._reconciled = 0
        self.lives: list[ReplicaLife] = []
        self._next_rid = 0
        self.target = 0
        self.shape_targets: dict[str, int] = {}  # with shapes: each shape's part of the target
        self.cold_starts = 0
        self.preemptions = 0
        self.ready_count = 0

    def aim(self, target: int, shape_targets: dict[str, int] | None = None) -> None:
        """The replicas asked for from now on (in a world of shapes, also each shape's part)."""
        self.target = target
        if shape_targets is not None:
            self.shape_targets = shape_targets

    def _changed(self) -> None:
        """A replica came, went or changed state."""
        self._serving = None
        self._clean = False

    def serving(self) -> list[Replica]:
        """The replicas taking requests (kept until one starts, stops or changes)."""
        if self._serving is None:
            self._serving = [r for r in self.replicas if r.serving]
        return self._serving

    def create(self, capacity: str, *, warm: bool, shape: str = "") -> None:
        params = self.config.engine_of(shape)
        replica = Replica(
            rid=self._next_rid,
            capacity=capacity,
            created_s=self._agenda.now,
            engine=self._engine(params),
            params=params,
            shape=shape,
        )
        self._next_rid += 1
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
        return self._spot.zone_for(counts)

    def start(self, replica: Replica, *, warm: bool = False) -> None:
        """The replica has a node: its GPU is held from now, its cold start begins."""
        now = self._agenda.now
        replica.pending = False
        self._changed()
        replica.created_s = now
        if warm:
            replica.ready = True
            replica.ready_s = now
            self.ready_count += 1
        else:
            self._agenda.push(now + self.config.cold_start.draw(self._cold_rng), READY, 0, replica)
        if replica.capacity == SPOT:
            interrupted_in_s = self._spot.interruption_in_s()
            if interrupted_in_s is not None:
                self._agenda.push(now + interrupted_in_s, NOTICE, 0, replica)

    def market(self, zone: int) -> None:
        """``zone``'s spot capacity changed: pending spot replicas start there, or its
        spot replicas get their notice."""
        if self._spot.flip(zone):
            for replica in [r for r in self.replicas if r.pending]:
                replica.zone = zone
                self.start(replica)
        else:
            for replica in [
                r for r in self.replicas if r.capacity == SPOT and not r.pending and r.zone == zone
            ]:
                self.notice(replica)
        self._spot.schedule(zone)

    def ready(self, replica: Replica) -> None:
        if replica.ended_s is not None or replica.draining:
            return
        replica.ready = True
        replica.ready_s = self._agenda.now
        self._changed()
        if not replica.noticed:
            if self.ready_count == 0:
                self.cold_starts += 1
            self.ready_count += 1
            self._dispatch()

    def end(self, replica: Replica) -> None:
        if replica.ended_s is not None:
            return
        now = self._agenda.now
        if replica.serving:
            self.ready_count -= 1
        replica.ended_s = now
        self.replicas.remove(replica)
        self._changed()
        if replica.pending:
            return  # never had a node: no GPU time
        self._emitted(replica.engine.settle(now), replica.shape)
        self.lives.append(
            ReplicaLife(
                capacity=replica.capacity,
                created_s=replica.created_s,
                ended_s=now,
                busy_s=replica.engine.busy_time_s(now),
                cached_tokens=replica.engine.kv.cached_tokens,
                queried_tokens=replica.engine.kv.queried_tokens,
                shape=replica.shape,
                ready_s=now if replica.ready_s is None else replica.ready_s,
            )
        )
        if replica.shape:
            # Its device is free: the oldest replica of its shape waiting for one gets it.
            waiting = [r for r in self.replicas if r.shape == replica.shape and r.pending]
            if waiting:
                self.start(min(waiting, key=lambda r: r.rid))

    def remove(self, replica: Replica) -> None:
        """A scale-down picked this replica: stop sending to it; end it once empty."""
        if replica.serving:
            self.ready_count -= 1
        replica.draining = True
        self._changed()
        if replica.in_flight == 0:
            self.end(replica)

    def notice(self, replica: Replica) -> None:
        if replica.ended_s is not None or replica.noticed or replica.pending:
            return
        if replica.serving:
            self.ready_count -= 1
        replica.noticed = True
        self._changed()
        self.preemptions += 1
        self._agenda.push(self._agenda.now + self.config.spot.notice_s, KILL, 0, replica)
        self.reconcile()

    def notice_from_trace(self) -> None:
        """The preemption trace's entries due by now: each gives the oldest live spot
        replica its notice."""
        for _ in range(self._spot.trace_due()):
            spot = [r for r in self.replicas if r.capacity == SPOT and not r.noticed]
            if spot:
                self.notice(min(spot, key=lambda r: r.created_s))

    def kill(self, replica: Replica) -> None:
        if replica.ended_s is not None:
            return
        for i in replica.drop_all():
            self._lose(i)
        self.end(replica)
        self.reconcile()

    def reconcile(self, *, warm: bool = False) -> None:
        """Bring each capacity pool to what ``split`` asks for the current target (in a
        world of shapes, each shape's pool to its part).

        A reconcile that changed nothing, at the same target, with no replica
        changed since, would change nothing again: it is skipped (most ticks).
        """
        if self.config.shapes:
            self._reconcile_shapes(warm=warm)
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
            self._dispatch()

    def _reconcile_shapes(self, *, warm: bool = False) -> None:
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
            self._dispatch()
