"""Small loopback servers for the load-test integration tests.

- :func:`openai_app`: a minimal OpenAI-compatible server (chat and plain
  completions, streamed as SSE or not) plus a KServe v2 ``infer`` route. It
  honours ``max_tokens`` exactly, sends one token per event with a fixed
  inter-token delay, ends streams with a usage event (when asked) and
  ``data: [DONE]``, and counts what it served. The sandbox's fake vLLM will
  replace it.
- :class:`FakeReplicas`: a toy stand-in for activator plus scaler, so the
  report has scale-out and scale-to-zero to draw: no replica until a
  request comes, a cold start during which requests are held, one replica
  per two requests in flight, and back to zero after an idle spell.
- :func:`kube_app`: the one Kubernetes API route the replicas sampler reads,
  ``GET /apis/apps/v1/namespaces/{ns}/deployments/{name}``, behind a bearer
  token, answering from a function so a test decides what it shows.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web


@dataclass
class ServedCounts:
    streamed: int = 0
    whole: int = 0
    triton: int = 0
    bad: int = 0
    last_request_at: float = 0.0
    in_flight: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)


COUNTS = web.AppKey("counts", ServedCounts)


class FakeReplicas:
    """Desired/ready replicas that follow the fake server's traffic (see the module docstring)."""

    def __init__(
        self, *, cold_start_s: float, idle_to_zero_s: float, max_replicas: int = 3
    ) -> None:
        self.cold_start_s = cold_start_s
        self.idle_to_zero_s = idle_to_zero_s
        self.max_replicas = max_replicas
        self.in_flight = 0
        self.last_active = -math.inf
        self.woke_at: float | None = None
        self.peak_desired = 0

    def counts(self) -> tuple[int, int]:
        now = time.monotonic()
        if self.in_flight == 0 and now - self.last_active >= self.idle_to_zero_s:
            self.woke_at = None
            return 0, 0
        if self.woke_at is None:
            self.woke_at = now
        desired = min(self.max_replicas, max(1, math.ceil(self.in_flight / 2)))
        self.peak_desired = max(self.peak_desired, desired)
        ready = desired if now - self.woke_at >= self.cold_start_s else 0
        return desired, ready

    async def hold(self) -> None:
        """Enter a request: wake the model and wait (as the activator would) for a replica."""
        self.in_flight += 1
        self.last_active = time.monotonic()
        while self.counts()[1] == 0:  # noqa: ASYNC110 (readiness is a function of time)
            await asyncio.sleep(0.05)

    def release(self) -> None:
        self.in_flight -= 1
        self.last_active = time.monotonic()


def openai_app(
    *,
    first_token_delay_s: float = 0.02,
    token_delay_s: float = 0.002,
    replicas: FakeReplicas | None = None,
) -> web.Application:
    app = web.Application()
    counts = ServedCounts()
    app[COUNTS] = counts

    async def completions(request: web.Request) -> web.StreamResponse:
        chat = request.path.endswith("/chat/completions")
        body = await request.json()
        counts.bodies.append(body)
        counts.last_request_at = time.monotonic()
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or max_tokens < 1 or body.get("ignore_eos") is not True:
            counts.bad += 1
            return web.json_response(
                {"error": {"message": "want max_tokens and ignore_eos"}}, status=400
            )
        counts.in_flight += 1
        try:
            if replicas is not None:
                await replicas.hold()  # increments its count at once, so release() balances it
            await asyncio.sleep(first_token_delay_s)
            if not body.get("stream"):
                await asyncio.sleep(token_delay_s * max_tokens)
                counts.whole += 1
                choice = {"index": 0, "finish_reason": "length"}
                choice.update(
                    {"message": {"role": "assistant", "content": "x" * max_tokens}}
                    if chat
                    else {"text": "x" * max_tokens}
                )
                return web.json_response(
                    {
                        "choices": [choice],
                        "usage": {"prompt_tokens": 10, "completion_tokens": max_tokens},
                    }
                )
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)

            async def send(payload: dict[str, Any]) -> None:
                await response.write(f"data: {json.dumps(payload)}\n\n".encode())

            if chat:
                await send(
                    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
                )
            for i in range(max_tokens):
                if i:
                    await asyncio.sleep(token_delay_s)
                delta = {"delta": {"content": "x"}} if chat else {"text": "x"}
                await send({"choices": [{"index": 0, **delta, "finish_reason": None}]})
            if (body.get("stream_options") or {}).get("include_usage"):
                await send(
                    {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": max_tokens}}
                )
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
            counts.streamed += 1
            return response
        finally:
            counts.in_flight -= 1
            if replicas is not None:
                replicas.release()

    async def infer(request: web.Request) -> web.Response:
        body = await request.json()
        counts.last_request_at = time.monotonic()
        names = [t.get("name") for t in body.get("inputs", [])]
        if "text_input" not in names:
            counts.bad += 1
            return web.json_response({"error": f"no text_input in {names}"}, status=400)
        await asyncio.sleep(first_token_delay_s)
        counts.triton += 1
        return web.json_response(
            {
                "model_name": request.match_info["model"],
                "outputs": [
                    {"name": "text_output", "datatype": "BYTES", "shape": [1], "data": ["x"]}
                ],
            }
        )

    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v2/models/{model}/infer", infer)
    return app


def kube_app(
    *, token: str, replicas: Callable[[], tuple[int, int | None]], names: tuple[str, ...] = ()
) -> web.Application:
    """``replicas()`` -> (spec.replicas, status.readyReplicas or None when absent);
    ``names``: the Deployments that exist (empty: any name)."""
    app = web.Application()

    async def deployment(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {token}":
            return web.json_response(
                {"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401},
                status=401,
            )
        if names and request.match_info["name"] not in names:
            return web.json_response(
                {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404},
                status=404,
            )
        desired, ready = replicas()
        status: dict[str, Any] = {"replicas": desired}
        if ready is not None:  # the API server leaves readyReplicas out at zero
            status["readyReplicas"] = ready
        return web.json_response(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": request.match_info["name"],
                    "namespace": request.match_info["ns"],
                },
                "spec": {"replicas": desired},
                "status": status,
            }
        )

    app.router.add_get("/apis/apps/v1/namespaces/{ns}/deployments/{name}", deployment)
    return app


def write_kubeconfig(path: Path, server: str, token: str, namespace: str = "default") -> Path:
    """A kubeconfig at ``path`` whose one context reaches ``server`` with ``token``."""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"contexts: [{{name: c, context: {{cluster: k, user: u, namespace: {namespace}}}}}]\n"
        f'clusters: [{{name: k, cluster: {{server: "{server}"}}}}]\n'
        f"users: [{{name: u, user: {{token: {token}}}}}]\n"
    )
    return path
