"""Per-target holding: a bounded FIFO of waiting requests and a per-replica limit.

A :class:`Gate` stands in front of each target. A request asks it for an
endpoint:

- the fast path (:meth:`Gate.try_acquire`) is a plain function call with no
  awaiting: when nobody is waiting and a ready endpoint has a free slot, the
  request takes it at once;
- otherwise the request is *held* (:meth:`Gate.acquire`): it gets a future at
  the back of the :class:`~groundwork.hold_queue.HoldQueue`, the FIFO the
  policy simulator holds with too. Whenever capacity appears (an endpoint
  turns ready, a request finishes) the gate hands endpoints to the queue's
  head, already counted in flight, so a burst of 2,000 held requests is
  released in arrival order without waking all of them for every slot;
- beyond ``max_buffered`` waiting requests it fails at once with
  :class:`BufferFull` (Knative's breaker does the same with its queue depth);
- past its cold-start deadline it fails with :class:`ColdStartTimeout`;
- a cancelled caller (the client went away) leaves the queue: its future is
  cancelled and skipped, and an endpoint handed to it in the same instant is
  given back.

``container-concurrency`` is a hard per-replica bound; this activator
enforces ``max(1, cc // activators)`` of it, where ``activators`` is the
number the scaler counts (its answer to ``/v1/stats``), so several
activators together stay within the bound as long as there are no more of
them than ``cc``.

The gate also keeps what ``/v1/stats`` reports: arrivals (:meth:`Gate.arrive`),
and the time integral of ``in_flight + buffered`` from which the period's
mean concurrency comes. Both are updated where the counts change, with one
read of the loop's clock (:mod:`activator.clock`). For a target sized in
tokens (``counts_tokens``: it has a TTFT objective) a request routed by its
body's ``model`` also adds its estimated prompt tokens and its ``max_tokens``
(:func:`~activator.balancing.prefix_key.estimated_tokens`, from the document already
parsed to route it); other targets pay nothing for it.

Its public surface is small: :meth:`~Gate.arrive`, :meth:`~Gate.try_acquire`,
:meth:`~Gate.acquire`, :meth:`~Gate.release` and :meth:`~Gate.mark_down` on
the request path; :meth:`~Gate.configure`, :meth:`~Gate.set_activators` and
:meth:`~Gate.close` for the registry; :meth:`~Gate.refuse` for the reporter (Tidal
will not wake the target); :meth:`~Gate.take_period` and
:meth:`~Gate.pods` for reports. The gate owns its target's
:class:`~activator.replicas.readiness.TargetEndpoints` and is told of readiness
changes through the callback it hands them at construction. When it holds a
request while no endpoint is ready it puts the target on the
:class:`~activator.holding.wake_queue.WakeQueue`, an event the reporter consumes: the
gate itself never does I/O.
"""

from __future__ import annotations

import asyncio
import random

from activator.balancing.least_loaded import pick
from activator.balancing.prefix_key import PROMPT_SIZE_BOUNDS, PromptBlocks, estimated_tokens
from activator.clock import Clock, loop_time
from activator.holding.prefix_balancing import PrefixBalancer
from activator.holding.wake_queue import WakeQueue
from activator.replicas.readiness import EndpointTracker, TargetEndpoints
from activator.targets import DEFAULT_COLD_START_TIMEOUT_S
from groundwork.hold_queue import HoldQueue

__all__ = ["BufferFull", "ColdStartTimeout", "DrainEnded", "Gate", "GateClosed", "HoldError"]


class HoldError(Exception):
    """A request could not get an endpoint."""


