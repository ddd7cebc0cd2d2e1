"""The request path: route, hold, forward, stream back, and map failures to statuses.

For each request :class:`Proxy` does, in order:

1. refuse what would make it an open proxy: ``CONNECT`` and absolute-form
   request targets (``GET http://elsewhere/``); only endpoints of known
   targets are ever dialled, never an address from the request;
2. route it (:mod:`activator.routing`); the body is read, bounded, only to
   route by ``model``;
3. take an endpoint from the target's gate: at once when one has room,
   else held until one does (:mod:`activator.buffering`);
4. forward it with hop-by-hop headers removed and ``X-Forwarded-*`` and
   ``X-Request-Id`` set, streaming the request body chunk by chunk;
5. relay the response as it arrives (server-sent events included). Only
   idle timeouts apply, never a total one, so a long generation is not cut.

A connection that fails before any byte reached the replica (refused,
unreachable, connect timeout) marks that endpoint down and sends the request
back to step 3, within its cold-start deadline. Once bytes went out the
request is never retried: it ends in 502, or in 408/413 when the cause was
the client's own body (stalled past the idle timeout, over the limit).

While a request is held, a body it was routed by stays in memory; the sum
of such bodies is capped per activator (:mod:`activator.held_bodies`).

What status to answer, and whether to go back to waiting, is decided in
:mod:`activator.statuses` (its table lists every status); this module only
classifies aiohttp's exceptions and writes the answer. Small responses (a
``Content-Length`` up to a limit) are relayed with one write; everything
else is streamed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import aiohttp
from aiohttp import hdrs, web
from multidict import CIMultiDict, istr
from yarl import URL

from activator.buffering import BufferFull, ColdStartTimeout, DrainEnded, Gate, HoldError
from activator.denylist import is_denied
from activator.held_bodies import HeldBodies
from activator.metrics import Metrics
from activator.readiness import EndpointTracker
from activator.registry import Registry
from activator.routing import TARGET_HEADER, RoutingTable, lists_models
from activator.statuses import (
    ERROR_STATUS,
    AllRefused,
    BadBody,
    BodyTimeout,
    BodyTooLarge,
    ConnectRefused,
    DeniedEndpoint,
    Draining,
    ErrorStatus,
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

__all__ = [
    "ERROR_STATUS",
    "HOP_BY_HOP",
    "AllRefused",
    "BadBody",
    "BodyTimeout",
    "BodyTooLarge",
    "ConnectRefused",
    "Draining",
    "ErrorStatus",
    "HeldBodiesFull",
    "NoTarget",
    "Proxy",
    "ProxyOptions",
    "RefusedRequest",
    "UpstreamFailed",
    "error_response",
    "forward_headers",
    "response_headers",
]

log = logging.getLogger(__name__)

# X-Request-Id when the client sent none: 16 random bytes per process, then a
# counter. Unique like a random id, without a getrandom() call per request.
_ID_PREFIX = os.urandom(8).hex()
_id_counter = itertools.count(1)

# Upstream URLs by (endpoint base, raw path): small hot sets of paths repeat
# (/v1/chat/completions), and yarl's parsing is a measurable part of a small
# request. Bounded: cleared when it grows past _URL_CACHE_MAX.
_URL_CACHE_MAX = 1024
_url_cache: dict[tuple[str, str], URL] = {}


def _upstream_url(base: str, raw_path: str) -> URL:
    key = (base, raw_path)
    url = _url_cache.get(key)
    if url is None:
        if len(_url_cache) >= _URL_CACHE_MAX:
            _url_cache.clear()
        url = _url_cache[key] = URL(base + raw_path, encoded=True)
    return url


class _ListModels(Exception):
    """``GET /v1/models`` that no route claims: the activator answers it itself."""

    def __init__(self, table: RoutingTable) -> None:
        self.table = table


class _NotSent(Exception):
    """No byte reached the replica; the request may wait for another."""


HOP_BY_HOP = frozenset(
    istr(h)
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
    )
)
_SKIP_REQUEST = HOP_BY_HOP | {
    istr("Host"),
    istr("Content-Length"),
    istr(TARGET_HEADER),
    istr("X-Forwarded-For"),
}
_SKIP_RESPONSE = HOP_BY_HOP | {istr("Content-Length")}
_REQUEST_ID = istr("X-Request-Id")


def error_response(
    exc: Exception, *, request_id: str | None = None, retry_after_s: int = 1, detail: str = ""
) -> web.Response:
    """The activator's own response for ``exc`` (:mod:`activator.statuses` decides it)."""
    spec = status_of(exc)
    body = error_document(exc, detail)
    headers = {}
    if spec.retry_after:
        headers["Retry-After"] = str(retry_after_s)
    if request_id:
        headers["X-Request-Id"] = request_id
    return web.Response(
        status=spec.status,
        body=json.dumps(body).encode(),
        content_type="application/json",
        headers=headers,
    )


