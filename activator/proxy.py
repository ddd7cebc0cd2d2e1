"""The request path: route, hold, forward, stream back, and answer failures.

:class:`Proxy` serves each request the data port parses
(:mod:`activator.http1`, the byte-level HTTP/1.1 data path). For each it
does, in order:

1. refuse what would make it an open proxy: ``CONNECT`` and absolute-form
   request targets (``GET http://elsewhere/``); only endpoints of known
   targets are ever dialled, never an address from the request;
2. route it (:mod:`activator.routing`); the body is read, bounded, only to
   route by ``model``;
3. take an endpoint from the target's gate: at once when one has room,
   else held until one does (:mod:`activator.buffering`). While a request
   is held, a body it was not routed by waits in a bounded buffer and the
   kernel (reading pauses);
4. forward it over a pooled keep-alive connection with hop-by-hop headers
   removed and ``X-Forwarded-*`` and ``X-Request-Id`` set, streaming the
   request body as it arrives (:func:`activator.http1.forward`);
5. relay the response as it arrives, body bytes as the replica framed them
   (server-sent events included). Only idle timeouts apply, never a total
   one, so a long generation is not cut.

Most requests need none of the waiting: routed without the body, an
endpoint with room, an idle pooled connection to it. :meth:`Proxy.handle_now`
serves those by callbacks alone (no task, no future: the replica
connection's end-of-answer callback finishes the request), and leaves every
other request to :meth:`Proxy.handle`, which does the same steps with
awaits. Both classify the data path's failures with the same helpers, so a
request gets the same answer and the same metrics on either path. A step
added to :meth:`Proxy.handle` must be added to ``handle_now`` too, or make
it decline the requests the step concerns.

A connection that fails before any byte reached the replica (refused,
unreachable, connect timeout) marks that endpoint down and sends the request
back to step 3, within its cold-start deadline. So does, once, a replica
that closed or reset the connection before a byte of answer, when the
request's whole body is still at hand (:mod:`activator.statuses` says why):
the pool's other idle connections to it are dropped, since it is most
likely shutting down, and the request goes out on a new connection, to it
or another. Otherwise, once bytes went out the request ends in 502, or in
408/413 when the cause was the client's own body (stalled past the idle
timeout, over the limit). A failure after the answer began (the replica died
mid-stream) cannot become a status: the client connection is closed, which
tells the client the truth. A request the fast path sent that must go back
to waiting continues in a task (:meth:`Exchange.continue_in_task`).

While a request is held, a body it was routed by stays in memory; the sum
of such bodies is capped per activator (:mod:`activator.held_bodies`).

What status to answer, and whether to go back to waiting, is decided in
:mod:`activator.statuses` (its table lists every status); this module only
classifies the data path's exceptions and writes the answer.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from activator import http1
from activator.buffering import BufferFull, ColdStartTimeout, DrainEnded, Gate, HoldError
from activator.denylist import is_denied
from activator.held_bodies import HeldBodies
from activator.http1 import Exchange
from activator.http1.heads import client_response_head, error_head_and_body
from activator.metrics import Metrics
from activator.readiness import EndpointTracker
from activator.registry import Registry
from activator.routing import TARGET_HEADER, RoutingTable, lists_models
from activator.statuses import (
    AllRefused,
    BadBody,
    BodyTimeout,
    BodyTooLarge,
    ConnectRefused,
    DeniedEndpoint,
    Draining,
    Failure,
    HeldBodiesFull,
    NoTarget,
    ProxyError,
    RefusedRequest,
    UpstreamFailed,
    after_failure,
    error_document,
    status_of,
)
from activator.targets import DEFAULT_RESEND_UNANSWERED

__all__ = ["Proxy", "ProxyOptions", "error_response"]

log = logging.getLogger(__name__)

_TARGET_HEADER = TARGET_HEADER.lower().encode()
_STRIP = frozenset({_TARGET_HEADER})


def error_response(
    exc: Exception,
    *,
    request_id: str | bytes,
    retry_after_s: int = 1,
    detail: str = "",
    close: bool = False,
    http10: bool = False,
) -> bytes:
    """The activator's own answer for ``exc``, head and body (:mod:`activator.statuses`)."""
    spec = status_of(exc)
    error = error_document(exc, detail)["error"]
    return error_head_and_body(
        spec.status,
        error_type=error["type"],
        code=error["code"],
        message=error["message"],
        request_id=request_id.encode() if isinstance(request_id, str) else request_id,
        retry_after_s=retry_after_s if spec.retry_after else None,
        close=close,
        http10=http10,
    )