class BufferFull(HoldError):
    """``max_buffered`` requests already wait for this target."""


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
        container_concurrency: int,
        cold_start_timeout_s: float = DEFAULT_COLD_START_TIMEOUT_S,
        activators: int = 1,
        rng: random.Random | None = None,
        clock: Clock = loop_time,
        wake: WakeQueue | None = None,
    ) -> None:
        self.name = name
        self._rng = rng or random.Random()
        self._clock = clock
        self._wake = wake
        # Held requests' futures; one that is done (its caller went away, its time ran
        # out) has left and is skipped.
        self._waiters: HoldQueue[asyncio.Future[EndpointTracker]] = HoldQueue(_waiting)
        self.endpoints = TargetEndpoints(name, on_change=self._dispatch)
        self.buffered = 0
        self.in_flight = 0
        self.arrivals = 0
        # Estimated prompt tokens and max_tokens of the period's arrivals (only
        # with counts_tokens; see the module docstring).
        self.counts_tokens = False
        self.prompt_tokens = 0
        self.output_tokens = 0
        # Arrivals with an estimated prompt longer than each PROMPT_SIZE_BOUNDS.
        self.prompts_over = [0] * len(PROMPT_SIZE_BOUNDS)
        self.closed = False
        self._closed_reason: type[HoldError] = GateClosed
        # Time integral of in_flight + buffered since the last report. The
        # first reading may come from any instant: the level is zero until a
        # count changes, and every change reads the clock first.
        self.area = 0.0
        self._last_t = 0.0
        self.max_buffered = 0
        self.container_concurrency = 0
        self.cold_start_timeout_s = 0.0
        self.limit = 0
        self.activators = max(1, activators)
        # None: least in flight; else the routing annotation asked for prefix balancing.
        self.prefix: PrefixBalancer | None = None
        self.configure(
            max_buffered=max_buffered,
            container_concurrency=container_concurrency,
            cold_start_timeout_s=cold_start_timeout_s,
        )

    def configure(
        self,
        *,
        max_buffered: int,
        container_concurrency: int,
        cold_start_timeout_s: float = DEFAULT_COLD_START_TIMEOUT_S,
    ) -> None:
        """The target's limits; ``cold_start_timeout_s`` bounds how long a request is held."""
        if max_buffered < 0:
            raise ValueError(f"max_buffered must be >= 0, got {max_buffered}")
        if container_concurrency < 0:
            raise ValueError(f"container_concurrency must be >= 0, got {container_concurrency}")
        self.max_buffered = max_buffered
        self.container_concurrency = container_concurrency
        self.cold_start_timeout_s = cold_start_timeout_s
        self._update_limit()

    def set_balancing(self, mode: str) -> None:
        """``least-loaded`` or ``prefix`` (a target's ``routing.tidal.dev/balancing``)."""
        if mode == "prefix":
            self.prefix = self.prefix or PrefixBalancer()
        else:
            self.prefix = None

    def prompt_of(self, document: object) -> PromptBlocks | None:
        """What :meth:`try_acquire` balances a request by, from its parsed JSON body
        (None: by load)."""
        return self.prefix.prompt_of(document) if self.prefix is not None else None

    def set_activators(self, count: int) -> None:
        """The scaler's count of reporting activators; this one takes its share of cc."""
        self.activators = max(1, count)
        self._update_limit()

    def _update_limit(self) -> None:
        cc = self.container_concurrency
        old = self.limit
        self.limit = 0 if cc == 0 else max(1, cc // self.activators)
        if self.limit != old:
            self._dispatch()

    # -- accounting ---------------------------------------------------------

    def _touch(self) -> None:
        now = self._clock()
        self.area += (self.in_flight + self.buffered) * (now - self._last_t)
        self._last_t = now

    def take_period(self) -> tuple[float, int]:
        """(level-seconds, arrivals) since the last call; resets both."""
        self._touch()
        area, arrivals = self.area, self.arrivals
        self.area = 0.0
        self.arrivals = 0
        return area, arrivals

    # -- the request path ---------------------------------------------------

    def take_tokens(self) -> tuple[int, int, list[int]]:
        """(estimated prompt tokens, max_tokens, arrivals over each of
        :data:`PROMPT_SIZE_BOUNDS`) of the arrivals since the last call; resets."""
        got = self.prompt_tokens, self.output_tokens, self.prompts_over
        self.prompt_tokens = self.output_tokens = 0
        self.prompts_over = [0] * len(PROMPT_SIZE_BOUNDS)
        return got

    def arrive(self, document: object = None) -> None:
        """A request for this target arrived (counted once, however often it waits);
        ``document``: its parsed body, when it was routed by ``model``."""
        self.arrivals += 1
        if self.counts_tokens and document is not None:
            prompt, output = estimated_tokens(document)
            self.prompt_tokens += prompt
            self.output_tokens += output
            for i, bound in enumerate(PROMPT_SIZE_BOUNDS):
                if prompt <= bound:
                    break
                self.prompts_over[i] += 1

    def try_acquire(self, prompt: PromptBlocks | None = None) -> EndpointTracker | None:
        """An endpoint now, or None; never waits. Queued requests go first."""
        if self._waiters or self.closed:
            return None
        if self.prefix is not None:
            tracker = self.prefix.pick(prompt, self.endpoints.ready, self.limit, self._rng)
        else:
            tracker = pick(self.endpoints.ready, self.limit, self._rng)
        return self._took(tracker)

    def _took(self, tracker: EndpointTracker | None) -> EndpointTracker | None:
        if tracker is not None:
            self._touch()
            tracker.in_flight += 1
            self.in_flight += 1
        return tracker

    async def acquire(self, timeout_s: float) -> EndpointTracker:
        """Hold until an endpoint is handed over; raises a :class:`HoldError` or cancels."""
        if self.closed:
            raise self._closed_reason(self.name)
        # The fast path just missed (and a prefix balancer counted its pick):
        # one more look by load, as a held request is balanced, counted once.
        tracker = (
            None if self._waiters else self._took(pick(self.endpoints.ready, self.limit, self._rng))
        )
        if tracker is not None:
            return tracker
        if self.full:
            raise BufferFull(self.name)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[EndpointTracker] = loop.create_future()
        self._touch()
        self._waiters.hold(fut, self._last_t)
        self.buffered += 1
        if not self.endpoints.ready and self._wake is not None:
            self._wake.put(self.name)
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
            if not fut.done():
                fut.cancel()
            elif not handed and not fut.cancelled() and fut.exception() is None:
                # Handed an endpoint in the same instant we were cancelled or
                # timed out: give it back to the next in line.
                self.release(fut.result())
            if len(self._waiters) > 2 * self.buffered + 64:
                self._waiters.compact()

    def release(self, tracker: EndpointTracker) -> None:
        self._touch()
        tracker.in_flight -= 1
        self.in_flight -= 1
        if self._waiters:
            self._dispatch()

    def mark_down(self, tracker: EndpointTracker) -> None:
        """A connection to ``tracker`` failed before any byte went out: out of rotation."""
        self.endpoints.mark_down(tracker)

    def _dispatch(self) -> None:
        """Hand free endpoints to the waiters at the head of the queue."""
        ready = self.endpoints.ready
        if not ready:
            return
        touched = False
        limit, rng = self.limit, self._rng
        for head, _, tracker in self._waiters.hand_out(lambda _head: pick(ready, limit, rng)):
            if not touched:
                self._touch()
                touched = True
            tracker.in_flight += 1
            self.in_flight += 1
            head.set_result(tracker)

    @property
    def full(self) -> bool:
        """A request that cannot take an endpoint now would get :class:`BufferFull`."""
        return self.buffered >= self.max_buffered

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
