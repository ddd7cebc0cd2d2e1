"""Steps 3 to 5 of a request: hold for an endpoint, send, relay, end; and every failure's answer.

:class:`Forwarding` is one request's way from its target's gate to the end of
its answer, written once for every request, as Knative's ``Throttler.Try``
wraps hold, send and release in one call:

1. **take an endpoint** from the target: at once when one has room
   (:meth:`Target.try_take`), else held until one does (:meth:`Target.take`:
   one future per held request in its gate, bounded by the target's
   cold-start timeout and by the cap on held bodies; for a LoRA adapter, until
   it is loaded there), placed by its class, tenant and cost
   (:func:`~activator.holding.request_class.hold_class`, read only then: a
   request that never waits reads no such header);
2. **take a connection** to it from the pool: an idle keep-alive one at
   once, else a new one (awaited);
3. **send** the request over it (:func:`activator.http1.send`); the replica
   connection relays the answer by callbacks and calls :meth:`Forwarding.done`
   once when it ended;
4. **end**: give back the connection and the endpoint, count the request,
   and end the exchange; or, after a failure, decide (:func:`after_failure`)
   and answer it (:meth:`Answers.fail`) or send the request again.

A request is counted by what happened to its answer. One whose replica's
answer ended is *completed*, under the replica's status, however the client
closed after it: benchmark clients (GuideLLM, ``vllm bench serve``) close
their connection as soon as they read ``data: [DONE]``, and that close can
reach the activator before the replica's last chunk (the chunked body's
terminator) does. So a client that leaves while an answer it has begun to
receive is relayed does not cut the replica's connection at once: the
answer may run on, unread, for a grace (:class:`~activator.http1.leaving.EndGrace`),
and ends as completed if it ends within it. One that does not (the client
left mid-stream), one whose client left before any byte of answer, or while
it was held, and one whose replica failed mid-answer, is *cut*, with its reason (``client_closed``,
``replica_failed``, ``shutdown``): :meth:`Answers.cut` counts it and logs it.

Most requests never wait: an endpoint with room and an idle connection to it
mean the steps run in the parser's callback (:meth:`Forwarding.start`), with
no task, future or wake-up, and the replica connection's end-of-answer
callback ends them. A request that must wait runs steps 1 and 2 in a task
and then goes on exactly as one that did not: the same :meth:`_send`, the
same :meth:`done`. A task is cancelled when the client leaves (the exchange's
``cancel``); a request being relayed is abandoned instead
(:meth:`Forwarding.cancel`).

Failures, and where each goes (the status table is :mod:`activator.statuses`):

- a connection that could not be opened (refused, unreachable, connect
  timeout: no byte reached the replica) marks that endpoint down and goes
  back to step 1, within the request's cold-start deadline; if the deadline
  passes after refusals, the answer is 502 ``all_refused``;
- a replica that closed or reset the connection before a byte of answer
  sends the request once more, when its whole body is still at hand and
  the model allows it (``routing.tidal.dev/resend-unanswered``): the pool's
  other idle connections to it are dropped, since it is most likely
  shutting down, and the request goes back to step 1;
- any other failure after bytes went out is a 502, or 408/413 when the
  cause was the client's own body; after the answer began (the replica died
  mid-stream) it cannot become a status: the client connection is closed,
  which tells the client the truth.

:class:`Answers` writes every answer the activator makes itself: one place
for the status, the body, ``Retry-After``, whether the connection closes, and
the metrics.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from activator import http1
from activator.holding.gate import ColdStartTimeout, DrainEnded, HoldError, Shed
from activator.holding.held_bodies import HeldBodies
from activator.holding.request_class import HoldClass, hold_class
from activator.holding.target import HoldTicket, Target
from activator.http1 import Exchange
from activator.http1.leaving import END_GRACE_S, EndGrace, leaving_reason, on_leaving
from activator.metrics import Metrics
from activator.refusal_log import RefusalLog
from activator.replicas.readiness import EndpointTracker
from activator.statuses import (
    AdapterLoadFailed,
    AllRefused,
    Draining,
    Failure,
    NoAdapter,
    NoTarget,
    ProxyError,
    UpstreamFailed,
    after_failure,
    error_document,
    status_of,
)

__all__ = ["SERVE_ERRORS", "Answers", "Forwarder", "Forwarding", "in_task"]

log = logging.getLogger(__name__)

# What a request's own answer is made of: each class one row of the status table.
SERVE_ERRORS = (
    ProxyError,
    HoldError,
    http1.BodyTooLarge,
    http1.BodyStalled,
    http1.RequestRejected,
)
# Failures whose text the client is told (it names the model, the replica, the refusal).
_DETAILED = (
    UpstreamFailed,
    AllRefused,
    NoTarget,
    NoAdapter,
    AdapterLoadFailed,
    http1.RequestRejected,
)
# Failures after which the connection closes: the drain, or a body not read to its end.
_CLOSING = (Draining, DrainEnded, http1.BodyStalled, http1.BodyTooLarge, http1.RequestRejected)


@dataclass(frozen=True, slots=True)
class Forwarder:
    """What every request's forwarding shares: the pool, the answers, the held-body cap
    and the options that concern sending."""

    pool: http1.UpstreamPool
    answers: Answers
    held_bodies: HeldBodies
    max_body_bytes: int = 0
    upstream_idle_s: float = 0.0
    strip: frozenset[bytes] = frozenset()


class Answers:
    """The activator's own answers, and the count of every request that ends: answered,
    relayed whole, or cut (:meth:`cut`)."""

    __slots__ = ("cuts", "metrics", "refusals", "retry_after_s")

    def __init__(self, metrics: Metrics, retry_after_s: int) -> None:
        self.metrics = metrics
        self.retry_after_s = retry_after_s
        self.refusals = RefusalLog()
        self.cuts = RefusalLog(verb="cut")

    def fail(self, exchange: Exchange, exc: Exception, target: str, started: float) -> None:
        """Answer ``exc`` by the status table, or cut an answer already begun; then count
        it, and log it (one line per kind and target per interval: :mod:`refusal_log`)."""
        spec = status_of(exc)
        self.metrics.reject(target, spec.code)
        error = error_document(exc, str(exc) if isinstance(exc, _DETAILED) else "")["error"]
        said = self.refusals.note(
            status=spec.status,
            # A shed says which rule fired, in its own line: each is a different fix.
            code=f"{spec.code} ({exc.cause})" if isinstance(exc, Shed) else spec.code,
            target=target,
            message=error["message"],
            now=time.monotonic(),
        )
        if said is not None:
            log.log(*said)
        if exchange.started:
            exchange.cut()  # part of an answer went out: it cannot become a status
        else:
            exchange.answer_error(
                spec.status,
                error_type=error["type"],
                code=error["code"],
                message=error["message"],
                retry_after_s=(getattr(exc, "retry_after_s", None) or self.retry_after_s)
                if spec.retry_after
                else None,
                close=isinstance(exc, _CLOSING),
            )
        self.metrics.observe(target, spec.status, time.perf_counter() - started)

    def cut(self, target: str, reason: str, detail: str) -> None:
        """Count a request whose answer was cut (``reason``: one of ``CUT_REASONS``),
        and log it (one line per reason and target per interval, as refusals are)."""
        self.metrics.count_cut(target, reason)
        said = self.cuts.note(
            status=0, code=reason, target=target, message=detail, now=time.monotonic()
        )
        if said is not None:
            # A replica failing mid-answer is the model's trouble; a client leaving is not.
            log.log(logging.WARNING if reason == "replica_failed" else said[0], said[1])

    def json(self, exchange: Exchange, document: object, target: str, started: float) -> None:
        """A 200 with a JSON body that the activator writes itself (the model list)."""
        self.own(
            exchange,
            (200, b"OK", b"application/json", json.dumps(document).encode()),
            target,
            started,
        )

    def own(
        self,
        exchange: Exchange,
        answer: tuple[int, bytes, bytes, bytes],
        target: str,
        started: float,
    ) -> None:
        """An answer the activator writes itself, not an error: ``(status, reason, content
        type, body)`` (a probe's: :mod:`activator.routing.server_probes`)."""
        exchange.answer(*answer)
        self.metrics.observe(target, answer[0], time.perf_counter() - started)


def in_task(exchange: Exchange, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``work`` (a step that must wait) in a task the client's leaving cancels.

    ``work`` ends the exchange itself, or hands it to callbacks that will; a
    failure it did not expect is the 500 of :meth:`Exchange.handler_failed`.
    """
    task = asyncio.get_running_loop().create_task(_guarded(exchange, work))
    exchange.cancel = task.cancel  # also keeps the task referenced while it runs


async def _guarded(exchange: Exchange, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
    try:
        await work()
    except asyncio.CancelledError:
        exchange.body.detach()  # the client left (or the server shuts): nothing to answer
    except Exception:
        exchange.cancel = None
        exchange.handler_failed()
        exchange.finish()


class Forwarding:
    """One request from its target's gate to the end of its answer (module docstring)."""

    __slots__ = (
        "adapter",
        "body",
        "conn",
        "document",
        "exchange",
        "forwarder",
        "grace",
        "prompt",
        "sent_again",
        "spec",
        "started",
        "target",
        "ticket",
        "tracker",
    )

    def __init__(
        self,
        forwarder: Forwarder,
        exchange: Exchange,
        target: Target,
        started: float,
        body: bytes | None = None,
        document: object = None,
    ) -> None:
        self.forwarder = forwarder
        self.exchange = exchange
        self.target = target
        # The spec the request is served under from start to end, whatever changes.
        self.spec = target.spec
        self.started = started
        # The body read whole to route by ``model``; None: the client's is piped.
        self.body = body
        # The body parsed to route by ``model`` (None: not parsed): a held
        # request's cost in tokens comes from it.
        self.document = document
        # Counted as it arrives; what a prefix-balanced model picks a replica by
        # (None: by load), and the LoRA adapter the request names (its target's
        # adapter slots route it).
        self.prompt, self.adapter = target.arrive(document)
        self.tracker: EndpointTracker | None = None
        self.conn: http1.UpstreamConnection | None = None
        # Its wait for an endpoint, once it had to wait (None: it never did).
        self.ticket: HoldTicket | None = None
        self.sent_again = False  # it went out once and came back unanswered
        # Set while an answer whose client left runs on (module docstring).
        self.grace: EndGrace | None = None

    # -- steps 1 to 3 ----------------------------------------------------------------

    def start(self) -> None:
        """Send now when an endpoint has room and an idle connection to it is at hand,
        else wait for them in a task."""
        if not self.send_now():
            in_task(self.exchange, self.wait_and_send)

    def send_now(self) -> bool:
        """Steps 1 to 3 with no waiting; False (nothing taken) when one must wait."""
        if self.adapter is not None:
            return False  # its adapter may need a load: awaited in a task
        target = self.target
        tracker = target.try_take(self.prompt)
        if tracker is None:
            return False
        conn = self.forwarder.pool.take_idle(tracker.host, tracker.port)
        if conn is None:
            target.give_back(tracker)  # opening a connection needs awaits
            return False
        self._send(tracker, conn)
        return True

    async def wait_and_send(self) -> None:
        """Steps 1 to 3, waiting where they must; a failure is answered here."""
        exchange = self.exchange
        try:
            tracker, conn = await self._endpoint_and_connection()
            if self.body is None:
                # What arrived of the body while it waited may be over the limit:
                # then nothing of it goes out.
                exchange.body.set_limit(self.forwarder.max_body_bytes)
                if exchange.body.error is not None:
                    self.tracker, self.conn = tracker, conn
                    self._release()
                    raise exchange.body.error
        except SERVE_ERRORS as exc:
            exchange.cancel = None
            self.forwarder.answers.fail(exchange, exc, self.target.name, self.started)
            exchange.finish()
            return
        except asyncio.CancelledError:
            # The client left while it was held (or the activator shuts down).
            self.forwarder.answers.cut(
                self.target.name, leaving_reason(self.exchange), "left while held"
            )
            raise
        self._send(tracker, conn)

    async def _endpoint_and_connection(self) -> tuple[EndpointTracker, http1.UpstreamConnection]:
        """Steps 1 and 2: an endpoint from the target (held for until the cold-start
        deadline, its LoRA adapter loaded there) and a connection to it; an endpoint
        that refuses is marked down and another awaited, within the same deadline."""
        forwarder, target = self.forwarder, self.target
        ticket = self.ticket = HoldTicket(
            self.spec,
            self._place,
            adapter=self.adapter,
            prompt=self.prompt,
            held_bytes=len(self.body) if self.body else 0,
            held_bodies=forwarder.held_bodies,
            on_wait=self._waited,
        )
        refused = 0
        while True:
            try:
                tracker = await target.take(ticket)
            except ColdStartTimeout:
                if refused:
                    raise AllRefused(f"{refused} connection attempt(s) refused") from None
                raise
            pool = forwarder.pool
            try:
                conn = pool.take_idle(tracker.host, tracker.port) or await pool.acquire(
                    tracker.host, tracker.port
                )
            except http1.NotSent as exc:
                answer = after_failure(
                    Failure.NOT_SENT, client_body=None, replica=tracker.label, what=str(exc)
                )
                if answer is not None:
                    self._give_back(tracker)
                    raise answer from exc
                refused += 1
                target.give_back(tracker, ticket, down=True)  # out of rotation
                ticket.start(asyncio.get_running_loop().time())
                continue
            except BaseException:
                self._give_back(tracker)
                raise
            return tracker, conn

    def _place(self) -> HoldClass:
        """Its class, tenant and cost, read when it first waits (a bad class counted)."""
        place = hold_class(self.exchange.head.index, self.spec.default_priority, self.document)
        if place.bad_priority:
            self.forwarder.answers.metrics.count_bad_priority(self.target.name)
        return place

    def _waited(self, label: str, waited_s: float) -> None:
        metrics = self.forwarder.answers.metrics
        metrics.observe_cold_wait(self.target.name, waited_s)
        metrics.observe_hold(self.target.name, label, waited_s)

    def _give_back(self, tracker: EndpointTracker) -> None:
        """The endpoint taken for this request, back to its target (and adapter slots)."""
        self.target.give_back(tracker, self.ticket)

    def _send(self, tracker: EndpointTracker, conn: http1.UpstreamConnection) -> None:
        """Step 3: send over ``conn``; the replica connection calls :meth:`done` at the end."""
        self.tracker = tracker
        self.conn = conn
        exchange = self.exchange
        exchange.cancel = self.cancel
        forwarder = self.forwarder
        try:
            http1.send(
                conn,
                exchange,
                body=self.body,
                max_body_bytes=forwarder.max_body_bytes,
                idle_s=forwarder.upstream_idle_s,
                strip=forwarder.strip,
                on_done=self.done,
            )
        except BaseException:
            exchange.cancel = None
            self.cancel()  # give back what was taken; the caller answers 500
            raise

    # -- step 4 ----------------------------------------------------------------------

    def done(self, status: int, exc: BaseException | None) -> None:
        """The answer ended (``exc`` None) or failed: give back, count, answer, end.

        The replica connection's callback, called once per send.
        """
        exchange = self.exchange
        exchange.cancel = None
        tracker = self.tracker
        if self.grace is not None:
            self.grace.cancel()  # the answer ended within the grace: completed
            self.grace = None
        try:
            self._release()
            if isinstance(exc, http1.ReplicaFailed) and exc.started:
                # The replica's head already went to the client: the cut connection is the answer.
                self.forwarder.answers.cut(self.target.name, "replica_failed", str(exc))
                exchange.finish()
                return
            if exc is not None:
                assert tracker is not None
                again = self._after_failure(exc, tracker)
                if again is None:
                    self.start()  # sent again: the same steps, from step 1
                    return
                status = again
            self.forwarder.answers.metrics.observe(
                self.target.name, status, time.perf_counter() - self.started
            )
        except SERVE_ERRORS as error:
            self.forwarder.answers.fail(exchange, error, self.target.name, self.started)
        except Exception:
            exchange.handler_failed()
        exchange.finish()

    def _after_failure(self, exc: BaseException, tracker: EndpointTracker) -> int | None:
        """The status to count for a send to ``tracker`` that failed, None to send the
        request again; raises the error to answer."""
        if not isinstance(exc, http1.ReplicaFailed):
            raise exc  # the client's own body failed (408, 413)
        if exc.unanswered:
            failure, again = Failure.UNANSWERED, self._can_send_again()
        else:
            failure, again = Failure.SENT, False
        failed = after_failure(
            failure, client_body=None, replica=tracker.label, what=str(exc), can_send_again=again
        )
        if failed is not None:
            raise failed from exc
        log.info("sending a request again: %s", exc)
        self.sent_again = True
        self.forwarder.answers.metrics.count_resent(self.target.name)
        self.forwarder.pool.drop_idle(tracker.host, tracker.port)
        return None

    def _can_send_again(self) -> bool:
        """Not sent again before, the model allows it, and its whole body is at hand: read
        whole, or kept and rewound (asked last: rewinding changes the body)."""
        if self.sent_again or not self.spec.resend_unanswered:
            return False
        return self.body is not None or self.exchange.body.rewind()

    def _release(self) -> None:
        # The client's body is detached by Exchange.finish, or in cancel().
        conn, tracker = self.conn, self.tracker
        self.conn = self.tracker = None
        if conn is not None:
            self.forwarder.pool.release(conn)
        if tracker is not None:
            self.target.give_back(tracker, self.ticket)  # _give_back, written out

    def cancel(self) -> None:
        """The client went away (or the server shuts): see :func:`.leaving.on_leaving`."""
        self.grace = on_leaving(
            self.exchange, self.conn, cut=self._cut, expired=self._cut_after_grace
        )

    def _cut(self, reason: str, detail: str) -> None:
        """Abandon the replica's answer, counted cut for ``reason``."""
        if self.conn is not None:
            self.conn.abort()
        self._release()
        self.forwarder.answers.cut(self.target.name, reason, detail)

    def _cut_after_grace(self) -> None:
        self.grace = None
        self._cut("client_closed", f"mid-answer (not ended {END_GRACE_S:g}s later)")
        self.exchange.finish()
