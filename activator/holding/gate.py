"""Per-target holding: a bounded, ordered queue of waiting requests and a per-replica limit.

A :class:`Gate` stands in front of each target. A request asks it for an
endpoint:

- the fast path (:meth:`Gate.try_acquire`) is a plain function call with no
  awaiting: when nobody is waiting and a ready endpoint has a free slot, the
  request takes it at once;
- otherwise the request is *held* (:meth:`Gate.acquire`): it gets a future in
  the :class:`~groundwork.fair_hold_queue.FairHoldQueue`, which the policy
  simulator holds with too, placed by its class, tenant and cost
  (:class:`~activator.holding.request_class.HoldClass`). Whenever capacity
  appears (an endpoint turns ready, a request finishes) the gate hands
  endpoints to the requests whose turn it is (class first, then tenants in
  turns weighted by tokens; arrival order when no request names a class or
  a tenant), already counted in flight, so a burst of 2,000 held requests is
  released in order without waking all of them for every slot;
- at ``max_buffered`` waiting requests a newcomer sheds a held request of a
  lower class, or of a tenant holding more than its share, which fails with
  :class:`Shed` (:meth:`Gate.admit`); when none may go the newcomer fails
  at once with :class:`BufferFull` (Knative's breaker does the same with its
  queue depth);
- past its cold-start deadline it fails with :class:`ColdStartTimeout`;
- a cancelled caller (the client went away) leaves the queue: its future is
  cancelled and skipped, and an endpoint handed to it in the same instant is
  given back.

``limit`` is this activator's per-replica bound: its share of the target's
``container-concurrency``, which the target works out
(:class:`~activator.holding.target.Target`); the gate keeps no spec of its own.

The gate also keeps what ``/v1/stats`` reports: arrivals (:meth:`Gate.arrive`),
and the time integral of ``in_flight + buffered`` from which the period's
mean concurrency comes. Both are updated where the counts change, with one
read of the loop's clock (:mod:`activator.clock`). For a target sized in
tokens (``tokens.on``: it has a TTFT objective) a request routed by its
body's ``model`` also adds its estimated prompt tokens and its ``max_tokens``
(:func:`~activator.balancing.prefix_key.estimated_tokens`, from the document already
parsed to route it); other targets pay nothing for it.

Its public surface is small: :meth:`~Gate.arrive`, :meth:`~Gate.try_acquire`,
:meth:`~Gate.acquire`, :meth:`~Gate.release` and :meth:`~Gate.mark_down` on
the request path; :meth:`~Gate.configure` for its target, :meth:`~Gate.close` for the
registry; :meth:`~Gate.refuse` for the reporter (Tidal
will not wake the target); :meth:`~Gate.dispatch` for the adapter keeper;
:meth:`~Gate.take_period` and :meth:`~Gate.pods` for reports. The gate owns its target's
:class:`~activator.replicas.readiness.TargetEndpoints` and is told of readiness
changes through the callback it hands them at construction. When it holds a
request while no endpoint is ready it calls ``wake(name)``, a plain
synchronous callback (in the activator it puts the target on the reporter's
:class:`~activator.scaler_link.wake_queue.WakeQueue`): the gate itself never
does I/O and knows nothing of the scaler.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from activator.balancing.least_loaded import pick
from activator.balancing.prefix_key import PromptBlocks
from activator.clock import Clock, loop_time
from activator.holding.adapters import AdapterPicker
from activator.holding.prefix_balancing import PrefixBalancer
from activator.holding.request_class import ANONYMOUS, HoldClass
from activator.holding.token_tally import TokenTally
from activator.replicas.readiness import EndpointTracker, TargetEndpoints
from groundwork.fair_hold_queue import FairHoldQueue

__all__ = [
    "BufferFull",
    "ColdStartTimeout",
    "DrainEnded",
    "Gate",
    "GateClosed",
    "HoldError",
    "Shed",
]


class HoldError(Exception):
    """A request could not get an endpoint."""


class BufferFull(HoldError):
    """``max_buffered`` requests already wait for this target."""


class Shed(HoldError):
    """Displaced by a higher class or a lighter tenant at ``max_buffered``, or a
    sheddable request refused while no replica is ready."""


class ColdStartTimeout(HoldError):
    """No endpoint became free within the cold-start timeout."""


class GateClosed(HoldError):
    """The target went away while the request waited."""


class DrainEnded(HoldError):
    """The activator's drain timeout ended while the request waited."""


