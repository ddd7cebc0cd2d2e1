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
  appears (an endpoint turns ready, a request finishes, a request is held
  while a replica has room) the gate hands endpoints to the requests whose
  turn it is (class first, then tenants in turns weighted by tokens; arrival
  order when no request names a class or a tenant), already counted in
  flight, so a burst of 2,000 held requests is released in order without
  waking all of them for every slot;
- a request that cannot go for a reason of its own (a LoRA adapter's
  request whose picker finds no slot on a replica with room) is passed over,
  never keeping the requests behind it from going: the release order is
  kept among those that can go. One the replicas there are can never serve
  (its adapter withdrawn, no replica able to load adapters, every replica
  refusing it) is answered at once, when held and whenever what it waits
  for changes (:meth:`Gate.settle`), never left to its deadline;
- at ``max_buffered`` waiting requests a newcomer sheds a held request of a
  lower class, or of a tenant holding more than its share, which fails with
  :class:`Shed` naming that cause (:meth:`Gate.admit`); when none may go the
  newcomer fails at once with :class:`BufferFull` (Knative's breaker does
  the same with its queue depth). Refused while the target wakes, either
  carries the expected time left to a ready replica
  (:class:`~activator.holding.wake_clock.WakeClock`), its ``Retry-After``;
- past its cold-start deadline it fails with :class:`ColdStartTimeout`;
- a cancelled caller (the client went away) leaves the queue at once, and an
  endpoint handed to it in the same instant is given back.

``limit`` is this activator's per-replica bound: its share of the target's
``container-concurrency``, which the target works out from the scaler's
word (:class:`~activator.holding.scaler_word.ScalerWord`); the gate keeps no
spec of its own.

The gate also keeps what ``/v1/stats`` reports: arrivals (:meth:`Gate.arrive`),
and the time integral of ``in_flight + buffered`` from which the period's
mean concurrency comes. Both are updated where the counts change, with one
read of the loop's clock (:mod:`activator.clock`). How a replica is chosen
among the ready ones (by load, by prompt prefix, by a LoRA adapter's
slots) is its target's, handed in as ``choose``.

The gate is the queue and its counts, and only its target calls it
(:mod:`activator.holding.target`): :meth:`~Gate.arrive`,
:meth:`~Gate.try_acquire`, :meth:`~Gate.admit`, :meth:`~Gate.acquire` and
:meth:`~Gate.release` on the request path; :meth:`~Gate.configure`,
:meth:`~Gate.settle` (what held requests may get changed), :meth:`~Gate.refuse`
and :meth:`~Gate.close` from its target's upkeep; :meth:`~Gate.take_period`,
:meth:`~Gate.pods` and :attr:`~Gate.sheds` for its reports. It reads its
target's :class:`~activator.replicas.readiness.TargetEndpoints` (which
replicas are ready) and writes none of it. When it holds a request while no
endpoint is ready it calls ``wake(name)``, a plain synchronous callback (in
the activator it puts the target on the reporter's
:class:`~activator.scaler_link.wake_queue.WakeQueue`): the gate itself never
does I/O and knows nothing of the scaler.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence

from activator.balancing.least_loaded import pick
from activator.clock import Clock, loop_time
from activator.holding.adapters import AdapterPicker
from activator.holding.hold_errors import (
    AT_ZERO,
    HIGHER_CLASS,
    TENANT_SHARE,
    BufferFull,
    ColdStartTimeout,
    DrainEnded,
    GateClosed,
    HoldError,
    Shed,
)
from activator.holding.request_class import ANONYMOUS, HoldClass
from activator.holding.shed_counts import ShedCounts
from activator.holding.wake_clock import WakeClock
from activator.replicas.readiness import EndpointTracker, TargetEndpoints
from groundwork.fair_hold_queue import BY_CLASS, SKIP, FairHoldQueue, Skip

__all__ = [
    "BufferFull",
    "Choose",
    "ColdStartTimeout",
    "DrainEnded",
    "Gate",
    "GateClosed",
    "HoldError",
    "Shed",
]

_Held = asyncio.Future[EndpointTracker]
# A way to choose a replica among the ready ones (ready, per-replica limit, rng).
Choose = Callable[[Sequence[EndpointTracker], int, random.Random], EndpointTracker | None]


def _waiting(fut: _Held) -> bool:
    return not fut.done()


