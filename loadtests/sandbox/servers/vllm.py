"""A vLLM-like OpenAI-compatible server on the continuous-batching model.

Endpoints, in vLLM's shapes: ``POST /v1/completions`` and
``POST /v1/chat/completions`` (with and without ``stream``; server-sent
events in the OpenAI chunk format ending in ``data: [DONE]``;
``stream_options.include_usage``, and vLLM's ``continuous_usage_stats``:
the usage so far in every chunk), ``GET /v1/models``, ``GET /health``,
``GET /version``, ``GET /metrics`` (vLLM's names, label ``model_name``), and
``GET /sandbox/gpu`` (busy time and framebuffer used for the DCGM-like
exporter; not vLLM's).

Sleep mode (``--enable-sleep-mode``; the endpoints exist only when the
process also has ``VLLM_SERVER_DEV_MODE=1``, as in vLLM): ``POST
/sleep?level=1|2``, ``POST /wake_up`` (``tags=weights``/``tags=kv_cache``),
``GET /is_sleeping``, ``POST /collective_rpc`` (``reload_weights``) and
``POST /reset_prefix_cache``. A sleeping server answers inference with 503,
as vLLM does; the state, timings and GPU memory are ``sleep_mode``'s.

Automatic prefix caching, as vLLM does by default: each full block of
``--block-size`` tokens (16) of the prompt is hashed with the blocks before
it (:mod:`loadtests.sandbox.servers.prompt_blocks`); the engine serves the
longest cached run of leading blocks without prefilling it and keeps blocks
in LRU order within its KV cache. ``vllm:prefix_cache_queries`` and
``vllm:prefix_cache_hits`` count prompt tokens looked up and found, as
vLLM's V1 engine does.

There is no tokenizer: token counts follow a stated rule, the one the
activator and the scaler estimate prompts by, so every count in the sandbox
agrees; the usage in every answer counts by it (docs/sandbox.md says so for
users, and loadtests/guidellm/ builds a tokenizer for GuideLLM that counts
about the same). Reading a request is :mod:`~.vllm_requests`, writing its
answer (whole or streamed) :mod:`~.vllm_answers`, the metrics
:mod:`~.vllm_metrics`.

Main decision: a request is refused before it reaches the engine when it is
malformed (400, vLLM's words), names a model not served (404), finds the
model asleep (503) or draws an injected fault; one admitted holds its
adapter's slot until its answer ends, whatever the answer's fate.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from loadtests.sandbox.servers.engine_app import RuntimeApp, ServerConfig
from loadtests.sandbox.servers.engine_runtime import LlmRuntime
from loadtests.sandbox.servers.faults import FaultInjector
from loadtests.sandbox.servers.kv_events import KvEventFeed
from loadtests.sandbox.servers.lora import (
    LoraEndpoints,
    LoraInfoCollector,
    LoraState,
    model_permission,
)
from loadtests.sandbox.servers.sleep_endpoints import SleepEndpoints, SleepStateCollector
from loadtests.sandbox.servers.vllm_answers import answer_stream, answer_whole
from loadtests.sandbox.servers.vllm_errors import error_response
from loadtests.sandbox.servers.vllm_metrics import VllmMetrics
from loadtests.sandbox.servers.vllm_requests import BadRequest, Job, RequestReader

__all__ = ["VllmApp"]

MAX_BODY_BYTES = 16 * 1024 * 1024


class VllmApp(RuntimeApp[LlmRuntime]):
    """The aiohttp application and the engine behind it."""

    listen_before_ready = False

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        # Several names, comma-separated, as vLLM's --served-model-name takes
        # several: each is accepted and listed, the first labels the metrics.
        self.names = tuple(n.strip() for n in config.model.split(",") if n.strip())
        self.registry = CollectorRegistry(auto_describe=False)
        self.metrics = VllmMetrics(self.registry, self.names[0])
        runtime = LlmRuntime(config.llm, speedup=config.speedup, observer=self.metrics)
        self.metrics.bind(runtime)
        self.faults = FaultInjector(config.faults)
        self._created = int(time.time())
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/metrics", self.metrics_endpoint)
        app.router.add_get("/sandbox/gpu", self.gpu)
        self.lora = LoraState(config.lora, sleep=self._model_sleep)
        if config.lora.enable_lora:
            self.registry.register(LoraInfoCollector(self.lora))
        LoraEndpoints(self.lora).add_routes(app)
        self._reader = RequestReader(
            names=self.names,
            serves_adapter=self.lora.serves,
            max_model_len=config.max_model_len,
            block_tokens=config.llm.prefix_block_tokens,
            mean_output_tokens=config.mean_output_tokens,
            rng=random.Random(config.seed),
        )
        if config.kv_events:
            app.router.add_get("/kv_events", KvEventFeed(runtime.engine).handle)
        self._inflight = 0
        self.sleep_mode = SleepEndpoints(
            config.sleep,
            gpu_ledger_dir=config.gpu_ledger_dir,
            host_ledger_dir=config.host_ledger_dir,
            host_memory_mib=config.host_memory_mib,
            busy=self._busy,
            pause=self._model_sleep,
            reset_prefix_cache=runtime.engine.kv.reset_prefix_cache,
        )
        self.sleep = self.sleep_mode.machine
        self.sleep_mode.add_routes(app, enabled=config.enable_sleep_mode)
        if config.enable_sleep_mode:
            self.registry.register(SleepStateCollector(self.sleep, self.names[0]))
        super().__init__(app=app, runtime=runtime)

    def start_engine(self) -> None:
        self.sleep_mode.start()
        super().start_engine()

    async def stop_engine(self) -> None:
        await super().stop_engine()
        self.sleep_mode.stop()

    def fb_used_mib(self) -> int | None:
        return self.sleep.gpu_mib()

    def fb_total_mib(self) -> int | None:
        return self.config.sleep.gpu_memory_mib or None

    def sandbox_state(self) -> dict[str, float | int | str]:
        state: dict[str, float | int | str] = {
            "sleep_level": self.sleep.level if self.sleep.sleeping else 0,
            "host_mib": self.sleep.host_mib(),
        }
        if self.config.device:
            state["device"] = self.config.device
        return state

    def _busy(self) -> bool:
        engine = self.runtime.engine
        return self._inflight > 0 or engine.num_running > 0 or engine.num_waiting > 0

    async def _model_sleep(self, model_s: float) -> None:
        if model_s > 0:
            await asyncio.sleep(self.runtime.clock.to_wall_s(model_s))

    # --- plain endpoints ------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.8.5+tidal.sandbox"})

    async def models(self, request: web.Request) -> web.Response:
        cards = [
            {
                "id": name,
                "object": "model",
                "created": self._created,
                "owned_by": "vllm",
                "root": self.names[0],
                "parent": None,
                "max_model_len": self.config.max_model_len,
                "permission": [model_permission(self._created)],
            }
            for name in self.names
        ]
        cards += self.lora.cards(parent=self.names[0], created=self._created)
        return web.json_response({"object": "list", "data": cards})

    async def metrics_endpoint(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    # --- inference ------------------------------------------------------------------

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=True)

    async def _serve(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error_response("the request body is not valid JSON", status=400)
        try:
            job = self._reader.read(body, chat=chat)
        except BadRequest as e:
            return error_response(str(e), status=e.status, param=e.param)
        if not self.sleep.serving:
            why = (
                "weights were dropped by a level-2 sleep and not reloaded"
                if not self.sleep.sleeping
                else "the model is sleeping"
            )
            return error_response(f"Service unavailable: {why}", status=503)
        if self.faults.should_fail():
            return error_response(
                "fault injection: this request fails on purpose",
                status=self.config.faults.fail_status,
            )
        self._inflight += 1
        try:
            # The first request after a wake finds cold caches (vLLM's post:
            # 4.12 s against 0.96 s after a one-token warm-up).
            await self._model_sleep(self.sleep.take_penalty(job.output_tokens))
            if job.adapter is not None:
                await self.lora.admit(job.adapter)
            try:
                return await self._run(request, job, chat=chat)
            finally:
                if job.adapter is not None:
                    await self.lora.release(job.adapter)
        finally:
            self._inflight -= 1

    async def _run(self, request: web.Request, job: Job, *, chat: bool) -> web.StreamResponse:
        try:
            stream = self.runtime.submit(
                prompt_tokens=job.prompt_tokens,
                output_tokens=job.output_tokens,
                prefix=job.blocks,
            )
            self.metrics.queried(job.prompt_tokens)
        except ValueError as e:  # does not fit the KV cache
            return error_response(str(e), status=400)
        request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        try:
            if job.stream:
                return await answer_stream(
                    job,
                    stream,
                    request,
                    chat=chat,
                    request_id=request_id,
                    break_at=self.faults.break_after(job.output_tokens),
                    cancel=self.runtime.cancel,
                )
            return await answer_whole(job, stream, chat=chat, request_id=request_id)
        finally:
            if not stream.done:
                self.runtime.cancel(stream)