def _waiting(fut: asyncio.Future[EndpointTracker]) -> bool:
    return not fut.done()


def _expire(fut: asyncio.Future[EndpointTracker], name: str) -> None:
    if not fut.done():
        fut.set_exception(ColdStartTimeout(name))


class Gate:
    """Holding and concurrency accounting for one target."""

    def __init__(
        self,
        name: str,
        *,
        max_buffered: int,
        limit: int = 0,
        rng: random.Random | None = None,
        clock: Clock = loop_time,
        wake: Callable[[str], None] | None = None,
    ) -> None:
        self.name = name
        self._rng = rng or random.Random()
        self._clock = clock
        self._wake = wake
        # Held requests' futures; one that is done (its caller went away, its time ran
        # out) has left and is skipped.
        self._waiters: FairHoldQueue[asyncio.Future[EndpointTracker]] = FairHoldQueue(_waiting)
        # Held LoRA adapter requests' pickers (empty for a target without adapters).
        self._pickers: dict[asyncio.Future[EndpointTracker], AdapterPicker] = {}
        self.endpoints = TargetEndpoints(name, on_change=self.dispatch)
        self.buffered = 0
        # Held requests by class label; those shed, in all and since the last report.
        self.held_by_class = dict.fromkeys(("critical", "standard", "sheddable"), 0)
        self.shed_by_class = dict.fromkeys(("critical", "standard", "sheddable"), 0)
        self._shed_in_period = 0
        # Shed, their callers not yet woken: still in ``buffered``, no longer held.
        self._shedding = 0
        self.in_flight = 0
        self.arrivals = 0
        # Estimated prompt tokens and max_tokens of the period's arrivals (only
        # with a TTFT objective; see the module docstring).
        self.tokens = TokenTally()
        self.closed = False
        self._closed_reason: type[HoldError] = GateClosed
        # Time integral of in_flight + buffered since the last report. The
        # first reading may come from any instant: the level is zero until a
        # count changes, and every change reads the clock first.
        self.area = 0.0
        self._last_t = 0.0
        self.max_buffered = self.limit = 0
        # None: least in flight; else the routing annotation asked for prefix balancing.
        self.prefix: PrefixBalancer | None = None
        self.configure(max_buffered=max_buffered, limit=limit)

    def configure(self, *, max_buffered: int, limit: int) -> None:
        """How many requests may wait, and how many each replica takes from this
        activator (0: no bound); its target (:mod:`activator.holding.target`) derives
        both from the spec and the activator count."""
        if max_buffered < 0 or limit < 0:
            raise ValueError(f"max_buffered and limit must be >= 0, got {max_buffered}, {limit}")
        self.max_buffered = max_buffered
        old, self.limit = self.limit, limit
        if limit != old:
            self.dispatch()

    def set_balancing(self, mode: str, activators: int = 1) -> None:
        """``least-loaded`` or ``prefix`` (``routing.tidal.dev/balancing``); with prefix,
        each replica's cache is shared by ``activators`` (the scaler's count)."""
        self.prefix = (self.prefix or PrefixBalancer()) if mode == "prefix" else None
        if self.prefix is not None:
            self.prefix.share(activators)

    def prompt_of(self, document: object) -> PromptBlocks | None:
        """What :meth:`try_acquire` balances a request by, from its parsed JSON body
        (None: by load)."""
        return self.prefix.prompt_of(document) if self.prefix is not None else None

    # -- accounting ---------------------------------------------------------

    def _touch(self) -> None:
        now = self._clock()
        self.area += (self.in_flight + self.buffered) * (now - self._last_t)
        self._last_t = now

    def take_period(self) -> tuple[float, int]:
        """(level-seconds, arrivals) since the last call; resets both."""
        self._touch()
        area, arrivals = self.area, self.arrivals
        self.area, self.arrivals = 0.0, 0
        return area, arrivals

    # -- the request path ---------------------------------------------------

    def arrive(self, document: object = None) -> None:
        """A request for this target arrived (counted once, however often it waits);
        ``document``: its parsed body, when it was routed by ``model``."""
        self.arrivals += 1
        if self.tokens.on and document is not None:
            self.tokens.add(document)

    def try_acquire(
        self, prompt: PromptBlocks | None = None, picker: AdapterPicker | None = None
    ) -> EndpointTracker | None:
        """An endpoint now, or None; never waits. Queued requests go first.

        ``picker``: a LoRA adapter's request picks its replica by what is loaded.
        """
        if self._waiters or self.closed:
            return None
        if picker is not None:
            return self._took(picker.pick(self.endpoints.ready, self.limit, self._rng))
        if self.prefix is not None:
            tracker = self.prefix.pick(prompt, self.endpoints.ready, self.limit, self._rng)
        else:
            tracker = pick(self.endpoints.ready, self.limit, self._rng)
        return self._took(tracker)

    def _took(self, tracker: EndpointTracker | None) -> EndpointTracker | None:
        if tracker is not None:
            # _touch, written out: this and release run for every request.
            now = self._clock()
            self.area += (self.in_flight + self.buffered) * (now - self._last_t)
            self._last_t = now
            tracker.in_flight += 1
            self.in_flight += 1
        return tracker

    def admit(self, place: HoldClass = ANONYMOUS, *, shed_at_zero: bool = False) -> None:
        """May a request at ``place`` that found no endpoint be held? Raises :class:`Shed`
        for a sheddable one while nothing is ready with ``shed_at_zero`` (after
        asking for a wake). At ``max_buffered`` it sheds the held request the
        newcomer displaces (:meth:`FairHoldQueue.shed_for`: its caller gets
        :class:`Shed`), or raises :class:`BufferFull` when none may go."""
        if shed_at_zero and place.priority < 0 and not self.endpoints.ready:
            if self._wake is not None:
                self._wake(self.name)
            self.shed_by_class[place.label] += 1
            self._shed_in_period += 1
            raise Shed(self.name)
        if not self.full:
            return
        shed = self._waiters.shed_for(place.priority, place.tenant)
        if shed is None:
            raise BufferFull(self.name)
        # Counted when its caller wakes and leaves (in acquire), by its class.
        self._shedding += 1
        shed.set_exception(Shed(self.name))

    async def acquire(
        self,
        timeout_s: float,
        place: HoldClass = ANONYMOUS,
        *,
        shed_at_zero: bool = False,
        picker: AdapterPicker | None = None,
    ) -> EndpointTracker:
        """Hold until an endpoint is handed over; raises a :class:`HoldError` or cancels.

        ``place``: the request's class, tenant and cost; ``shed_at_zero``: a
        sheddable request (class below 0) is refused with :class:`Shed` while
        no replica is ready (the target is still woken). A request with a
        ``picker`` (a LoRA adapter's) is handed a replica its picker chooses;
        while it is next in line and its picker finds none, the requests behind
        it wait too (the release order is kept)."""
        if self.closed:
            raise self._closed_reason(self.name)
        # The fast path just missed (and a prefix balancer counted its pick):
        # one more look by load, as a held request is balanced, counted once.
        choose = picker.pick if picker is not None else pick
        tracker = (
            None
            if self._waiters
            else self._took(choose(self.endpoints.ready, self.limit, self._rng))
        )
        if tracker is not None:
            return tracker
        if shed_at_zero or self.buffered - self._shedding >= self.max_buffered:
            self.admit(place, shed_at_zero=shed_at_zero)
        label = place.label
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[EndpointTracker] = loop.create_future()
        self._touch()
        self._waiters.hold(fut, self._last_t, place.priority, place.tenant, place.cost)
        if picker is not None:
            self._pickers[fut] = picker
        self.buffered += 1
        self.held_by_class[label] += 1
        if not self.endpoints.ready and self._wake is not None:
            self._wake(self.name)
        # One timer that fails the future, rather than asyncio.timeout (a
        # Timeout object, its timer and a cancellation to translate): held
        # requests are many, and each one's bytes count (10,000 held).
        expiry = loop.call_later(timeout_s, _expire, fut, self.name)
        handed = False
        try:
            tracker = await fut
            handed = True
            return tracker
        finally:
            expiry.cancel()
            self._touch()
            self.buffered -= 1
            self.held_by_class[label] -= 1
            if picker is not None:
                self._pickers.pop(fut, None)
            if not fut.done():
                fut.cancel()
            elif not handed and not fut.cancelled():
                failed = fut.exception()
                if failed is None:
                    # Handed an endpoint in the same instant we were cancelled or
                    # timed out: give it back to the next in line.
                    if picker is not None:
                        picker.undo(fut.result())
                    self.release(fut.result())
                elif isinstance(failed, Shed):
                    self._shedding -= 1
                    self.shed_by_class[label] += 1
                    self._shed_in_period += 1
            if len(self._waiters) > 2 * self.buffered + 64:
                # Clients that left are dropped only when reached: many gone at
                # once are dropped here, so that they do not pile up.
                self._waiters.compact()

    def release(self, tracker: EndpointTracker) -> None:
        now = self._clock()
        self.area += (self.in_flight + self.buffered) * (now - self._last_t)
        self._last_t = now
        tracker.in_flight -= 1
        self.in_flight -= 1
        if self._waiters:
            self.dispatch()

    def mark_down(self, tracker: EndpointTracker) -> None:
        """A connection to ``tracker`` failed before any byte went out: out of rotation."""
        self.endpoints.mark_down(tracker)

    def dispatch(self) -> None:
        """Hand free endpoints to the waiters at the head of the queue (also called from
        outside when what a held request may get changed: a LoRA adapter unloaded, a
        replica's adapter slots learned)."""
        ready = self.endpoints.ready
        if not ready:
            return
        touched = False
        limit, rng, pickers = self.limit, self._rng, self._pickers

        def take(head: asyncio.Future[EndpointTracker]) -> EndpointTracker | None:
            picker = pickers.get(head) if pickers else None
            if picker is not None:
                return picker.pick(ready, limit, rng)
            return pick(ready, limit, rng)

        for head, _, tracker in self._waiters.hand_out(take):
            if not touched:
                self._touch()
                touched = True
            tracker.in_flight += 1
            self.in_flight += 1
            head.set_result(tracker)

    @property
    def full(self) -> bool:
        """``max_buffered`` requests held: a newcomer that cannot take an endpoint now
        must displace one (:meth:`admit`) or get :class:`BufferFull`."""
        return self.buffered - self._shedding >= self.max_buffered

    def take_shed(self) -> int:
        """Requests shed since the last call; resets."""
        got, self._shed_in_period = self._shed_in_period, 0
        return got

    def close(self, reason: type[HoldError] = GateClosed) -> None:
        """Fail everyone waiting, and every later request, with ``reason``.

        :class:`GateClosed` when the target is gone; :class:`DrainEnded` when
        the activator's drain ends with requests still held.
        """
        self.closed = True
        self._closed_reason = reason
        for fut in self._waiters.drain():
            fut.set_exception(reason(self.name))

    def refuse(self, exc: HoldError) -> int:
        """Fail the requests held now with ``exc``'s kind and message; how many.

        Unlike :meth:`close` the gate stays open: a later request is held and
        asks for a wake again (Tidal refused to wake the target, for now).
        """
        held = self._waiters.drain()
        for fut in held:
            fut.set_exception(type(exc)(*exc.args))
        return len(held)

    def pods(self) -> dict[str, int]:
        """In-flight requests per replica, for the report."""
        return {t.label: t.in_flight for t in self.endpoints.trackers.values() if t.in_flight}