def _connection_tokens(headers: Mapping[str, str]) -> frozenset[istr]:
    value = headers.get(hdrs.CONNECTION)
    if not value:
        return frozenset()
    return frozenset(istr(t.strip()) for t in value.split(",") if t.strip())


def forward_headers(request: web.BaseRequest, request_id: str) -> CIMultiDict[str]:
    """Request headers for the replica: hop-by-hop out, X-Forwarded-* and X-Request-Id in."""
    src = request.headers
    out: CIMultiDict[str] = CIMultiDict()
    add = out.add
    skip = _SKIP_REQUEST | _connection_tokens(src) if hdrs.CONNECTION in src else _SKIP_REQUEST
    for key, value in src.items():
        if key not in skip:
            add(key, value)
    peer = request.remote or ""
    prior = src.get(hdrs.X_FORWARDED_FOR)
    out[hdrs.X_FORWARDED_FOR] = f"{prior}, {peer}" if prior else peer
    if hdrs.X_FORWARDED_PROTO not in out:
        out[hdrs.X_FORWARDED_PROTO] = request.scheme
    if hdrs.X_FORWARDED_HOST not in out and request.host:
        out[hdrs.X_FORWARDED_HOST] = src.get(hdrs.HOST, request.host)
    out[_REQUEST_ID] = request_id
    if request.content_length is not None:
        out[hdrs.CONTENT_LENGTH] = str(request.content_length)
    return out


def response_headers(upstream: Mapping[str, str], request_id: str) -> CIMultiDict[str]:
    out: CIMultiDict[str] = CIMultiDict()
    add = out.add
    if hdrs.CONNECTION in upstream:
        skip = _SKIP_RESPONSE | _connection_tokens(upstream)
    else:
        skip = _SKIP_RESPONSE
    for key, value in upstream.items():
        if key not in skip:
            add(key, value)
    if _REQUEST_ID not in out:
        out[_REQUEST_ID] = request_id
    return out


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    allow_target_header: bool = False
    max_model_body_bytes: int = 8 * 1024 * 1024
    max_body_bytes: int = 0
    client_body_idle_s: float = 60.0
    small_response_bytes: int = 65536
    retry_after_s: int = 1
    max_held_body_bytes: int = 256 * 1024 * 1024


