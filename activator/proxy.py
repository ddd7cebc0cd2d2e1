"""The request path: route, hold, forward, stream back, and map failures to statuses.

:class:`Proxy` serves each request the data port parses
(:mod:`activator.http1`, the byte-level HTTP/1.1 data path). For each it
does, in order:

1. refuse what would make it an open proxy: ``CONNECT`` and absolute-form
   request targets (``GET http://elsewhere/``); only endpoints of known
   targets are ever dialled, never an address from the request;
2. route it (:mod:`activator.routing`); the body is read, bounded, only to
   route by ``model``;
3. take an endpoint from the target's gate: at once when one has room,
   else held until one does (:mod:`activator.buffering`). While held, the
   client's body waits in the kernel and a bounded buffer (reading pauses);
4. forward it over a pooled keep-alive connection, with hop-by-hop headers
   removed and ``X-Forwarded-*`` and ``X-Request-Id`` set, streaming the
   request body as it arrives (:func:`activator.http1.forward`);
5. relay the response as it arrives, body bytes as the replica framed them
   (server-sent events included). Only idle timeouts apply, never a total
   one, so a long generation is not cut.

A connection that fails before any byte reached the replica (refused,
unreachable, connect timeout) marks that endpoint down and sends the request
back to step 3, within its cold-start deadline. Once bytes went out the
request is never retried: it ends in 502.

Every failure the activator answers itself is an exception, and
:data:`ERROR_STATUS` is the one table that turns exceptions into statuses,
each with a JSON body in the OpenAI error shape:

=====================  ======  =======================================
exception              status  when
=====================  ======  =======================================
NoTarget, GateClosed    404    no target matches (or it was removed)
BadBody                 400    body must be parsed for ``model``, is not JSON
BodyStalled             408    the client stalled sending its body
BodyTooLarge            413    body over the limit
BufferFull              503    ``max_buffered`` requests already held
Draining                503    shutting down
ColdStartTimeout        504    no replica ready within the cold-start timeout
AllRefused              502    timed out after every replica tried refused
UpstreamFailed          502    bytes reached a replica that then failed
RefusedRequest          400    absolute-form target (not a forward proxy)
ConnectRefused          405    CONNECT (not a tunnel)
=====================  ======  =======================================

503s carry ``Retry-After``. A failure after the answer began (the replica
died mid-stream, the client's body went over the limit while the replica
was already answering) cannot become a status: the client connection is
closed, which tells the client the truth.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass

from activator import http1
from activator.buffering import BufferFull, ColdStartTimeout, Gate, GateClosed, HoldError
from activator.http1 import BodyStalled, BodyTooLarge, Exchange
from activator.http1.heads import error_head_and_body
from activator.metrics import Metrics
from activator.registry import Registry
from activator.routing import TARGET_HEADER

__all__ = [
    "ERROR_STATUS",
    "AllRefused",
    "BadBody",
    "BodyStalled",
    "BodyTooLarge",
    "ConnectRefused",
    "Draining",
    "ErrorStatus",
    "NoTarget",
    "Proxy",
    "ProxyOptions",
    "RefusedRequest",
    "UpstreamFailed",
    "error_response",
]

log = logging.getLogger(__name__)

_TARGET_HEADER = TARGET_HEADER.lower().encode()
_STRIP = frozenset({_TARGET_HEADER})


class ProxyError(Exception):
    """A request the activator answers itself."""


class NoTarget(ProxyError):
    pass


class BadBody(ProxyError):
    pass


class Draining(ProxyError):
    pass


class AllRefused(ProxyError):
    pass


class UpstreamFailed(ProxyError):
    pass


class RefusedRequest(ProxyError):
    pass


class ConnectRefused(ProxyError):
    pass


@dataclass(frozen=True, slots=True)
class ErrorStatus:
    status: int
    type: str
    code: str  # also the metrics' rejection reason
    message: str
    retry_after: bool = False


ERROR_STATUS: dict[type[Exception], ErrorStatus] = {
    NoTarget: ErrorStatus(404, "not_found_error", "no_target", "no target matches this request"),
    GateClosed: ErrorStatus(404, "not_found_error", "no_target", "the target was removed"),
    BadBody: ErrorStatus(
        400, "invalid_request_error", "bad_body", "the body must be a JSON object with a 'model'"
    ),
    BodyStalled: ErrorStatus(
        408,
        "invalid_request_error",
        "body_timeout",
        "the client stopped sending the request body",
    ),
    BodyTooLarge: ErrorStatus(
        413, "invalid_request_error", "body_too_large", "the request body is over the limit"
    ),
    BufferFull: ErrorStatus(
        503,
        "overloaded_error",
        "buffer_full",
        "too many requests are waiting for this model",
        retry_after=True,
    ),
    Draining: ErrorStatus(
        503, "unavailable_error", "draining", "the activator is shutting down", retry_after=True
    ),
    ColdStartTimeout: ErrorStatus(
        504, "timeout_error", "cold_start_timeout", "no replica became ready in time"
    ),
    AllRefused: ErrorStatus(
        502, "upstream_error", "all_refused", "every ready replica refused the connection"
    ),
    UpstreamFailed: ErrorStatus(
        502, "upstream_error", "upstream_failed", "the replica failed while handling the request"
    ),
    RefusedRequest: ErrorStatus(
        400,
        "invalid_request_error",
        "refused_request",
        "absolute-form request targets are refused: this is not a forward proxy",
    ),
    ConnectRefused: ErrorStatus(
        405, "invalid_request_error", "refused_request", "CONNECT is refused: this is not a tunnel"
    ),
}


def _status_of(exc: Exception) -> ErrorStatus:
    return ERROR_STATUS.get(type(exc)) or ERROR_STATUS[UpstreamFailed]


def error_response(
    exc: Exception,
    *,
    request_id: str | bytes,
    retry_after_s: int = 1,
    detail: str = "",
    close: bool = False,
    http10: bool = False,
) -> bytes:
    """The one mapping from an exception to the activator's own answer (head and body)."""
    spec = _status_of(exc)
    rid = request_id.encode() if isinstance(request_id, str) else request_id
    return error_head_and_body(
        spec.status,
        error_type=spec.type,
        code=spec.code,
        message=spec.message + (f": {detail}" if detail else ""),
        request_id=rid,
        retry_after_s=retry_after_s if spec.retry_after else None,
        close=close,
        http10=http10,
    )


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    allow_target_header: bool = False
    max_model_body_bytes: int = 8 * 1024 * 1024
    max_body_bytes: int = 0
    upstream_idle_s: float = 0.0
    retry_after_s: int = 1


