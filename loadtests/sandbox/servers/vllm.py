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
agrees. A prompt counts one token per four characters, rounded up (the
usual rule of thumb for English), a chat message four more for its
template, and three for the reply's; token-id prompts count their ids. The
usage in every answer counts by it (docs/sandbox.md says so for users, and
loadtests/guidellm/ builds a tokenizer for GuideLLM that counts about the
same). Output length: ``max_tokens`` exactly with
``ignore_eos`` (what benchmarks send), otherwise a natural length drawn per
request (mean ``mean_output_tokens``) and capped by ``max_tokens``, ending with
``finish_reason`` ``stop`` or ``length`` accordingly. The text is words from a
fixed list, one per token.

Main decision, for cost: every chunk of a stream is three byte strings
joined (a prefix and suffix built once per request around a pre-encoded
word); several tokens that arrived together go out in one write.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from loadtests.sandbox.servers.engine_app import RuntimeApp, ServerConfig
from loadtests.sandbox.servers.engine_runtime import LlmRuntime, TokenStream
from loadtests.sandbox.servers.faults import FaultInjector
from loadtests.sandbox.servers.kv_events import KvEventFeed
from loadtests.sandbox.servers.lora import (
    LoraEndpoints,
    LoraInfoCollector,
    LoraState,
    model_permission,
)
from loadtests.sandbox.servers.prompt_blocks import chat_blocks, prompt_blocks
from loadtests.sandbox.servers.sleep_endpoints import SleepEndpoints, SleepStateCollector
from loadtests.sandbox.servers.vllm_errors import error_response
from simulator.engine import LlmEngine

__all__ = ["VllmApp", "VllmMetrics", "count_prompt_tokens"]

# vLLM's bucket boundaries for these two histograms.
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
    60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

_TEXT = (
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "model",
    "servers", "batch", "tokens", "on", "simulated", "GPUs", "and", "nobody", "waits", "too",
    "long", "for", "an", "answer",
)  # fmt: skip
WORDS = tuple(f" {w}".encode() for w in _TEXT)  # one token each, JSON-safe as they are
CHARS_PER_TOKEN = 4
CHAT_TOKENS_PER_MESSAGE = 4
MAX_BODY_BYTES = 16 * 1024 * 1024


class VllmMetrics:
    """vLLM's Prometheus metrics in a registry of this server's own."""

    def __init__(self, registry: CollectorRegistry, model: str) -> None:
        labels = ["model_name"]
        self.model = model
        self.num_running = Gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            labels,
            registry=registry,
        )
        self.num_waiting = Gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            labels,
            registry=registry,
        )
        self.kv_usage = Gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            labels,
            registry=registry,
        )
        ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            labels,
            buckets=TTFT_BUCKETS,
            registry=registry,
        )
        e2e = Histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            labels,
            buckets=E2E_BUCKETS,
            registry=registry,
        )
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels,
            registry=registry,
        )
        prompt = Counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=registry
        )
        generation = Counter(
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            labels,
            registry=registry,
        )
        queries = Counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            labels,
            registry=registry,
        )
        hits = Counter(
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            labels,
            registry=registry,
        )
        self._queries = queries.labels(model_name=model)
        self._hits = hits.labels(model_name=model)
        self._hits_seen = 0
        self._engine: LlmEngine | None = None
        self._ttft = ttft.labels(model_name=model)
        self._e2e = e2e.labels(model_name=model)
        self._success = success.labels(model_name=model)
        self._prompt = prompt.labels(model_name=model)
        self._generation = generation.labels(model_name=model)

    def bind(self, runtime: LlmRuntime) -> None:
        """Gauges read the engine when scraped."""
        engine = runtime.engine
        self._engine = engine
        self.num_running.labels(model_name=self.model).set_function(lambda: engine.num_running)
        self.num_waiting.labels(model_name=self.model).set_function(lambda: engine.num_waiting)
        self.kv_usage.labels(model_name=self.model).set_function(lambda: engine.kv_usage)

    def queried(self, prompt_tokens: int) -> None:
        """A request reached the engine: its prompt is looked up in the prefix cache."""
        self._queries.inc(prompt_tokens)

    # LlmObserver
    def first_token(self, stream: TokenStream, ttft_s: float) -> None:
        self._ttft.observe(ttft_s)
        self._prompt.inc(stream.prompt_tokens)
        if self._engine is not None:
            # Hits are counted when a request is admitted, always before its
            # first token and after its query: hits never run ahead of queries.
            cached = self._engine.cached_tokens
            self._hits.inc(cached - self._hits_seen)
            self._hits_seen = cached

    def tokens(self, count: int) -> None:
        self._generation.inc(count)

    def finished(self, stream: TokenStream, e2e_s: float) -> None:
        self._e2e.observe(e2e_s)
        self._success.inc()