class _ListModels(Exception):
    """``GET /v1/models`` that no route claims: the activator answers it itself."""

    def __init__(self, table: RoutingTable) -> None:
        self.table = table


def _json_answer(exchange: Exchange, document: object) -> None:
    """A 200 with a JSON body that the activator writes itself."""
    body = json.dumps(document).encode()
    conn = exchange.conn
    close = conn.must_close or not exchange.head.keep_alive or not exchange.body.done
    if close:
        conn.must_close = True
    head = client_response_head(
        200,
        b"OK",
        [(b"Content-Type", b"application/json")],
        request_id=exchange.request_id,
        content_length=len(body),
        chunked=False,
        close=close,
        http10=exchange.http10,
    )
    exchange.write(head if exchange.head.method == "HEAD" else head + body)


def _client_body_error(exc: BaseException) -> ProxyError:
    """The data path's body exceptions as the status table's."""
    return BodyTimeout() if isinstance(exc, http1.BodyStalled) else BodyTooLarge()


_ServeError = (ProxyError, HoldError, http1.BodyTooLarge, http1.BodyStalled, http1.RequestRejected)


def _as_answer(exc: Exception) -> Exception:
    """What :meth:`Proxy._fail` answers for one of ``_ServeError``."""
    if isinstance(exc, http1.BodyTooLarge | http1.BodyStalled):
        return _client_body_error(exc)
    return exc


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    allow_target_header: bool = False
    max_model_body_bytes: int = 8 * 1024 * 1024
    max_body_bytes: int = 0
    upstream_idle_s: float = 0.0
    retry_after_s: int = 1
    max_held_body_bytes: int = 256 * 1024 * 1024


