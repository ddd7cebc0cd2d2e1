"""vLLM's Prometheus metrics, as the fake vLLM serves them on ``GET /metrics``.

vLLM's names, help texts, label (``model_name``, the first served name) and
histogram buckets: requests running and waiting and KV-cache usage (gauges
read from the engine when scraped), time to first token, end-to-end latency,
successes, prompt and generation tokens, and the prefix cache's queries and
hits in tokens, counted as vLLM's V1 engine counts them.

Main decision: hits are counted when a request is admitted, always before
its first token and after its query, so hits never run ahead of queries.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from loadtests.sandbox.servers.engine_runtime import LlmRuntime, TokenStream
from simulator.engine import LlmEngine

__all__ = ["E2E_BUCKETS", "TTFT_BUCKETS", "VllmMetrics"]

# vLLM's bucket boundaries for these two histograms.
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
    60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


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
        self.kv_usage.labels(model_name=self.model).set_function(lambda: engine.kv.usage)

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
            cached = self._engine.kv.cached_tokens
            self._hits.inc(cached - self._hits_seen)
            self._hits_seen = cached

    def tokens(self, count: int) -> None:
        self._generation.inc(count)

    def finished(self, stream: TokenStream, e2e_s: float) -> None:
        self._e2e.observe(e2e_s)
        self._success.inc()
