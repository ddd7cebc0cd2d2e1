"""The request path: one pipeline that routes, holds, forwards, streams back and answers.

:class:`Proxy` serves each request the data port parses
(:mod:`activator.http1`, the byte-level HTTP/1.1 data path) through one
sequence of steps:

1. refuse what would make it an open proxy: ``CONNECT`` and absolute-form
   request targets (``GET http://elsewhere/``); only endpoints of known
   targets are ever dialled, never an address from the request; refuse a
   replica's development endpoints, and new requests once draining;
2. route it (:mod:`activator.routing.table`): by header, host and path, else by
   the body's ``model`` (read whole, bounded); ``GET /v1/models`` that no
   route claims is answered here;
3. take the target's gate and an endpoint from it: at once when one has
   room, else held until one does (:mod:`activator.holding.gate`), a body over
   the limit refused first. While a request is held, a body it was not
   routed by waits in a bounded buffer and the kernel (reading pauses);
4. forward it over a pooled keep-alive connection with hop-by-hop headers
   removed and ``X-Forwarded-*`` and ``X-Request-Id`` set, streaming the
   request body as it arrives (:func:`activator.http1.send`);
5. relay the response as it arrives (server-sent events included). Only
   idle timeouts apply, never a total one, so a long generation is not cut.

The steps run synchronously (:meth:`Proxy.begin`, the connection's fast
handler) until the first one that must wait: reading a body to route by,
holding for an endpoint, opening a connection. The pipeline continues from
that step in a task (:meth:`Exchange.continue_in_task`); the steps before it
are not done again. Most requests never wait: they go out from the parser's
callback, and the replica connection's end-of-answer callback ends them
(:class:`_Forwarding`), with no task, future or wake-up. A step is written
once, so a refusal added to it holds on every path.

A connection that fails before any byte reached the replica (refused,
unreachable, connect timeout) marks that endpoint down and sends the request
back to step 3, within its cold-start deadline. So does, once, a replica
that closed or reset the connection before a byte of answer, when the
request's whole body is still at hand and the model allows it
(``routing.tidal.dev/resend-unanswered``; :mod:`activator.statuses` says
why): the pool's other idle connections to it are dropped, since it is most
likely shutting down, and the request goes out on a new connection, to it
or another. Otherwise, once bytes went out the request ends in 502, or in
408/413 when the cause was the client's own body (stalled past the idle
timeout, over the limit). A failure after the answer began (the replica died
mid-stream) cannot become a status: the client connection is closed, which
tells the client the truth.

While a request is held, a body it was routed by stays in memory; the sum
of such bodies is capped per activator (:mod:`activator.holding.held_bodies`).

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
from activator.balancing.prefix_key import PromptBlocks
from activator.holding.gate import BufferFull, ColdStartTimeout, DrainEnded, Gate, HoldError
from activator.holding.held_bodies import HeldBodies
from activator.http1 import Exchange
from activator.http1.heads import client_response_head, error_head_and_body
from activator.metrics import Metrics
from activator.replicas.denylist import is_denied
from activator.replicas.readiness import EndpointTracker
from activator.routing.registry import Registry
from activator.routing.table import TARGET_HEADER, RoutingTable, lists_models
from activator.statuses import (
    AllRefused,
    BadBody,
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


# What the pipeline answers itself, each class one row of the status table.
_ServeError = (ProxyError, HoldError, http1.BodyTooLarge, http1.BodyStalled, http1.RequestRejected)


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    allow_target_header: bool = False
    max_model_body_bytes: int = 8 * 1024 * 1024
    max_body_bytes: int = 0
    upstream_idle_s: float = 0.0
    retry_after_s: int = 1
    max_held_body_bytes: int = 256 * 1024 * 1024


class Proxy:
    """Serves each parsed request (an :class:`Exchange`) through the pipeline (module docstring)."""

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

    def begin(self, exchange: Exchange) -> bool:
        """Run the pipeline's steps on ``exchange`` synchronously, up to the first that must wait.

        The connection's fast handler: it always takes the exchange. Most
        requests need no waiting (routed without the body, an endpoint with
        room, an idle pooled connection to it): they go out now, and
        :class:`_Forwarding` ends them when the replica's answer ends, with
        no task. Otherwise the rest of the pipeline continues in a task
        from the step that must wait (:meth:`Exchange.continue_in_task`),
        the steps before it done once. An answer of the activator's own is
        written from a task too: it ends the exchange, and ending one here
        would start the next pipelined request inside this one's call.
        """
        started = time.perf_counter()
        target = ""
        try:
            routed = self._admit(exchange)
            if routed is None:
                exchange.continue_in_task(functools.partial(self._by_model, started=started))
                return True
            target = routed
            gate = self._gate(exchange, target)
        except (_ListModels, *_ServeError) as exc:
            exchange.continue_in_task(
                functools.partial(self._answer, exc=exc, target=target, started=started)
            )
            return True
        gate.arrive()
        tracker = gate.try_acquire()
        if tracker is not None:
            conn = self.pool.take_idle(tracker.host, tracker.port)
            if conn is not None:
                self._send(exchange, gate, tracker, conn, started)
                return True
            gate.release(tracker)  # opening a connection needs awaits
        exchange.continue_in_task(
            functools.partial(self._hold_and_forward, gate=gate, body=None, started=started)
        )
        return True

    async def serve(self, exchange: Exchange) -> None:
        """The whole pipeline in a task, for a connection that has no :meth:`begin`."""
        # The one exception to "every duration on the loop's clock": this only
        # feeds the latency histogram, whose buckets start at 1 ms, and
        # uvloop's loop clock counts whole milliseconds. Nothing acts on it.
        started = time.perf_counter()
        target = ""
        try:
            routed = self._admit(exchange)
            if routed is None:
                await self._by_model(exchange, started=started)
                return
            target = routed
            gate = self._gate(exchange, target)
        except (_ListModels, *_ServeError) as exc:
            await self._answer(exchange, exc=exc, target=target, started=started)
            return
        gate.arrive()
        await self._hold_and_forward(exchange, gate=gate, body=None, started=started)

    # -- the steps, in order -------------------------------------------------------

    def _admit(self, exchange: Exchange) -> str | None:
        """Steps 1 and 2 without the body: refuse, then route; None when the body decides.

        Raises :class:`ProxyError` for a refusal or no route, ``_ListModels``
        for a ``GET /v1/models`` that no route claims.
        """
        head = exchange.head
        path = head.target
        if head.method == "CONNECT":
            raise ConnectRefused()
        if not path.startswith("/"):
            raise RefusedRequest()
        if is_denied(path):
            raise DeniedEndpoint()
        if self.draining:
            raise Draining()
        table = self.registry.table
        if self.options.allow_target_header and _TARGET_HEADER in head.index:
            header = head.text(_TARGET_HEADER)
            target = table.route(host=head.host, path=path, header_target=header)
        else:
            target = table.route_cached(head.index.get(b"host"), path)
        if target is not None:
            return target
        if lists_models(head.method, path):
            raise _ListModels(table)
        if not table.wants_model(head.method, path):
            raise NoTarget()
        return None

    async def _by_model(self, exchange: Exchange, *, started: float) -> None:
        """Step 2 for a request routed by its body's ``model``, then the rest."""
        target = ""
        try:
            body, target, document = await self._route_by_model(exchange)
            gate = self._gate(exchange, target)
        except _ServeError as exc:
            self._fail(exchange, exc, target, started)
            return
        gate.arrive(document)
        await self._hold_and_forward(
            exchange, gate=gate, body=body, started=started, prompt=gate.prompt_of(document)
        )

    async def _route_by_model(self, exchange: Exchange) -> tuple[bytes, str, object]:
        """The body, read whole (bounded), the target its ``model`` names, and the
        parsed body (prefix-aware balancing reads its prompt without parsing again)."""
        limit = self.options.max_model_body_bytes
        length = exchange.head.content_length
        if length is not None and length > limit:
            raise http1.BodyTooLarge()
        body = await exchange.body.read_all(limit)
        try:
            document = json.loads(body)
        except (UnicodeDecodeError, ValueError, RecursionError):
            # RecursionError: JSON nested deeper than the interpreter's stack.
            raise BadBody() from None
        model = document.get("model") if isinstance(document, dict) else None
        if not isinstance(model, str) or not model:
            raise BadBody()
        table = self.registry.table
        target = table.by_model(model)
        if target is None:
            raise NoTarget(table.unknown_model(model))
        return body, target, document

    def _gate(self, exchange: Exchange, target: str) -> Gate:
        """Step 3: the target's gate, once the body is known to be within the limit."""
        gate = self.registry.gates.get(target)
        if gate is None:
            raise NoTarget()
        limit = self.options.max_body_bytes
        if limit:
            length = exchange.head.content_length
            if (length is not None and length > limit) or exchange.body.received > limit:
                raise http1.BodyTooLarge()
        return gate

    def _send(
        self,
        exchange: Exchange,
        gate: Gate,
        tracker: EndpointTracker,
        conn: http1.UpstreamConnection,
        started: float,
    ) -> None:
        """Step 4 by callbacks: send over ``conn`` now; :class:`_Forwarding` ends it."""
        forwarding = _Forwarding(self, exchange, gate, tracker, conn, gate.name, started)
        exchange.cancel = forwarding.cancel
        try:
            http1.send(
                conn,
                exchange,
                body=None,
                max_body_bytes=self.options.max_body_bytes,
                idle_s=self.options.upstream_idle_s,
                strip=_STRIP,
                on_done=forwarding.done,
            )
        except BaseException:
            exchange.cancel = None
            forwarding.cancel()  # give back what was taken; the connection answers 500
            raise

    async def _hold_and_forward(
        self,
        exchange: Exchange,
        *,
        gate: Gate,
        body: bytes | None,
        started: float,
        sent_again: bool = False,
        prompt: PromptBlocks | None = None,
    ) -> None:
        """Steps 3 to 5 with awaits: hold for an endpoint, forward, relay, answer failures.

        ``prompt``: what a prefix-balanced model picks a replica by (None: by load)."""
        try:
            status = await self._forward(exchange, gate, body, sent_again=sent_again, prompt=prompt)
        except _ServeError as exc:
            self._fail(exchange, exc, gate.name, started)
            return
        self.metrics.observe(gate.name, status, time.perf_counter() - started)

    async def _answer(
        self, exchange: Exchange, *, exc: Exception, target: str, started: float
    ) -> None:
        """The activator's own answer to a request refused or not routed (or the model list)."""
        if isinstance(exc, _ListModels):
            _json_answer(exchange, exc.table.models_listing())
            self.metrics.observe(target, 200, time.perf_counter() - started)
        else:
            self._fail(exchange, exc, target, started)

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
                    exc,
                    Draining
                    | DrainEnded
                    | http1.BodyStalled
                    | http1.BodyTooLarge
                    | http1.RequestRejected,
                ),
            )
        self.metrics.observe(target, spec.status, time.perf_counter() - started)

    async def _forward(
        self,
        exchange: Exchange,
        gate: Gate,
        body: bytes | None,
        *,
        sent_again: bool = False,
        prompt: PromptBlocks | None = None,
    ) -> int:
        """Hold for an endpoint, forward, and go back to waiting while the failures allow.

        ``sent_again``: the request already went out once and came back
        unanswered; it is not sent a third time.
        """
        limit = self.options.max_body_bytes
        timeout_s = gate.cold_start_timeout_s
        loop = asyncio.get_running_loop()
        deadline = 0.0
        refused = 0
        held_bytes = len(body) if body else 0
        while True:
            tracker = gate.try_acquire(prompt)
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
            except http1.ReplicaFailed as exc:
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
    exc: http1.ReplicaFailed, replica: str, can_send_again: Callable[[], bool]
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
    """One request :meth:`Proxy.begin` sent: its end, or its cancellation.

    What :meth:`Proxy._hold_and_forward` does after ``await
    http1.forward(...)``, as the callback the replica connection calls: give
    back the connection and the endpoint, classify a failure, count the
    request, let the client connection go on, or send it again from a task.
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
                    if isinstance(exc, http1.ReplicaFailed):
                        again = _after_upstream_failed(
                            exc,
                            self.tracker.label,
                            exchange.body.rewind if proxy.resends(self.gate) else _never,
                        )
                        if again is None:
                            proxy._sending_again(self.gate, self.tracker, exc)
                            exchange.continue_in_task(
                                functools.partial(
                                    proxy._hold_and_forward,
                                    gate=self.gate,
                                    body=None,
                                    started=self.started,
                                    sent_again=True,
                                )
                            )
                            return
                        status = again
                    else:
                        raise exc
                except _ServeError as error:
                    proxy._fail(exchange, error, self.target, self.started)
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