class Proxy:
    """Serves each parsed request (an :class:`Exchange`): ``handle_now``, else ``handle``."""

    def __init__(
        self,
        *,
        registry: Registry,
        pool: http1.UpstreamPool,
        metrics: Metrics,
        options: ProxyOptions,
    ) -> None:
        self.registry = registry
        self.pool = pool
        self.metrics = metrics
        self.options = options
        self.draining = False
        self.held_bodies = HeldBodies(options.max_held_body_bytes)

    def handle_now(self, exchange: Exchange) -> bool:
        """Serve ``exchange`` by callbacks when nothing in it needs waiting; True if taken.

        The common case (a known target routed without the body, an endpoint
        with room, an idle pooled connection to it) needs no task: the request
        goes out now and :class:`_Forwarding` finishes it when the replica's
        answer ends. Anything else (refusals, routing by ``model``, holding,
        opening a connection, draining) is left to :meth:`handle`, which
        does the same steps with awaits, so every answer is decided in one
        place per step either way.
        """
        head = exchange.head
        path = head.target
        if self.draining or head.method == "CONNECT" or not path.startswith("/"):
            return False
        if is_denied(path):
            return False
        options = self.options
        if options.allow_target_header and _TARGET_HEADER in head.index:
            return False  # routed by the header: the task's work (rare, internal callers)
        target = self.registry.table.route_cached(head.index.get(b"host"), path)
        if target is None:
            return False
        gate = self.registry.gates.get(target)
        if gate is None:
            return False
        limit = options.max_body_bytes
        if limit:
            length = head.content_length
            if (length is not None and length > limit) or exchange.body.received > limit:
                return False
        tracker = gate.try_acquire()
        if tracker is None:
            return False
        conn = self.pool.take_idle(tracker.host, tracker.port)
        if conn is None:
            gate.release(tracker)  # opening a connection needs awaits: the task's work
            return False
        gate.arrive()
        started = time.perf_counter()  # see handle() for why not the loop's clock
        forwarding = _Forwarding(self, exchange, gate, tracker, conn, target, started)
        exchange.cancel = forwarding.cancel
        try:
            http1.send(
                conn,
                exchange,
                body=None,
                max_body_bytes=limit,
                idle_s=options.upstream_idle_s,
                strip=_STRIP,
                on_done=forwarding.done,
            )
        except BaseException:
            exchange.cancel = None
            forwarding.cancel()  # give back what was taken; the connection answers 500
            raise
        return True

    async def handle(self, exchange: Exchange) -> None:
        # The one exception to "every duration on the loop's clock": this only
        # feeds the latency histogram, whose buckets start at 1 ms, and
        # uvloop's loop clock counts whole milliseconds. Nothing acts on it.
        started = time.perf_counter()
        head = exchange.head
        target = ""
        try:
            if head.method == "CONNECT":
                raise ConnectRefused()
            if not head.target.startswith("/"):
                raise RefusedRequest()
            if is_denied(head.target):
                raise DeniedEndpoint()
            if self.draining:
                raise Draining()
            body, target = await self._route(exchange)
            gate = self.registry.gates.get(target)
            if gate is None:
                raise NoTarget()
            status = await self._serve(exchange, gate, body)
        except _ListModels as listing:
            _json_answer(exchange, listing.table.models_listing())
            status = 200
        except _ServeError as exc:
            self._fail(exchange, _as_answer(exc), target, started)
            return
        self.metrics.observe(target, status, time.perf_counter() - started)

    async def send_again(self, exchange: Exchange, *, gate: Gate, started: float) -> None:
        """The rest of a request :meth:`handle_now` sent that must go out once more."""
        try:
            status = await self._serve(exchange, gate, None, sent_again=True)
        except _ServeError as exc:
            self._fail(exchange, _as_answer(exc), gate.name, started)
            return
        self.metrics.observe(gate.name, status, time.perf_counter() - started)

    def resends(self, gate: Gate) -> bool:
        """Whether the model lets an unanswered request go out once more (its annotation)."""
        spec = self.registry.specs.get(gate.name)
        return spec.resend_unanswered if spec is not None else DEFAULT_RESEND_UNANSWERED

    def _sending_again(self, gate: Gate, tracker: EndpointTracker, exc: Exception) -> None:
        """A request goes back to waiting after ``tracker``'s replica closed without answering."""
        log.info("sending a request again: %s", exc)
        self.metrics.count_resent(gate.name)
        self.pool.drop_idle(tracker.host, tracker.port)

    def _fail(self, exchange: Exchange, exc: Exception, target: str, started: float) -> None:
        spec = status_of(exc)
        self.metrics.reject(target, spec.code)
        if exchange.started:
            exchange.cut()  # part of an answer went out: it cannot become a status
        else:
            detail = (
                str(exc)
                if isinstance(exc, UpstreamFailed | AllRefused | NoTarget | http1.RequestRejected)
                else ""
            )
            error = error_document(exc, detail)["error"]
            exchange.answer_error(
                spec.status,
                error_type=error["type"],
                code=error["code"],
                message=error["message"],
                retry_after_s=self.options.retry_after_s if spec.retry_after else None,
                close=isinstance(
                    exc, Draining | DrainEnded | BodyTimeout | BodyTooLarge | http1.RequestRejected
                ),
            )
        self.metrics.observe(target, spec.status, time.perf_counter() - started)

    async def _route(self, exchange: Exchange) -> tuple[bytes | None, str]:
        head = exchange.head
        table = self.registry.table
        header = head.text(_TARGET_HEADER) if self.options.allow_target_header else None
        target = table.route(host=head.host, path=head.target, header_target=header)
        if target is not None:
            return None, target
        if lists_models(head.method, head.target):
            raise _ListModels(table)
        if not table.wants_model(head.method, head.target):
            raise NoTarget()
        limit = self.options.max_model_body_bytes
        length = head.content_length
        if length is not None and length > limit:
            raise BodyTooLarge()
        body = await exchange.body.read_all(limit)
        try:
            document = json.loads(body)
        except (UnicodeDecodeError, ValueError, RecursionError):
            # RecursionError: JSON nested deeper than the interpreter's stack.
            raise BadBody() from None
        model = document.get("model") if isinstance(document, dict) else None
        if not isinstance(model, str) or not model:
            raise BadBody()
        target = table.by_model(model)
        if target is None:
            raise NoTarget(table.unknown_model(model))
        return body, target

    async def _serve(
        self, exchange: Exchange, gate: Gate, body: bytes | None, *, sent_again: bool = False
    ) -> int:
        """Hold for an endpoint, forward, and go back to waiting while the failures allow.

        ``sent_again``: the request already went out once and came back
        unanswered (:meth:`send_again`); it arrived then and is not sent a third time.
        """
        if not sent_again:
            gate.arrive()
        limit = self.options.max_body_bytes
        length = exchange.head.content_length
        if limit and length is not None and length > limit:
            raise BodyTooLarge()
        timeout_s = gate.cold_start_timeout_s
        loop = asyncio.get_running_loop()
        deadline = 0.0
        refused = 0
        held_bytes = len(body) if body else 0
        while True:
            tracker = gate.try_acquire()
            if tracker is None:
                now = loop.time()
                if not deadline:
                    deadline = now + timeout_s
                if gate.full:
                    # Before the body is counted as held: a full buffer is the answer.
                    raise BufferFull(gate.name)
                if not self.held_bodies.take(held_bytes):
                    raise HeldBodiesFull()
                try:
                    tracker = await gate.acquire(max(0.0, deadline - now))
                except ColdStartTimeout:
                    if refused:
                        raise AllRefused(f"{refused} connection attempt(s) refused") from None
                    raise
                finally:
                    self.held_bodies.give_back(held_bytes)
                self.metrics.observe_cold_wait(gate.name, loop.time() - now)
            try:
                return await http1.forward(
                    self.pool,
                    exchange,
                    host=tracker.host,
                    port=tracker.port,
                    body=body,
                    max_body_bytes=limit,
                    idle_s=self.options.upstream_idle_s,
                    strip=_STRIP,
                )
            except http1.NotSent as exc:
                answer = after_failure(
                    Failure.NOT_SENT, client_body=None, replica=tracker.label, what=str(exc)
                )
                if answer is not None:
                    raise answer from exc
                refused += 1
                gate.mark_down(tracker)
                if not deadline:
                    deadline = loop.time() + timeout_s
            except http1.UpstreamFailed as exc:
                can_send_again = (
                    _never
                    if sent_again or not self.resends(gate)
                    else functools.partial(_replayable, exchange, body)
                )
                status = _after_upstream_failed(exc, tracker.label, can_send_again)
                if status is not None:
                    return status
                sent_again = True
                self._sending_again(gate, tracker, exc)
            finally:
                gate.release(tracker)


