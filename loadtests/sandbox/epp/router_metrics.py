"""The fake endpoint picker's ``/metrics``: llm-d's router's series, under its names and labels.

Every family the scaler's reader reads (:data:`scaler.signals.epp_metrics.FAMILIES`,
one table of names and labels for the reader and this writer) is written
here as the router writes it (llm-d/llm-d-router at ebab687927f5:
``pkg/epp/metrics/llm_d_router_metrics.go`` and ``metrics.go``,
``.../dataproducer/inflightload/metrics.go``): under its current
``llm_d_epp_*`` name and, where the router still writes one, under its
older twin too, with the router's help texts, types and histogram buckets.
When each is written follows the router:

- queue size and bytes go up as a request enters flow control and down as
  it leaves, whatever the outcome (``EnqueueAndWait``);
- the queue-duration histogram gets the request's time in flow control
  when it leaves, labelled with the outcome; the requests counter counts it;
- the pool saturation is set on every dispatch attempt: ``effective``
  always (1.0 for an empty pool), ``decode`` only while the pool has
  endpoints (the fake serves no disaggregated prefill);
- ready endpoints follow the pool view;
- in-flight requests and tokens per endpoint, and running requests per
  model, go up when a request is sent and down when its answer ends;
- TTFT is observed at the first byte of the answer (the whole answer for
  a non-streaming request), from when the request reached the picker.

Label values come from the request: ``model_name`` (and
``target_model_name``: the fake rewrites no model) from the body's
``model``, ``fairness_id`` and ``priority`` from flow control.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from scaler.signals.epp_metrics import (
    INFLIGHT_REQUESTS,
    INFLIGHT_TOKENS,
    POOL_SATURATION,
    QUEUE_BYTES,
    QUEUE_DURATION,
    QUEUE_SIZE,
    READY_ENDPOINTS,
    REQUEST_RUNNING,
    REQUESTS,
    TTFT,
    Family,
)

__all__ = ["RequestLabels", "RouterMetrics"]

PRODUCER = "inflight-load-producer"  # the in-flight load producer's default name
# The router's buckets: flow-control queue time (5 ms .. 60 s), and TTFT (5 ms .. 120 s).
_QUEUE_BUCKETS: tuple[float, ...] = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1)
_QUEUE_BUCKETS += (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_TTFT_BUCKETS: tuple[float, ...] = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5)
_TTFT_BUCKETS += (2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60, 120)

_HELP = {
    QUEUE_SIZE: "Current number of requests actively held in the Flow Control queue.",
    QUEUE_BYTES: "Current total size in bytes of requests actively held in the Flow Control queue.",
    QUEUE_DURATION: "Distribution of total time requests spend in the Flow Control layer "
    "(from enqueue to final outcome).",
    REQUESTS: "Total number of requests processed by the Flow Control layer.",
    POOL_SATURATION: "Pool saturation signal gating Flow Control dispatch. 1.0 is the gating set "
    "point; values above 1.0 indicate the magnitude of oversubscription past it. An empty pool "
    "reads as 1.0.",
    READY_ENDPOINTS: "The number of ready endpoints in the inference server pool.",
    INFLIGHT_REQUESTS: "Current number of in-flight requests per endpoint, as tracked by the "
    "in-flight load producer.",
    INFLIGHT_TOKENS: "Current number of in-flight tokens per endpoint (uncached prompt tokens, "
    "optionally plus estimated output), as tracked by the in-flight load producer.",
    REQUEST_RUNNING: "Current number of active running requests.",
    TTFT: "Time to first token in seconds, measured from request received to first response "
    "byte. For non-streaming requests, this equals total request duration.",
}


def _help(family: Family, *, legacy: bool) -> str:
    text = _HELP[family]
    return f"[ALPHA] [Deprecated: Use {family.name}] {text}" if legacy else f"[ALPHA] {text}"


@dataclass(frozen=True, slots=True)
class RequestLabels:
    """What a request's series are labelled with."""

    pool: str
    model: str
    fairness_id: str
    priority: int

    def values(self) -> dict[str, str]:
        return {
            "inference_pool": self.pool,
            "model_name": self.model,
            "target_model_name": self.model,
            "fairness_id": self.fairness_id,
            "priority": str(self.priority),
        }


def _pick(names: tuple[str, ...], values: dict[str, str]) -> dict[str, str]:
    return {name: values[name] for name in names}


