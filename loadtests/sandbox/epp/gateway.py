"""The fake endpoint picker's HTTP side: the gateway clients call, and the metrics endpoint.

In a real cluster a Gateway (Envoy) takes the request, asks the EPP over
ext_proc which endpoint should serve it, waits while the EPP's flow control
holds it, then proxies it there. The fake is both in one process: clients
send their OpenAI-style requests to :class:`Gateway`'s port and get the
model server's answer, streamed, or the router's answer when flow control
dropped the request (:mod:`~loadtests.sandbox.epp.answers`). The router's
metrics are served on a port of their own, as the EPP serves them
(``/metrics``, its 9090).

What a request is labelled with, as the router reads it:

- its priority: the ``priority`` of the objective named by the
  ``x-llm-d-inference-objective`` header (or its older alias
  ``x-gateway-inference-objective``), from the objectives the fake was given;
  a request naming none, or an unknown one, has priority 0;
- its fairness flow: the ``x-llm-d-inference-fairness-id`` header (or
  ``x-gateway-inference-fairness-id``), else ``default-flow``;
- its model: the JSON body's ``model``; its size: the body's bytes; its
  prompt tokens: estimated from the body as the activator estimates them.

Main decision: the body is read whole before flow control (the router
needs it to pick), bounded by ``max_body_bytes`` (413 beyond it); the
answer is streamed chunk by chunk, and the request's room on its endpoint
is given back however the answer ends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import aiohttp
from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from activator.balancing.prefix_key import estimated_tokens
from loadtests.sandbox.epp.answers import DROPPED_REASON, UPSTREAM_REFUSED, Answer, answer_for
from loadtests.sandbox.epp.flow_controller import Admission, FlowController
from loadtests.sandbox.epp.router_metrics import RequestLabels
from scaler.signals.epp_metrics import DISPATCHED

__all__ = ["DEFAULT_FAIRNESS_ID", "Gateway", "metrics_app"]

DEFAULT_FAIRNESS_ID = "default-flow"
_OBJECTIVE_HEADERS = ("x-llm-d-inference-objective", "x-gateway-inference-objective")
_FAIRNESS_HEADERS = ("x-llm-d-inference-fairness-id", "x-gateway-inference-fairness-id")
# Hop-by-hop headers (RFC 9110, 7.6.1) and those the proxy sets itself.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


def _first(headers: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = headers.get(name)
        if value:
            return value
    return None


def _forwarded(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _HOP}


def _plain(answer: Answer) -> web.Response:
    response = web.Response(status=answer.status, text=answer.body)
    if answer.reason:
        response.headers[DROPPED_REASON] = answer.reason
    return response


class Gateway:
    """The client-facing proxy: flow control first, then the chosen endpoint."""

    def __init__(
        self,
        controller: FlowController,
        *,
        objectives: Mapping[str, int] | None = None,
        max_body_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.controller = controller
        self.objectives = dict(objectives or {})
        self.max_body_bytes = max_body_bytes
        self._session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, _app: web.Application) -> None:
        # No total timeout: a generation may stream for minutes; reads are bounded.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=600)
        self._session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    def labels(self, request: web.Request, document: object) -> RequestLabels:
        objective = _first(request.headers, _OBJECTIVE_HEADERS)
        model = document.get("model") if isinstance(document, dict) else None
        return RequestLabels(
            pool=self.controller.pool,
            model=model if isinstance(model, str) else "",
            fairness_id=_first(request.headers, _FAIRNESS_HEADERS) or DEFAULT_FAIRNESS_ID,
            priority=self.objectives.get(objective or "", 0),
        )

    async def handle(self, request: web.Request) -> web.StreamResponse:
        arrived = asyncio.get_running_loop().time()
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return web.Response(status=413, text="request body too large")
        try:
            document: object = json.loads(body) if body else None
        except ValueError:
            document = None
        admission = await self.controller.enqueue_and_wait(
            self.labels(request, document),
            size_bytes=len(body),
            tokens=estimated_tokens(document)[0],
        )
        if admission.outcome != DISPATCHED or admission.endpoint is None:
            return _plain(answer_for(admission.outcome))
        try:
            return await self._forward(request, body, admission, arrived, document)
        finally:
            self.controller.done(admission)

    async def _forward(
        self,
        request: web.Request,
        body: bytes,
        admission: Admission,
        arrived: float,
        document: object,
    ) -> web.StreamResponse:
        assert self._session is not None
        assert admission.endpoint is not None
        url = admission.endpoint.url + request.path_qs
        streaming = isinstance(document, dict) and document.get("stream") is True
        try:
            upstream = await self._session.request(
                request.method, url, data=body, headers=_forwarded(request.headers)
            )
        except aiohttp.ClientConnectionError:
            return _plain(UPSTREAM_REFUSED)
        async with upstream:
            response = web.StreamResponse(
                status=upstream.status, reason=upstream.reason, headers=_forwarded(upstream.headers)
            )
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            await response.prepare(request)
            first = True
            async for chunk in upstream.content.iter_any():
                if first and chunk:
                    first = False
                    seconds = asyncio.get_running_loop().time() - arrived
                    # A non-streaming answer's first byte is its whole answer.
                    self.controller.metrics.first_token(
                        admission.labels, streaming=streaming, seconds=seconds
                    )
                await response.write(chunk)
            await response.write_eof()
            return response


def metrics_app(controller: FlowController) -> web.Application:
    """The EPP's metrics endpoint: ``GET /metrics``."""

    async def metrics(_request: web.Request) -> web.Response:
        body = generate_latest(controller.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app