def _has_room(ready: Sequence[EndpointTracker], limit: int) -> bool:
    """Some ready endpoint takes one more request (0: no per-replica bound)."""
    return limit <= 0 or any(t.in_flight < limit for t in ready)


class Gate:
    """Holding and concurrency accounting for one target."""

    def __init__(
        self,
        name: str,
        *,
        max_buffered: int,
        limit: int = 0,
        endpoints: TargetEndpoints | None = None,
        rng: random.Random | None = None,
        clock: Clock = loop_time,
        wake: Callable[[str], None] | None = None,
    ) -> None:
        self.name = name
        self._rng = rng or random.Random()
        self._clock = clock
        self._wake = wake
        # Held requests' futures; each leaves the queue when it stops waiting (handed
        # an endpoint, shed, expired, its client gone). A client that leaves cancels
        # its future at once and leaves the queue when its task next runs: one done
        # meanwhile is passed over.
        self._waiters: FairHoldQueue[_Held] = FairHoldQueue(_waiting)
        # Held LoRA adapter requests: their pickers and places (empty without adapters).
        self._pickers: dict[_Held, tuple[AdapterPicker, HoldClass]] = {}
        # Its target's endpoints (read here: the ready ones); a gate of its own makes
        # its own, and looks again at each change.
        self.endpoints = endpoints or TargetEndpoints(name, on_change=self.settle)
        self.wakes = WakeClock()
        self.buffered = 0
        # Held requests by class label; those shed, by class label and cause.
        self.held_by_class = dict.fromkeys(("critical", "standard", "sheddable"), 0)
        self.sheds = ShedCounts()
        # Shed, their callers not yet woken: still in ``buffered``, no longer held.
        self._shedding = 0
        self.in_flight = 0
        self.arrivals = 0
        self.closed = False
        self._closed_reason: type[HoldError] = GateClosed
        # Time integral of in_flight + buffered since the last report. The
        # first reading may come from any instant: the level is zero until a
        # count changes, and every change reads the clock first.
        self.area = 0.0
        self._last_t = 0.0
        self.max_buffered = self.limit = 0
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

    def arrive(self) -> None:
        """A request for this target arrived (counted once, however often it waits)."""
        self.arrivals += 1

    def try_acquire(self, choose: Choose = pick) -> EndpointTracker | None:
        """An endpoint now, or None; never waits. Queued requests go first.

        ``choose``: how the replica is chosen among the ready ones (by load, by
        the request's prompt, by what a LoRA adapter's replicas have loaded).
        """
        if self._waiters or self.closed:
            return None
        return self._took(choose(self.endpoints.ready, self.limit, self._rng))

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
        newcomer displaces (:meth:`FairHoldQueue.displace`: its caller gets
        :class:`Shed` naming the rule), or raises :class:`BufferFull` when none
        may go. Refused while nothing is ready, the error carries the expected
        time left to a ready replica."""
        waking = not self.endpoints.ready
        if waking:
            self.wakes.waking(self._clock())
        retry_after_s = self.wakes.left_s(self._clock()) if waking else None
        if shed_at_zero and place.priority < 0 and waking:
            if self._wake is not None:
                self._wake(self.name)
            self.sheds.note(place.label, AT_ZERO)
            raise Shed(self.name, AT_ZERO, retry_after_s=retry_after_s)
        if self.buffered - self._shedding < self.max_buffered:
            return
        displaced = self._waiters.displace(place.priority, place.tenant)
        if displaced is None:
            raise BufferFull(self.name, retry_after_s=retry_after_s)
        victim, rule = displaced
        cause = HIGHER_CLASS if rule == BY_CLASS else TENANT_SHARE
        # Counted when its caller wakes and leaves (in acquire), by its class.
        self._shedding += 1
        victim.set_exception(Shed(self.name, cause, retry_after_s=retry_after_s))

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
        while it finds none the requests behind it that can go are not kept
        waiting, and one the replicas can never serve is answered at once."""
        if self.closed:
            raise self._closed_reason(self.name)
        ready = self.endpoints.ready
        # The fast path just missed (and a prefix balancer counted its pick):
        # one more look by load, as a held request is balanced, counted once.
        choose = picker.pick if picker is not None else pick
        tracker = None if self._waiters else self._took(choose(ready, self.limit, self._rng))
        if tracker is not None:
            return tracker
        if picker is not None:
            never = picker.never(ready, self.endpoints.trackers.values())
            if never is not None:
                raise never
        if shed_at_zero or self.buffered - self._shedding >= self.max_buffered:
            self.admit(place, shed_at_zero=shed_at_zero)
        fut = self._hold(place, picker)
        # One timer that fails the future, rather than asyncio.timeout (a
        # Timeout object, its timer and a cancellation to translate): held
        # requests are many, and each one's bytes count (10,000 held).
        expiry = asyncio.get_running_loop().call_later(
            timeout_s, _expire, fut, self._waiters, place, self.name
        )
        handed = False
        try:
            tracker = await fut
            handed = True
            return tracker
        finally:
            expiry.cancel()
            self._touch()
            self.buffered -= 1
            self.held_by_class[place.label] -= 1
            if picker is not None:
                self._pickers.pop(fut, None)
            if not fut.done():
                fut.cancel()
            if fut.cancelled():  # the client left: out of the queue now
                self._waiters.leave(fut, place.priority, place.tenant)
            elif not handed:
                failed = fut.exception()
                if failed is None:
                    # Handed an endpoint in the same instant we were cancelled or
                    # timed out: give it back to the next in line.
                    if picker is not None:
                        picker.undo(fut.result())
                    self.release(fut.result())
                elif isinstance(failed, Shed):
                    self._shedding -= 1
                    self.sheds.note(place.label, failed.cause)

    def _hold(self, place: HoldClass, picker: AdapterPicker | None) -> _Held:
        """Put a request in the queue at ``place`` and count it; wake the target when
        nothing is ready, else hand out at once (it may go past requests that cannot)."""
        fut: _Held = asyncio.get_running_loop().create_future()
        self._touch()
        self._waiters.hold(fut, self._last_t, place.priority, place.tenant, place.cost)
        if picker is not None:
            self._pickers[fut] = (picker, place)
        self.buffered += 1
        self.held_by_class[place.label] += 1
        if self.endpoints.ready:
            self.dispatch()
        else:
            self.wakes.waking(self._last_t)
            if self._wake is not None:
                self._wake(self.name)
        return fut

    def release(self, tracker: EndpointTracker) -> None:
        now = self._clock()
        self.area += (self.in_flight + self.buffered) * (now - self._last_t)
        self._last_t = now
        tracker.in_flight -= 1
        self.in_flight -= 1
        if self._waiters:
            self.dispatch()

    def dispatch(self) -> None:
        """Hand free endpoints to the held requests in release order, passing over those
        that cannot go for a reason of their own (a LoRA adapter with no slot on a
        replica with room)."""
        ready = self.endpoints.ready
        if not ready or not self._waiters:
            return
        touched = False
        limit, rng, pickers = self.limit, self._rng, self._pickers
        # Adapters found without a slot in this release: capacity only shrinks while
        # it runs, so their other requests are passed over without asking again.
        blocked: set[str] = set()

        def take(head: _Held) -> EndpointTracker | Skip | None:
            held = pickers.get(head) if pickers else None
            if held is None:
                return pick(ready, limit, rng)
            picker = held[0]
            if picker.name in blocked:
                return SKIP
            got = picker.pick(ready, limit, rng)
            if got is None and _has_room(ready, limit):
                blocked.add(picker.name)
                return SKIP
            return got

        for head, _, tracker in self._waiters.hand_out(take):
            if not touched:
                self._touch()
                touched = True
            tracker.in_flight += 1
            self.in_flight += 1
            head.set_result(tracker)

    def settle(self) -> None:
        """What held requests may get changed (readiness, adapters, the declaration):
        note a wake that ended, answer at once each held adapter request the
        replicas there are can never serve, then hand out what can go."""
        ready = self.endpoints.ready
        if ready and self.wakes.began_at is not None:
            self.wakes.woke(self._clock())
        if self._pickers:
            known = self.endpoints.trackers.values()
            verdicts: dict[str, HoldError | None] = {}
            for fut, (picker, place) in list(self._pickers.items()):
                if picker.name not in verdicts:
                    verdicts[picker.name] = picker.never(ready, known)
                never = verdicts[picker.name]
                if never is not None and not fut.done():
                    self._waiters.leave(fut, place.priority, place.tenant)
                    fut.set_exception(never)
        self.dispatch()

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


def _expire(fut: _Held, queue: FairHoldQueue[_Held], place: HoldClass, name: str) -> None:
    """A held request's deadline: out of the queue now, failed with ColdStartTimeout."""
    if not fut.done():
        queue.leave(fut, place.priority, place.tenant)
        fut.set_exception(ColdStartTimeout(name))