def _never() -> bool:
    return False


def _replayable(exchange: Exchange, body: bytes | None) -> bool:
    """The request's whole body is still at hand: read whole (``body``), or kept and rewound."""
    return body is not None or exchange.body.rewind()


def _after_upstream_failed(
    exc: http1.UpstreamFailed, replica: str, can_send_again: Callable[[], bool]
) -> int | None:
    """The status to count for a replica that failed after bytes went out, None to send
    the request again, or the error to answer.

    ``can_send_again`` is asked only when the replica did not answer at all
    (it may rewind the client's body).
    """
    if exc.started:
        # The replica's head already went to the client; the cut
        # connection is the answer. Count it under that status.
        log.warning("replica %s failed mid-response: %s", replica, exc)
        return exc.status
    if exc.unanswered:
        failure, again = Failure.UNANSWERED, can_send_again()
    else:
        failure, again = Failure.SENT, False
    failed = after_failure(
        failure, client_body=None, replica=replica, what=str(exc), can_send_again=again
    )
    if failed is None:
        return None
    raise failed from exc


class _Forwarding:
    """One request :meth:`Proxy.handle_now` sent: its end, or its cancellation.

    What :meth:`Proxy.handle` does after ``await http1.forward(...)``, as the
    callback the replica connection calls: give back the connection and the
    endpoint, classify a failure, count the request, let the client
    connection go on.
    """

    __slots__ = ("conn", "exchange", "gate", "proxy", "started", "target", "tracker")

    def __init__(
        self,
        proxy: Proxy,
        exchange: Exchange,
        gate: Gate,
        tracker: EndpointTracker,
        conn: http1.UpstreamConnection,
        target: str,
        started: float,
    ) -> None:
        self.proxy = proxy
        self.exchange = exchange
        self.gate = gate
        self.tracker = tracker
        self.conn = conn
        self.target = target
        self.started = started

    def _release(self) -> None:
        # The client's body is detached by Exchange.finish, or in cancel().
        self.proxy.pool.release(self.conn)
        self.gate.release(self.tracker)

    def done(self, status: int, exc: BaseException | None) -> None:
        exchange = self.exchange
        exchange.cancel = None
        proxy = self.proxy
        try:
            self._release()
            if exc is not None:
                try:
                    if isinstance(exc, http1.UpstreamFailed):
                        again = _after_upstream_failed(
                            exc,
                            self.tracker.label,
                            exchange.body.rewind if proxy.resends(self.gate) else _never,
                        )
                        if again is None:
                            proxy._sending_again(self.gate, self.tracker, exc)
                            exchange.continue_in_task(
                                functools.partial(
                                    proxy.send_again, gate=self.gate, started=self.started
                                )
                            )
                            return
                        status = again
                    else:
                        raise exc
                except _ServeError as error:
                    proxy._fail(exchange, _as_answer(error), self.target, self.started)
                    exchange.finish()
                    return
            proxy.metrics.observe(self.target, status, time.perf_counter() - self.started)
        except Exception:
            exchange.handler_failed()
        exchange.finish()

    def cancel(self) -> None:
        """The client went away (or the server shuts): abandon the replica's answer."""
        self.conn.abort()
        self.exchange.body.detach()
        self._release()
