"""One target's live state with one owner: its spec, its gate, its sleeping endpoints, its share.

A :class:`Target` is what the registry keeps per target and what the proxy
serves a request through. It owns four things that change for different
reasons, and is the only writer of each:

- its **spec** (:class:`~activator.targets.TargetSpec`), from the source's
  latest snapshot. A new spec makes a new ``Target``, replaced whole in the
  registry (:meth:`Target.with_spec`); a request already on its way keeps
  the one it started with, so it reads one spec from start to end;
- its **gate** (:class:`~activator.holding.gate.Gate`): held requests,
  in-flight counts and endpoint trackers. It passes to the replacement, so
  what is held and in flight survives a re-list; the gate gets only what
  its hot path reads (the buffer bound and the per-replica limit), never a
  copy of the spec;
- its **sleeping endpoints**, the leading scaler's last word for it (the
  warm tier's); never ready, so a request for a model whose replicas all
  sleep is held and its activation wakes one;
- its **activator count**, the scaler's count of reporting activators: this
  activator enforces ``max(1, cc // activators)`` of ``container-concurrency``
  per replica, so several activators together stay within the bound as long
  as there are no more of them than ``cc`` (Knative's revision throttler
  shares its breaker's capacity the same way);
- how a request's **replica is chosen** among the ready ones: by load, or,
  with ``routing.tidal.dev/balancing: prefix``, where its prompt's prefix
  is likely cached (its :class:`~activator.holding.prefix_balancing.PrefixBalancer`,
  whose record passes to the replacement); and its **token tally**, the
  estimated tokens of the period's arrivals (only with a TTFT objective:
  :class:`~activator.holding.token_tally.TokenTally`);
- its **LoRA adapters** on its replicas
  (:class:`~activator.holding.adapters.AdapterSlots`), only when its spec
  declares some: None otherwise, so a target without adapters pays nothing.
  Like the gate it passes to the replacement, reconfigured: what the new
  spec no longer declares is answered at once, held or loading.

A request that must wait takes its endpoint with :meth:`Target.take`: held
in the gate until one is handed over, then, for a LoRA adapter, until the
adapter is loaded there (a refused load chooses again); it gives it back with
:meth:`Target.give_back`. The caller never sees the gate's queue or the
adapter slots.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Callable
from dataclasses import dataclass

from activator.balancing.prefix_key import PromptBlocks
from activator.clock import Clock, loop_time
from activator.holding.adapters import AdapterIO, AdapterPicker, AdapterSlots, LoadRefused
from activator.holding.gate import Gate
from activator.holding.held_bodies import HeldBodies, HeldBodiesFull
from activator.holding.hold_errors import (
    AdapterLoadFailed,
    AdapterWithdrawn,
    ColdStartTimeout,
    GateClosed,
    HoldError,
)
from activator.holding.prefix_balancing import PrefixBalancer
from activator.holding.request_class import HoldClass
from activator.holding.token_tally import TokenTally
from activator.replicas.readiness import EndpointTracker
from activator.targets import TargetSpec

__all__ = ["HoldTicket", "Target", "replica_limit"]


def replica_limit(container_concurrency: int, activators: int) -> int:
    """This activator's share of a replica's ``container-concurrency`` (0: no bound)."""
    if container_concurrency == 0:
        return 0
    return max(1, container_concurrency // max(1, activators))


@dataclass(slots=True)
class HoldTicket:
    """One request's wait for an endpoint, across its holds (:meth:`Target.take`).

    ``classify`` gives its place in the hold order, asked once, when it first
    waits (a request that never waits reads no header); ``deadline`` is on
    the loop's clock, from its first wait: later holds (after a refused
    connection or load) share it. ``on_wait`` is told each hold's class
    label and seconds held.
    """

    classify: Callable[[], HoldClass]
    adapter: str | None = None
    prompt: PromptBlocks | None = None
    held_bytes: int = 0
    held_bodies: HeldBodies | None = None
    on_wait: Callable[[str, float], None] | None = None
    place: HoldClass | None = None
    deadline: float = 0.0
    load_refusals: int = 0

    def start(self, now: float, timeout_s: float) -> float:
        """The deadline, set at the first wait (``now`` plus ``timeout_s``)."""
        if not self.deadline:
            self.deadline = now + timeout_s
        return self.deadline


class Target:
    """A target's spec, gate, sleeping endpoints and activator count (module docstring)."""

    __slots__ = ("activators", "adapters", "gate", "name", "prefix", "sleeping", "spec", "tokens")

    def __init__(
        self,
        spec: TargetSpec,
        gate: Gate,
        *,
        sleeping: frozenset[str] = frozenset(),
        activators: int = 1,
        adapters: AdapterSlots | None = None,
        prefix: PrefixBalancer | None = None,
        tokens: TokenTally | None = None,
    ) -> None:
        self.name = spec.name
        self.adapters = adapters
        self.spec = spec
        self.gate = gate
        self.sleeping = sleeping
        self.activators = max(1, activators)
        # None: least in flight; else the routing annotation asked for prefix balancing.
        self.prefix = (prefix or PrefixBalancer()) if spec.balancing == "prefix" else None
        if self.prefix is not None:
            self.prefix.share(self.activators)
        self.tokens = tokens or TokenTally()
        self.tokens.on = spec.counts_tokens
        gate.configure(
            max_buffered=spec.max_buffered,
            limit=replica_limit(spec.container_concurrency, self.activators),
        )
        gate.endpoints.set_sleeping(sleeping)
        gate.endpoints.update(spec.endpoints, sleeping)

    @classmethod
    def new(
        cls,
        spec: TargetSpec,
        *,
        sleeping: frozenset[str] = frozenset(),
        activators: int = 1,
        rng: random.Random | None = None,
        clock: Clock = loop_time,
        wake: Callable[[str], None] | None = None,
        adapter_io: AdapterIO | None = None,
    ) -> Target:
        """A target seen for the first time, with a new gate (and adapter slots, when it
        declares adapters and the activator can reach replicas: ``adapter_io``)."""
        gate = Gate(spec.name, max_buffered=spec.max_buffered, rng=rng, clock=clock, wake=wake)
        slots = _slots(spec, gate, adapter_io, clock)
        return cls(spec, gate, sleeping=sleeping, activators=activators, adapters=slots)

    def with_spec(
        self, spec: TargetSpec, adapter_io: AdapterIO | None = None, clock: Clock = loop_time
    ) -> Target:
        """This target under a new spec: a new owner, the same gate and adapter slots.

        What the new spec no longer declares is settled at once: requests held
        or loading for a withdrawn adapter are answered, and the queue is looked
        at again under the new limits."""
        slots = self.adapters
        if slots is not None:
            slots.configure(spec.adapters, spec.adapter_keep_alive_s)
            if not spec.adapters:
                slots.close()
                slots = None
        else:
            slots = _slots(spec, self.gate, adapter_io, clock)
        target = Target(
            spec,
            self.gate,
            sleeping=self.sleeping,
            activators=self.activators,
            adapters=slots,
            prefix=self.prefix,
            tokens=self.tokens,
        )
        self.gate.settle()
        return target

    def set_sleeping(self, keys: frozenset[str]) -> None:
        """The endpoints (``ip:port``) the warm tier has asleep; the others are awake."""
        if keys != self.sleeping:
            self.sleeping = keys
            self.gate.endpoints.set_sleeping(keys)

    def set_activators(self, count: int) -> None:
        """The scaler's count of reporting activators; this one takes its share of cc."""
        count = max(1, count)
        if count != self.activators:
            self.activators = count
            self.gate.configure(
                max_buffered=self.spec.max_buffered,
                limit=replica_limit(self.spec.container_concurrency, count),
            )
            if self.prefix is not None:
                self.prefix.share(count)

    def close(self, reason: type[HoldError] = GateClosed) -> None:
        """The target is gone (or the activator stops): fail what is held, stop loads."""
        self.gate.close(reason)
        if self.adapters is not None:
            self.adapters.close()

    # -- a request's endpoint -------------------------------------------------------

    def arrive(self, document: object = None) -> None:
        """A request for this target arrived (counted once, however often it waits);
        ``document``: its parsed body, when it was routed by ``model``."""
        self.gate.arrive()
        if self.tokens.on and document is not None:
            self.tokens.add(document)

    def prompt_of(self, document: object) -> PromptBlocks | None:
        """What :meth:`try_take` balances a request by, from its parsed JSON body
        (None: by load)."""
        return self.prefix.prompt_of(document) if self.prefix is not None else None

    def try_take(self, prompt: PromptBlocks | None = None) -> EndpointTracker | None:
        """An endpoint now, counted in flight, or None (never waits): by the prompt's
        prefix where the target balances so, else by load. Held requests go first."""
        prefix = self.prefix
        if prefix is None:
            return self.gate.try_acquire()
        return self.gate.try_acquire(functools.partial(prefix.pick, prompt))

    async def take(self, ticket: HoldTicket) -> EndpointTracker:
        """An endpoint for the request ``ticket`` stands for, counted in flight: at once
        when one has room, else held until one is handed over; for a LoRA adapter,
        once the adapter is loaded there. Raises a :class:`HoldError` (or cancels)."""
        gate, adapter = self.gate, ticket.adapter
        slots = self.adapters if adapter is not None else None
        if adapter is not None and slots is None:
            raise AdapterWithdrawn(f"{adapter!r} is no longer declared for {self.name}")
        picker = slots.picker(adapter) if slots is not None and adapter is not None else None
        while True:
            if picker is None:
                tracker = self.try_take(ticket.prompt)
            else:
                tracker = gate.try_acquire(picker.pick)
            if tracker is None:
                tracker = await self._hold(ticket, picker)
            if slots is None or adapter is None:
                return tracker
            try:
                await slots.ready(adapter, tracker)  # loads it there, held meanwhile
            except LoadRefused:
                ticket.load_refusals += 1
                self.give_back(tracker, adapter)
                ticket.start(asyncio.get_running_loop().time(), self.spec.cold_start_timeout_s)
                continue
            except BaseException:
                self.give_back(tracker, adapter)
                raise
            return tracker

    async def _hold(self, ticket: HoldTicket, picker: AdapterPicker | None) -> EndpointTracker:
        """One hold in the gate, bounded by the ticket's deadline and the held-body cap."""
        gate, spec = self.gate, self.spec
        now = asyncio.get_running_loop().time()
        deadline = ticket.start(now, spec.cold_start_timeout_s)
        place = ticket.place
        if place is None:
            place = ticket.place = ticket.classify()
        # Before the body is counted as held: a full buffer (or a sheddable request at
        # zero) is the answer.
        gate.admit(place, shed_at_zero=spec.shed_at_zero)
        bodies = ticket.held_bodies
        if bodies is not None and not bodies.take(ticket.held_bytes):
            raise HeldBodiesFull()
        try:
            tracker = await gate.acquire(
                max(0.0, deadline - now),
                place,
                shed_at_zero=spec.shed_at_zero,
                picker=picker,
            )
        except ColdStartTimeout:
            if ticket.load_refusals:
                raise AdapterLoadFailed(
                    f"{ticket.load_refusals} load(s) of {ticket.adapter!r} refused"
                ) from None
            raise
        finally:
            if bodies is not None:
                bodies.give_back(ticket.held_bytes)
        if ticket.on_wait is not None:
            ticket.on_wait(place.label, asyncio.get_running_loop().time() - now)
        return tracker

    def give_back(self, tracker: EndpointTracker, adapter: str | None = None) -> None:
        """The endpoint :meth:`take` (or the gate's fast path) gave, back to the gate."""
        if adapter is not None and self.adapters is not None:
            self.adapters.done(adapter, tracker)
        self.gate.release(tracker)


def _slots(spec: TargetSpec, gate: Gate, io: AdapterIO | None, clock: Clock) -> AdapterSlots | None:
    """Adapter slots for a spec that declares adapters (and an activator that can reach
    replicas); a change in them makes the gate look at its held requests again."""
    if not spec.adapters or io is None:
        return None
    return AdapterSlots(
        spec.adapters,
        spec.adapter_keep_alive_s,
        io,
        clock=clock,
        target=spec.name,
        on_change=gate.settle,
    )
