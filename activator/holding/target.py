"""One target's live state with one owner, the Target: others call its verbs.

A :class:`Target` lives as long as its source lists it: one object per
target, never replaced, and the only writer of what it holds:

- its **spec** (:class:`~activator.targets.TargetSpec`), the source's latest,
  swapped whole by :meth:`Target.configure`; a request reads the spec it
  started with from start to end (the forwarding keeps it);
- its **endpoints** and their readiness
  (:class:`~activator.replicas.readiness.TargetEndpoints`): the source's list
  (:meth:`Target.set_endpoints`), probes (:meth:`Target.probed`), a refused
  connection (:meth:`Target.give_back` with ``down``). Endpoints are not part
  of the spec: a replica turning ready changes the endpoints, nothing else;
- its **gate** (:class:`~activator.holding.gate.Gate`): the held requests in
  their order, and the counts (in flight, held, shed, the period's level);
- how a replica is **chosen**: by load, or where the prompt's prefix is
  likely cached (:class:`~activator.holding.prefix_balancing.PrefixBalancer`),
  and for a model on several GPU shapes by each replica's capacity and the
  prompt's length (:class:`~activator.holding.shape_balancing.ShapeBalancer`,
  from the scaler's word),
  and the **token tally** of the period's arrivals (only with a TTFT
  objective: :class:`~activator.holding.token_tally.TokenTally`);
- its **LoRA adapters** on its replicas
  (:class:`~activator.holding.adapters.AdapterSlots`), only while its spec
  declares some: a target without adapters pays nothing.

The scaler's word (the activator count, the sleeping endpoints, the shapes) is not
copied here: it is the registry's one :class:`~activator.holding.scaler_word.ScalerWord`,
which the target reads when it works out its limits and its ready replicas,
and :meth:`Target.configure` is called when it changes.

Who calls what (docs/architecture.md, "Inside the activator"): the request
path (:mod:`activator.forwarding`) calls :meth:`~Target.arrive`,
:meth:`~Target.try_take`, :meth:`~Target.take` and :meth:`~Target.give_back`;
everything else (the sources, the scaler link, the prober, the adapter keeper)
reaches a target through the registry (:mod:`activator.routing.registry`),
which calls :meth:`~Target.configure`, :meth:`~Target.set_endpoints`,
:meth:`~Target.probed`, :meth:`~Target.refresh_adapters`,
:meth:`~Target.take_period`, :meth:`~Target.refuse` and :meth:`~Target.close`.

Whatever may change what a held request can get (readiness, the adapters
loaded, the declaration, the limits) comes to one place, :meth:`_changed`:
the gate answers what can never be served, hands out what can go, and
whoever waits for a ready replica (:meth:`Target.wait_ready`) is woken.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from activator.balancing.prefix_key import PromptBlocks, estimated_tokens
from activator.clock import Clock, loop_time
from activator.holding.adapters import AdapterIO, AdapterPicker, AdapterSlots, LoadRefused
from activator.holding.gate import Choose, Gate
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
from activator.holding.scaler_word import ScalerWord
from activator.holding.shape_balancing import ShapeBalancer
from activator.holding.token_tally import TokenTally
from activator.replicas.readiness import EndpointTracker, TargetEndpoints
from activator.targets import Endpoint, TargetSpec

__all__ = ["HoldTicket", "Period", "Target"]


@dataclass(slots=True)
class HoldTicket:
    """One request's wait for an endpoint, across its holds (:meth:`Target.take`).

    ``spec`` is the one the request started with; ``classify`` gives its
    place in the hold order, asked once, when it first waits (a request that
    never waits reads no header); ``deadline`` is on the loop's clock, from
    its first wait: later holds (after a refused connection or load) share
    it. ``on_wait`` is told each hold's class label and seconds held.
    ``slots``: the adapter slots its replica was reserved in, given back there.
    """

    spec: TargetSpec
    classify: Callable[[], HoldClass]
    adapter: str | None = None
    prompt: PromptBlocks | None = None
    tokens: int = 0  # the prompt's estimated tokens (0: not known), for shapes
    held_bytes: int = 0
    held_bodies: HeldBodies | None = None
    on_wait: Callable[[str, float], None] | None = None
    place: HoldClass | None = None
    deadline: float = 0.0
    load_refusals: int = 0
    slots: AdapterSlots | None = None

    def start(self, now: float) -> float:
        """The deadline, set at the first wait: ``now`` plus the cold-start timeout."""
        if not self.deadline:
            self.deadline = now + self.spec.cold_start_timeout_s
        return self.deadline


@dataclass(frozen=True, slots=True)
class Period:
    """What a target saw since the last report (:meth:`Target.take_period`)."""

    area: float  # level-seconds of in_flight + held
    arrivals: int
    in_flight: int
    buffered: int
    pods: dict[str, int]
    held_by_class: dict[str, int]
    shed: int
    # (estimated prompt tokens, max_tokens, arrivals over each prompt size bound),
    # only for a target with a TTFT objective.
    tokens: tuple[int, int, list[int]] | None = None
    adapter_refusals: list[str] = field(default_factory=list)


class Target:
    """A target's spec, endpoints, gate, balancing and adapters (module docstring)."""

    __slots__ = (
        "_io",
        "_ready_waiters",
        "adapters",
        "clock",
        "endpoints",
        "gate",
        "name",
        "prefix",
        "shapes",
        "spec",
        "tokens",
        "word",
    )

    def __init__(
        self,
        spec: TargetSpec,
        *,
        word: ScalerWord | None = None,
        rng: random.Random | None = None,
        clock: Clock = loop_time,
        wake: Callable[[str], None] | None = None,
        adapter_io: AdapterIO | None = None,
    ) -> None:
        self.name = spec.name
        self.spec = spec
        self.word = word if word is not None else ScalerWord()
        self.clock = clock
        self._io = adapter_io
        self._ready_waiters: list[asyncio.Future[None]] = []
        self.endpoints = TargetEndpoints(
            spec.name,
            on_change=self._changed,
            asleep=functools.partial(self.word.asleep, spec.name),
        )
        self.gate = Gate(
            spec.name,
            max_buffered=spec.max_buffered,
            endpoints=self.endpoints,
            rng=rng,
            clock=clock,
            wake=wake,
        )
        self.tokens = TokenTally()
        self.prefix: PrefixBalancer | None = None
        self.shapes: ShapeBalancer | None = None
        self.adapters: AdapterSlots | None = None
        self.configure(spec)

    # -- kept up to date (through the registry) -------------------------------------

    def configure(self, spec: TargetSpec | None = None) -> None:
        """A new spec (or, with none, the scaler's word changed): limits, balancing and
        adapters from it; what it no longer declares is answered at once, and held
        requests are looked at again."""
        spec = spec if spec is not None else self.spec
        self.spec = spec
        word = self.word
        self.gate.configure(
            max_buffered=spec.max_buffered, limit=word.share(spec.container_concurrency)
        )
        if spec.balancing == "prefix":
            self.prefix = self.prefix or PrefixBalancer()
            self.prefix.share(word.activators)
        else:
            self.prefix = None
        routes = word.shapes(self.name)
        self.shapes = ShapeBalancer(routes) if routes else None
        self.tokens.on = spec.counts_tokens
        slots = self.adapters
        if slots is not None:
            slots.configure(spec.adapters, spec.adapter_keep_alive_s)
            if not spec.adapters:
                slots.close()
                self.adapters = None
        elif spec.adapters and self._io is not None:
            self.adapters = AdapterSlots(
                spec.adapters,
                spec.adapter_keep_alive_s,
                self._io,
                clock=self.clock,
                target=self.name,
                on_change=self._changed,
            )
        self.endpoints.recompute()  # which sleep may have changed
        self._changed()

    def set_endpoints(self, endpoints: Iterable[Endpoint]) -> None:
        """The source's latest list of this target's endpoints."""
        self.endpoints.update(endpoints)

    def probed(self, key: str, ok: bool) -> None:
        """A direct probe of the endpoint ``key`` connected (``ok``) or not."""
        self.endpoints.set_probe_result(key, ok)

    async def refresh_adapters(self) -> list[tuple[str, str]]:
        """Learn what each ready replica has loaded and unload the idle; the (replica,
        adapter) pairs unloaded (none without adapters)."""
        slots = self.adapters
        if slots is None:
            return []
        return await slots.refresh(self.endpoints.ready, self.endpoints.trackers.keys())

    def take_period(self) -> Period:
        """What this target saw since the last call, for the report; resets the period."""
        gate = self.gate
        area, arrivals = gate.take_period()
        return Period(
            area=area,
            arrivals=arrivals,
            in_flight=gate.in_flight,
            buffered=gate.buffered,
            pods=gate.pods(),
            held_by_class=dict(gate.held_by_class),
            shed=gate.sheds.take(),
            tokens=self.tokens.take() if self.tokens.on else None,
            adapter_refusals=self.adapters.take_refusals() if self.adapters is not None else [],
        )

    def refuse(self, exc: HoldError) -> int:
        """Tidal will not wake this target (for now): the held requests get ``exc``; how
        many. A later request is held and asks again."""
        return self.gate.refuse(exc)

    def close(self, reason: type[HoldError] = GateClosed) -> None:
        """The target is gone (or the activator stops): fail what is held and every later
        request with ``reason``, stop adapter loads, wake whoever waits for it."""
        self.gate.close(reason)
        if self.adapters is not None:
            self.adapters.close()
        self._wake_waiters()

    # -- what others ask ------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """A replica is ready."""
        return bool(self.endpoints.ready)

    @property
    def closed(self) -> bool:
        return self.gate.closed

    async def wait_ready(self, timeout_s: float) -> bool:
        """Whether a replica is ready, waiting up to ``timeout_s`` for one (or the target's
        end); False when the time passed first."""
        if self.endpoints.ready or self.gate.closed:
            return bool(self.endpoints.ready)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._ready_waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                await waiter
        except TimeoutError:
            pass
        finally:
            if waiter in self._ready_waiters:
                self._ready_waiters.remove(waiter)
        return bool(self.endpoints.ready)

    def _changed(self) -> None:
        """What held requests may get changed: the gate looks again; a ready replica wakes
        whoever waits for one."""
        self.gate.settle()
        if self.endpoints.ready:
            self._wake_waiters()

    def _wake_waiters(self) -> None:
        waiters, self._ready_waiters = self._ready_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- a request's endpoint (the forwarding) --------------------------------------

    def arrive(self, document: object = None) -> tuple[PromptBlocks | None, str | None, int]:
        """A request arrived (counted once, however often it waits); ``document``: its
        parsed body, when it was routed by ``model``. Returns what it is balanced by
        (its prompt's blocks, None: by load), the LoRA adapter it names, if any, and
        its prompt's estimated tokens where the model is on several GPU shapes (0:
        not known)."""
        self.gate.arrive()
        if document is None:
            return None, None, 0
        # One estimate of the prompt (a walk of its text) serves both the tally and
        # the shapes, whichever are on.
        tokens = 0
        if self.tokens.on or self.shapes is not None:
            tokens, output = estimated_tokens(document)
            if self.tokens.on:
                self.tokens.add(tokens, output)
        adapter = None
        if self.adapters is not None and isinstance(document, dict):
            model = document.get("model")
            adapter = model if isinstance(model, str) and model in self.adapters.declared else None
        prompt = self.prefix.prompt_of(document) if self.prefix is not None else None
        return prompt, adapter, tokens if self.shapes is not None else 0

    def _choose(self, prompt: PromptBlocks | None, tokens: int) -> Choose | None:
        """How this request's replica is chosen (None: by load)."""
        prefix = self.prefix
        by_prefix = functools.partial(prefix.pick, prompt) if prefix is not None else None
        shapes = self.shapes
        if shapes is None:
            return by_prefix
        return shapes.choose(tokens, by_prefix)

    def try_take(
        self, prompt: PromptBlocks | None = None, tokens: int = 0
    ) -> EndpointTracker | None:
        """An endpoint now, counted in flight, or None (never waits): by the prompt's
        prefix where the target balances so, by shape where it has shapes, else by
        load. Held requests go first."""
        choose = self._choose(prompt, tokens)
        return self.gate.try_acquire() if choose is None else self.gate.try_acquire(choose)

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
                tracker = self.try_take(ticket.prompt, ticket.tokens)
            else:
                tracker = gate.try_acquire(picker.pick)
            if tracker is None:
                tracker = await self._hold(ticket, picker)
            if slots is None or adapter is None:
                return tracker
            ticket.slots = slots
            try:
                await slots.ready(adapter, tracker)  # loads it there, held meanwhile
            except LoadRefused:
                ticket.load_refusals += 1
                self.give_back(tracker, ticket)
                ticket.start(asyncio.get_running_loop().time())
                continue
            except BaseException:
                self.give_back(tracker, ticket)
                raise
            return tracker

    async def _hold(self, ticket: HoldTicket, picker: AdapterPicker | None) -> EndpointTracker:
        """One hold in the gate, bounded by the ticket's deadline and the held-body cap."""
        gate, spec = self.gate, ticket.spec
        now = asyncio.get_running_loop().time()
        deadline = ticket.start(now)
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
            # Held, a request of a shaped model still goes where its prompt fits.
            shapes = self.shapes
            tracker = await gate.acquire(
                max(0.0, deadline - now),
                place,
                shed_at_zero=spec.shed_at_zero,
                picker=picker,
                choose=shapes.choose(ticket.tokens) if shapes is not None else None,
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

    def give_back(
        self, tracker: EndpointTracker, ticket: HoldTicket | None = None, *, down: bool = False
    ) -> None:
        """The endpoint :meth:`take` or :meth:`try_take` gave, back (with its adapter's
        reservation); ``down``: a connection to it was refused, so it leaves rotation
        until a probe reaches it (before the release, which may hand it on)."""
        if down:
            self.endpoints.mark_down(tracker)
        if ticket is not None and ticket.slots is not None and ticket.adapter is not None:
            ticket.slots.done(ticket.adapter, tracker)
        self.gate.release(tracker)
