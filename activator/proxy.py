"""The request path's one entry: :meth:`Proxy.handle` takes each parsed request and serves it.

The HTTP layer (:mod:`activator.http1`, the byte-level HTTP/1.1 data path)
parses a request into an :class:`~activator.http1.Exchange` and hands it to
:meth:`Proxy.handle`, its one call into the proxy; what comes back is written
to the exchange: an answer of the activator's own, or the replica's answer
relayed as a stream. The steps, in order, each written once:

1. refuse what would make it an open proxy: ``CONNECT`` and absolute-form
   request targets (``GET http://elsewhere/``); only endpoints of known
   targets are ever dialled, never an address from the request; refuse a
   replica's development endpoints, and new requests once draining;
2. route it (:mod:`activator.routing.table`): by header, host and path, else by
   the body's ``model`` (read whole, bounded, in a task); ``GET /v1/models``,
   ``GET /v1/models/{id}`` and the other routes clients probe a model server
   with (``/health``, ``/ping``, ``/version``:
   :mod:`activator.routing.server_probes`) that no route claims are answered
   here; a body over the limit is refused;
3. to 5. (:mod:`activator.forwarding`): take an endpoint from the
   target, at once when one has room, else held until one does
   (:mod:`activator.holding.target`); forward over a pooled keep-alive
   connection with hop-by-hop headers removed and ``X-Forwarded-*`` and
   ``X-Request-Id`` set, streaming the request body as it arrives
   (:func:`activator.http1.send`); relay the response as it arrives
   (server-sent events included). Only idle timeouts apply, never a total
   one, so a long generation is not cut.

Most requests never wait: routed without the body, an endpoint with room
and an idle connection to it, they go out from the parser's callback, and
the replica connection's end-of-answer callback ends them, with no task,
future or wake-up. A step that must wait (reading a body to route by,
holding for an endpoint, opening a connection) runs in a task, and the
request then goes on through the same steps as one that did not wait.

While a request is held, a body it was not routed by waits in a bounded
buffer and the kernel (reading pauses); a body it was routed by stays in
memory, and the sum of such bodies is capped per activator
(:mod:`activator.holding.held_bodies`).

What status to answer, and whether to go back to waiting, is decided in
:mod:`activator.statuses` (its table lists every status); every answer of the
activator's own is written by :class:`activator.forwarding.Answers`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from activator import http1
from activator.forwarding import SERVE_ERRORS, Answers, Forwarder, Forwarding, in_task
from activator.holding.held_bodies import HeldBodies
from activator.holding.target import Target
from activator.http1 import Exchange
from activator.http1.heads import error_head_and_body
from activator.metrics import Metrics
from activator.replicas.denylist import is_denied
from activator.routing.model_body import model_of
from activator.routing.registry import Registry
from activator.routing.server_probes import probe_answer, probes
from activator.routing.table import TARGET_HEADER, lists_models, retrieved_model
from activator.statuses import (
    ConnectRefused,
    DeniedEndpoint,
    Draining,
    NoAdapter,
    NoTarget,
    RefusedRequest,
    error_document,
    status_of,
)

__all__ = ["Proxy", "ProxyOptions", "error_response"]

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


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    allow_target_header: bool = False
    max_model_body_bytes: int = 8 * 1024 * 1024
    max_body_bytes: int = 0
    upstream_idle_s: float = 0.0
    retry_after_s: int = 1
    max_held_body_bytes: int = 256 * 1024 * 1024


class Proxy:
    """Serves each parsed request (an :class:`Exchange`) through the steps (module docstring)."""

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
        self.answers = Answers(metrics, options.retry_after_s)
        self.forwarder = Forwarder(
            pool,
            self.answers,
            self.held_bodies,
            max_body_bytes=options.max_body_bytes,
            upstream_idle_s=options.upstream_idle_s,
            strip=_STRIP,
        )

    def handle(self, exchange: Exchange) -> None:
        """Serve ``exchange``: the HTTP layer's one call into the proxy; it always takes it.

        Synchronous up to the first step that must wait, which goes on in a
        task; the exchange is ended (:meth:`Exchange.finish`) when its answer
        is complete, from whichever callback or task completes it.
        """
        # The one exception to "every duration on the loop's clock": this only
        # feeds the latency histogram, whose buckets start at 1 ms, and
        # uvloop's loop clock counts whole milliseconds. Nothing acts on it.
        started = time.perf_counter()
        try:
            target = self._route(exchange)
        except SERVE_ERRORS as exc:
            self.answers.fail(exchange, exc, "", started)
            exchange.finish()
            return
        if target is None:
            head, table = exchange.head, self.registry.table
            model = retrieved_model(head.method, head.target)
            if lists_models(head.method, head.target):
                self.answers.json(exchange, table.models_listing(), "", started)
                exchange.finish()
            elif (probe := probe_answer(head.method, head.target)) is not None:
                self.answers.own(exchange, probe, "", started)
                exchange.finish()
            elif model is not None:
                entry = table.model_entry(model)
                if entry is None:
                    self.answers.fail(exchange, NoTarget(table.unknown_model(model)), "", started)
                else:
                    self.answers.json(exchange, entry, "", started)
                exchange.finish()
            else:
                in_task(exchange, lambda: self._route_by_model(exchange, started))
            return
        forwarding = Forwarding(self.forwarder, exchange, target, started)
        if not forwarding.send_now():
            in_task(exchange, forwarding.wait_and_send)

    # -- steps 1 and 2 -------------------------------------------------------------

    def _route(self, exchange: Exchange) -> Target | None:
        """Steps 1 and 2 without the body: refuse, then route; None when the body decides
        (or for the model list, which no route claims).

        Raises :class:`ProxyError` for a refusal or no route, ``BodyTooLarge``
        for a body over the limit.
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
            name = table.route(host=head.host, path=path, header_target=header)
        else:
            name = table.route_cached(head.index.get(b"host"), path)
        if name is not None:
            return self._target(exchange, name)
        if not (
            lists_models(head.method, path)
            or retrieved_model(head.method, path) is not None
            or probes(head.method, path)
            or table.wants_model(head.method, path)
        ):
            raise NoTarget()
        return None

    async def _route_by_model(self, exchange: Exchange, started: float) -> None:
        """Step 2 for a request routed by its body's ``model``, then the rest."""
        name = ""
        try:
            body, name, document = await self._read_model(exchange)
            target = self._target(exchange, name)
        except SERVE_ERRORS as exc:
            exchange.cancel = None
            self.answers.fail(exchange, exc, name, started)
            exchange.finish()
            return
        forwarding = Forwarding(self.forwarder, exchange, target, started, body, document)
        if not forwarding.send_now():
            await forwarding.wait_and_send()

    async def _read_model(self, exchange: Exchange) -> tuple[bytes, str, object]:
        """The body, read whole (bounded), the target its ``model`` names, and the
        parsed body (prefix-aware balancing reads its prompt without parsing again)."""
        limit = self.options.max_model_body_bytes
        length = exchange.head.content_length
        if length is not None and length > limit:
            raise http1.BodyTooLarge()
        body = await exchange.body.read_all(limit)
        document, model = model_of(body)  # a BadBody that says what is wrong
        table = self.registry.table
        name = table.by_model(model)
        if name is None:
            if table.parents:
                raise NoAdapter(table.unknown_adapter(model))
            raise NoTarget(table.unknown_model(model))
        return body, name, document

    def _target(self, exchange: Exchange, name: str) -> Target:
        """The routed target, once the body is known to be within the limit."""
        target = self.registry.targets.get(name)
        if target is None:
            raise NoTarget()
        limit = self.options.max_body_bytes
        if limit:
            length = exchange.head.content_length
            if (length is not None and length > limit) or exchange.body.received > limit:
                raise http1.BodyTooLarge()
        return target