class Proxy:
    """The data port's one handler."""

    def __init__(
        self,
        *,
        registry: Registry,
        session: aiohttp.ClientSession,
        metrics: Metrics,
        options: ProxyOptions,
    ) -> None:
        self.registry = registry
        self.session = session
        self.metrics = metrics
        self.options = options
        self.draining = False
        self.held_bodies = HeldBodies(options.max_held_body_bytes)

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        # The one exception to "every duration on the loop's clock": this only
        # feeds the latency histogram, whose buckets start at 1 ms, and
        # uvloop's loop clock counts whole milliseconds. Nothing acts on it.
        started = time.perf_counter()
        request_id = request.headers.get(_REQUEST_ID) or f"{_ID_PREFIX}{next(_id_counter):016x}"
        target = ""
        try:
            if request.method == hdrs.METH_CONNECT:
                raise ConnectRefused()
            raw_path = request.raw_path
            if not raw_path.startswith("/"):
                raise RefusedRequest()
            if is_denied(raw_path):
                raise DeniedEndpoint()
            if self.draining:
                raise Draining()
            body, target = await self._route(request, raw_path)
            gate = self.registry.gates.get(target)
            if gate is None:
                raise NoTarget()
            response = await self._serve(request, gate, raw_path, body, request_id)
        except _ListModels as listing:
            response = web.json_response(
                listing.table.models_listing(), headers={_REQUEST_ID: request_id}
            )
        except (ProxyError, HoldError) as exc:
            return self._fail(exc, target, started, request_id)
        self.metrics.observe(target, response.status, time.perf_counter() - started)
        return response

    def _fail(self, exc: Exception, target: str, started: float, request_id: str) -> web.Response:
        self.metrics.reject(target, status_of(exc).code)
        response = error_response(
            exc,
            request_id=request_id,
            retry_after_s=self.options.retry_after_s,
            detail=str(exc) if isinstance(exc, UpstreamFailed | AllRefused | NoTarget) else "",
        )
        if isinstance(exc, Draining | DrainEnded):
            response.force_close()
        self.metrics.observe(target, response.status, time.perf_counter() - started)
        return response

    async def _route(self, request: web.BaseRequest, raw_path: str) -> tuple[bytes | None, str]:
        table = self.registry.table
        header = request.headers.get(TARGET_HEADER) if self.options.allow_target_header else None
        target = table.route(host=request.host, path=raw_path, header_target=header)
        if target is not None:
            return None, target
        if lists_models(request.method, raw_path):
            raise _ListModels(table)
        if not table.wants_model(request.method, raw_path):
            raise NoTarget()
        body = await self._read_bounded(request, self.options.max_model_body_bytes)
        try:
            document = json.loads(body)
        except (UnicodeDecodeError, ValueError):
            raise BadBody() from None
        model = document.get("model") if isinstance(document, dict) else None
        if not isinstance(model, str) or not model:
            raise BadBody()
        target = table.by_model(model)
        if target is None:
            raise NoTarget(table.unknown_model(model))
        return body, target

    async def _read_bounded(self, request: web.BaseRequest, limit: int) -> bytes:
        length = request.content_length
        if length is not None and length > limit:
            raise BodyTooLarge()
        chunks: list[bytes] = []
        size = 0
        idle_s = self.options.client_body_idle_s
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(idle_s) as cm:
                while True:
                    chunk = await request.content.readany()
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > limit:
                        raise BodyTooLarge()
                    chunks.append(chunk)
                    cm.reschedule(loop.time() + idle_s)
        except TimeoutError:
            raise BodyTimeout() from None
        return b"".join(chunks)

    async def _serve(
        self,
        request: web.BaseRequest,
        gate: Gate,
        raw_path: str,
        body: bytes | None,
        request_id: str,
    ) -> web.StreamResponse:
        gate.arrive()
        limit = self.options.max_body_bytes
        if limit and request.content_length is not None and request.content_length > limit:
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
                return await self._forward(request, tracker, raw_path, body, request_id)
            except _NotSent:
                refused += 1
                gate.mark_down(tracker)
                if not deadline:
                    deadline = loop.time() + timeout_s
            finally:
                gate.release(tracker)

    async def _forward(
        self,
        request: web.BaseRequest,
        tracker: EndpointTracker,
        raw_path: str,
        body: bytes | None,
        request_id: str,
    ) -> web.StreamResponse:
        headers = forward_headers(request, request_id)
        data: object = None
        client_body: _ClientBody | None = None
        if body is not None:
            data = body
            headers[hdrs.CONTENT_LENGTH] = str(len(body))
        elif request.body_exists:
            client_body = _ClientBody()
            data = self._body_stream(request, client_body)
        url = _upstream_url(tracker.base_url, raw_path)
        try:
            upstream = await self.session.request(
                request.method,
                url,
                headers=headers,
                data=data,
                allow_redirects=False,
                skip_auto_headers=_SKIP_AUTO,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            answer = after_failure(
                _failure_of(exc),
                client_body=client_body.error if client_body is not None else None,
                replica=tracker.label,
                what=type(exc).__name__,
            )
            if answer is None:
                raise _NotSent() from exc
            raise answer from exc
        try:
            return await self._relay(request, upstream, request_id, tracker)
        finally:
            upstream.release()

    async def _relay(
        self,
        request: web.BaseRequest,
        upstream: aiohttp.ClientResponse,
        request_id: str,
        tracker: EndpointTracker,
    ) -> web.StreamResponse:
        headers = response_headers(upstream.headers, request_id)
        length = upstream.content_length
        if (
            length is not None
            and length <= self.options.small_response_bytes
            and request.method != hdrs.METH_HEAD
        ):
            try:
                payload = await upstream.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise UpstreamFailed(f"{tracker.label}: {type(exc).__name__}") from exc
            return web.Response(
                status=upstream.status, reason=upstream.reason, headers=headers, body=payload
            )
        response = web.StreamResponse(
            status=upstream.status, reason=upstream.reason, headers=headers
        )
        if length is not None:
            response.content_length = length
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Headers are gone already: the client sees the stream cut, which
            # is the truth. Closing the connection makes that unambiguous.
            log.warning("replica %s failed mid-response: %r", tracker.label, exc)
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write_eof()
        return response

    async def _body_stream(
        self, request: web.BaseRequest, failed: _ClientBody
    ) -> AsyncIterator[bytes]:
        """The client's body, chunk by chunk, each wait bounded by the idle timeout.

        aiohttp's client reports an exception raised here as a connection
        error of its own; ``failed`` keeps the real cause for the answer.
        """
        idle_s = self.options.client_body_idle_s
        limit = self.options.max_body_bytes
        size = 0
        content = request.content
        while True:
            try:
                async with asyncio.timeout(idle_s):
                    chunk = await content.readany()
            except TimeoutError:
                failed.error = BodyTimeout()
                raise failed.error from None
            if not chunk:
                return
            size += len(chunk)
            if limit and size > limit:
                failed.error = BodyTooLarge()
                raise failed.error
            yield chunk


class _ClientBody:
    """Where a streamed client body records why it failed, if it did."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: ProxyError | None = None


def _failure_of(exc: BaseException) -> Failure:
    """aiohttp's exceptions -> did any byte reach the replica?"""
    # A connect timeout is a ConnectionTimeoutError, not a ClientConnectorError:
    # both mean the connection never opened.
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError):
        return Failure.NOT_SENT
    return Failure.SENT


_SKIP_AUTO = frozenset({hdrs.USER_AGENT, hdrs.ACCEPT_ENCODING, hdrs.ACCEPT, hdrs.CONTENT_TYPE})