class BadRequest(Exception):
    def __init__(self, message: str, *, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


def count_prompt_tokens(prompt: object, *, param: str = "prompt") -> int:
    """Tokens in a completions prompt: a string, token ids, or a one-element list of either."""
    if isinstance(prompt, str):
        return max(1, math.ceil(len(prompt) / CHARS_PER_TOKEN))
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return len(prompt)
    if isinstance(prompt, list) and len(prompt) == 1:
        return count_prompt_tokens(prompt[0], param=param)
    if isinstance(prompt, list) and len(prompt) > 1:
        raise BadRequest(
            f"this fake vLLM serves one prompt per request; got a batch of {len(prompt)} prompts",
            param=param,
        )
    raise BadRequest(
        "prompt must be a non-empty string, a list of token ids, or a one-element list of those",
        param=param,
    )


def count_chat_tokens(messages: object) -> int:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list of messages", param="messages")
    chars = 0
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise BadRequest(f"messages[{i}] must be an object with a role", param="messages")
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    chars += len(part["text"])
        elif content is not None:
            raise BadRequest(
                f"messages[{i}].content must be a string or a list of parts", param="messages"
            )
    return math.ceil(chars / CHARS_PER_TOKEN) + CHAT_TOKENS_PER_MESSAGE * len(messages) + 3


@dataclass(frozen=True, slots=True)
class _Job:
    prompt_tokens: int
    output_tokens: int
    finish_reason: str
    stream: bool
    include_usage: bool
    model: str  # the served name the request asked for (the first when it named none)
    blocks: tuple[bytes, ...] = ()  # the prompt's chained block hashes
    adapter: str | None = None  # the LoRA adapter the request named
    # stream_options.continuous_usage_stats: every chunk carries the usage so far.
    continuous_usage: bool = False


class _Chunks:
    """Pre-built bytes for one request's stream."""

    def __init__(self, *, chat: bool, request_id: str, created: int, model: str) -> None:
        head = (
            f'{{"id":"{request_id}","object":"'
            f'{"chat.completion.chunk" if chat else "text_completion"}",'
            f'"created":{created},"model":{json.dumps(model)},'
        )
        self.head = head
        if chat:
            self.prefix = f'data: {head}"choices":[{{"index":0,"delta":{{"content":"'.encode()
            self.suffix = b'"},"logprobs":null,"finish_reason":null}]}\n\n'
            self.role = (
                f'data: {head}"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},'
                '"logprobs":null,"finish_reason":null}]}\n\n'
            ).encode()
            self.last_suffix = b'"},"logprobs":null,"finish_reason":"%s","stop_reason":null}]}\n\n'
        else:
            self.prefix = f'data: {head}"choices":[{{"index":0,"text":"'.encode()
            self.suffix = b'","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
            self.role = b""
            self.last_suffix = b'","logprobs":null,"finish_reason":"%s","stop_reason":null}]}\n\n'

    @staticmethod
    def with_usage(suffix: bytes, prompt: int, completion: int) -> bytes:
        """A chunk's ``suffix`` carrying the usage so far (``continuous_usage_stats``)."""
        usage = json.dumps(_usage(prompt, completion), separators=(",", ":")).encode()
        return suffix[: -len(b"}\n\n")] + b',"usage":' + usage + b"}\n\n"

    def usage(self, prompt: int, completion: int) -> bytes:
        usage = _usage(prompt, completion)
        return f'data: {self.head}"choices":[],"usage":{json.dumps(usage)}}}\n\n'.encode()


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
    }


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
        self._rng = random.Random(config.seed)
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
            reset_prefix_cache=runtime.engine.reset_prefix_cache,
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
            job = self._parse(body, chat=chat)
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

    async def _run(self, request: web.Request, job: _Job, *, chat: bool) -> web.StreamResponse:
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
                return await self._stream(request, stream, job, chat=chat, request_id=request_id)
            return await self._whole(stream, job, chat=chat, request_id=request_id)
        finally:
            if not stream.done:
                self.runtime.cancel(stream)

    def _parse(self, body: Any, *, chat: bool) -> _Job:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        model = body.get("model")
        if model is not None and model not in self.names and not self.lora.serves(model):
            raise BadRequest(f"The model `{model}` does not exist.", status=404, param="model")
        block_size = self.config.llm.prefix_block_tokens
        block_chars = block_size * CHARS_PER_TOKEN
        if chat:
            prompt_tokens = count_chat_tokens(body.get("messages"))
            blocks = chat_blocks(body["messages"], block_chars)
        else:
            if "prompt" not in body:
                raise BadRequest("prompt is required", param="prompt")
            prompt_tokens = count_prompt_tokens(body["prompt"])
            blocks = prompt_blocks(body["prompt"], block_size, block_chars)
        n = body.get("n", 1)
        if n != 1:
            raise BadRequest(f"this fake vLLM supports n=1 only; got n={n!r}", param="n")
        max_len = self.config.max_model_len
        key = "max_tokens"
        max_tokens = body.get("max_tokens")
        if chat and max_tokens is None and body.get("max_completion_tokens") is not None:
            key, max_tokens = "max_completion_tokens", body["max_completion_tokens"]
        if max_tokens is None:
            # vLLM: completions default to 16 tokens, chat to the rest of the context.
            max_tokens = max_len - prompt_tokens if chat else 16
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise BadRequest(f"{key} must be an integer >= 1; got {max_tokens!r}", param=key)
        if prompt_tokens + max_tokens > max_len:
            raise BadRequest(
                f"This model's maximum context length is {max_len} tokens. However, you "
                f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the "
                f"messages, {max_tokens} in the completion). Please reduce the length of the "
                "messages or completion.",
                param=key,
            )
        if body.get("ignore_eos", False):
            output = max_tokens
        else:
            natural = max(1, round(self._rng.expovariate(1.0 / self.config.mean_output_tokens)))
            output = min(max_tokens, natural)
        stream = bool(body.get("stream", False))
        options = body.get("stream_options")
        if options is not None and not isinstance(options, dict):
            raise BadRequest("stream_options must be an object", param="stream_options")
        include_usage = bool(options and options.get("include_usage"))
        continuous = bool(options and options.get("continuous_usage_stats"))
        if (include_usage or continuous) and not stream:
            raise BadRequest(
                "stream_options may only be set when stream is true", param="stream_options"
            )
        return _Job(
            prompt_tokens=prompt_tokens,
            output_tokens=output,
            finish_reason="length" if output == max_tokens else "stop",
            stream=stream,
            include_usage=include_usage,
            continuous_usage=include_usage and continuous,
            model=model if isinstance(model, str) else self.names[0],
            blocks=blocks,
            adapter=model if isinstance(model, str) and model not in self.names else None,
        )

    async def _whole(
        self, stream: TokenStream, job: _Job, *, chat: bool, request_id: str
    ) -> web.Response:
        while not stream.done:
            await stream.wait_beyond(stream.emitted)
        text = b"".join(WORDS[i % len(WORDS)] for i in range(job.output_tokens)).decode()
        choice: dict[str, Any]
        if chat:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "tool_calls": []},
                "logprobs": None,
                "finish_reason": job.finish_reason,
                "stop_reason": None,
            }
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": job.finish_reason,
                "stop_reason": None,
            }
        return web.json_response(
            {
                "id": request_id,
                "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()),
                "model": job.model,
                "choices": [choice],
                "usage": _usage(job.prompt_tokens, job.output_tokens),
            }
        )

    async def _stream(
        self, request: web.Request, stream: TokenStream, job: _Job, *, chat: bool, request_id: str
    ) -> web.StreamResponse:
        chunks = _Chunks(
            chat=chat, request_id=request_id, created=int(time.time()), model=job.model
        )
        break_at = self.faults.break_after(job.output_tokens)
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
            }
        )
        await resp.prepare(request)
        sent = 0
        total = job.output_tokens
        words, n_words = WORDS, len(WORDS)
        prefix, suffix = chunks.prefix, chunks.suffix
        last_suffix = chunks.last_suffix % job.finish_reason.encode()
        while sent < total:
            await stream.wait_beyond(sent)
            upto = stream.emitted
            if break_at is not None and upto >= break_at:
                # Fault: reset the connection mid-stream, as a dying server would.
                self.runtime.cancel(stream)
                if request.transport is not None:
                    request.transport.abort()
                return resp
            parts = [chunks.role] if sent == 0 and chat else []
            for i in range(sent, upto):
                parts.append(prefix)
                parts.append(words[i % n_words])
                end = last_suffix if i == total - 1 else suffix
                if job.continuous_usage:
                    end = chunks.with_usage(end, job.prompt_tokens, i + 1)
                parts.append(end)
            sent = upto
            if sent >= total:
                if job.include_usage:
                    parts.append(chunks.usage(job.prompt_tokens, total))
                parts.append(b"data: [DONE]\n\n")
            try:
                await resp.write(b"".join(parts))
            except ConnectionResetError:
                return resp  # the client left; the caller frees its place
        await resp.write_eof()
        return resp