class RouterMetrics:
    """The router's series in one registry (a fresh one per fake EPP)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._queue_size = self._gauges(QUEUE_SIZE)
        self._queue_bytes = self._gauges(QUEUE_BYTES)
        self._queue_duration = self._histograms(QUEUE_DURATION, _QUEUE_BUCKETS)
        self._saturation = self._gauges(POOL_SATURATION)
        self._ready = self._gauges(READY_ENDPOINTS)
        self._running = self._gauges(REQUEST_RUNNING)
        self._inflight_requests = self._gauges(INFLIGHT_REQUESTS)
        self._inflight_tokens = self._gauges(INFLIGHT_TOKENS)
        self._ttft = self._histograms(TTFT, _TTFT_BUCKETS)
        self._requests = Counter(
            REQUESTS.name.removesuffix("_total"),
            _help(REQUESTS, legacy=False),
            REQUESTS.labels,
            registry=self.registry,
        )

    def _gauges(self, family: Family) -> tuple[tuple[Gauge, tuple[str, ...]], ...]:
        """The family's gauge and, where the router still writes one, its older twin."""
        out = [(Gauge(family.name, _help(family, legacy=False), family.labels,
                      registry=self.registry), family.labels)]  # fmt: skip
        if family.legacy is not None:
            out.append((Gauge(family.legacy, _help(family, legacy=True), family.legacy_labels,
                              registry=self.registry), family.legacy_labels))  # fmt: skip
        return tuple(out)

    def _histograms(
        self, family: Family, buckets: tuple[float, ...]
    ) -> tuple[tuple[Histogram, tuple[str, ...]], ...]:
        out = [(Histogram(family.name, _help(family, legacy=False), family.labels,
                          buckets=buckets, registry=self.registry), family.labels)]  # fmt: skip
        if family.legacy is not None:
            out.append((Histogram(family.legacy, _help(family, legacy=True), family.legacy_labels,
                                  buckets=buckets, registry=self.registry),
                        family.legacy_labels))  # fmt: skip
        return tuple(out)

    # --- flow control ------------------------------------------------------------------

    def entered(self, request: RequestLabels, size_bytes: int) -> None:
        """A request entered flow control."""
        values = request.values()
        for gauge, names in self._queue_size:
            gauge.labels(**_pick(names, values)).inc()
        for gauge, names in self._queue_bytes:
            gauge.labels(**_pick(names, values)).inc(size_bytes)

    def left(
        self, request: RequestLabels, size_bytes: int, *, outcome: str, waited_s: float
    ) -> None:
        """A request left flow control with ``outcome`` after ``waited_s`` there."""
        values = {**request.values(), "outcome": outcome}
        for gauge, names in self._queue_size:
            gauge.labels(**_pick(names, values)).dec()
        for gauge, names in self._queue_bytes:
            gauge.labels(**_pick(names, values)).dec(size_bytes)
        for histogram, names in self._queue_duration:
            histogram.labels(**_pick(names, values)).observe(waited_s)
        self._requests.labels(**_pick(REQUESTS.labels, values)).inc()

    def pool(self, pool: str, *, ready_endpoints: int, saturation: float) -> None:
        """The pool's ready endpoints and saturation, as of now."""
        for gauge, names in self._ready:
            gauge.labels(**_pick(names, {"name": pool})).set(ready_endpoints)
        for gauge, _names in self._saturation:
            gauge.labels(inference_pool=pool, stage="effective").set(saturation)
            if ready_endpoints:
                gauge.labels(inference_pool=pool, stage="decode").set(saturation)
            else:
                # The router deletes a stage's series while the stage has no endpoint.
                with contextlib.suppress(KeyError):
                    gauge.remove(pool, "decode")

    # --- requests sent ------------------------------------------------------------------

    def _in_flight(
        self, request: RequestLabels, endpoint: str, namespace: str, tokens: int, sign: int
    ) -> None:
        values = {
            **request.values(),
            "endpoint_name": endpoint,
            "namespace": namespace,
            "producer_name": PRODUCER,
        }
        for gauge, names in self._inflight_requests:
            gauge.labels(**_pick(names, values)).inc(sign)
        for gauge, names in self._inflight_tokens:
            gauge.labels(**_pick(names, values)).inc(sign * tokens)
        for gauge, names in self._running:
            gauge.labels(**_pick(names, values)).inc(sign)

    def sent(self, request: RequestLabels, endpoint: str, namespace: str, tokens: int) -> None:
        """A request went to ``endpoint`` with ``tokens`` estimated prompt tokens."""
        self._in_flight(request, endpoint, namespace, tokens, +1)

    def answered(self, request: RequestLabels, endpoint: str, namespace: str, tokens: int) -> None:
        """The answer of a request sent to ``endpoint`` ended (or failed)."""
        self._in_flight(request, endpoint, namespace, tokens, -1)

    def first_token(self, request: RequestLabels, *, streaming: bool, seconds: float) -> None:
        values = {**request.values(), "streaming": "true" if streaming else "false"}
        for histogram, names in self._ttft:
            histogram.labels(**_pick(names, values)).observe(seconds)