class Proxy:
    """The data port's one handler: serves each parsed request (an :class:`Exchange`)."""

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

    async def handle(self, exchange: Exchange) -> None:
        started = time.perf_counter()
        head = exchange.head
        target = ""
        try:
            if head.method == "CONNECT":
                raise ConnectRefused()
            if not head.target.startswith("/"):
                raise RefusedRequest()
            if self.draining:
                raise Draining()
            body, target = await self._route(exchange)
            gate = self.registry.gates.get(target)
            if gate is None:
                raise NoTarget()
            status = await self._serve(exchange, gate, body)
        except (ProxyError, HoldError, BodyTooLarge, BodyStalled) as exc:
            self._fail(exchange, exc, target, started)
            return
        self.metrics.observe(target, status, time.perf_counter() - started)

    def _fail(self, exchange: Exchange, exc: Exception, target: str, started: float) -> None:
        spec = _status_of(exc)
        self.metrics.reject(target, spec.code)
        if exchange.started:
            exchange.cut()  # part of an answer went out: it cannot become a status
        else:
            close = isinstance(exc, Draining | BodyTooLarge | BodyStalled)
            exchange.answer_error(
                spec.status,
                error_type=spec.type,
                code=spec.code,
                message=spec.message
                + (f": {exc}" if isinstance(exc, UpstreamFailed | AllRefused) else ""),
                retry_after_s=self.options.retry_after_s if spec.retry_after else None,
                close=close,
            )
        self.metrics.observe(target, spec.status, time.perf_counter() - started)

    async def _route(self, exchange: Exchange) -> tuple[bytes | None, str]:
        head = exchange.head
        table = self.registry.table
        header = head.text(_TARGET_HEADER) if self.options.allow_target_header else None
        target = table.route(host=head.host, path=head.target, header_target=header)
        if target is not None:
            return None, target
        if not table.wants_model(head.method, head.target):
            raise NoTarget()
        limit = self.options.max_model_body_bytes
        length = head.content_length
        if length is not None and length > limit:
            raise BodyTooLarge()
        body = await exchange.body.read_all(limit)
        try:
            document = json.loads(body)
        except (UnicodeDecodeError, ValueError):
            raise BadBody() from None
        if not isinstance(document, dict):
            raise BadBody()
        target = table.by_model(document.get("model"))
        if target is None:
            raise NoTarget()
        return body, target

    async def _serve(self, exchange: Exchange, gate: Gate, body: bytes | None) -> int:
        gate.arrivals += 1
        limit = self.options.max_body_bytes
        length = exchange.head.content_length
        if limit and length is not None and length > limit:
            raise BodyTooLarge()
        timeout_s = gate.cold_start_timeout_s
        loop = asyncio.get_running_loop()
        deadline = 0.0
        refused = 0
        while True:
            tracker = gate.try_acquire()
            if tracker is None:
                now = loop.time()
                if not deadline:
                    deadline = now + timeout_s
                try:
                    tracker = await gate.acquire(max(0.0, deadline - now))
                except ColdStartTimeout:
                    if refused:
                        raise AllRefused(f"{refused} connection attempt(s) refused") from None
                    raise
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
            except http1.NotSent:
                refused += 1
                gate.endpoints.mark_down(tracker)
                if not deadline:
                    deadline = loop.time() + timeout_s
            except http1.UpstreamFailed as exc:
                if exc.started:
                    # The replica's head already went to the client; the cut
                    # connection is the answer. Count it under that status.
                    log.warning("replica %s failed mid-response: %s", tracker.label, exc)
                    return exc.status
                raise UpstreamFailed(str(exc)) from exc
            finally:
                gate.release(tracker)
