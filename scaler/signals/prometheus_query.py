"""The scaler's one Prometheus client: instant queries, answered as labelled samples.

Two parts of the scaler ask a Prometheus: the GPU utilization source
(:mod:`scaler.signals.prometheus`, DCGM's utilization by pod) and the warm
tier (:mod:`scaler.warm.gpu_memory`, DCGM's framebuffer by pod and GPU).
Both go through :class:`PrometheusQuery`: ``GET /api/v1/query`` with a
timeout, and the answer read by :func:`parse_vector` into :class:`Sample`
values (the labels and one finite number), whatever the query.

Main decision, failures: any answer that is not a successful instant vector
(a non-2xx status, a body that is not JSON, ``"status": "error"``, another
result type, a malformed sample) raises :class:`PrometheusError` with what
was wrong; a sample whose value is not finite (``NaN`` from a division by
zero in the query) is left out, not read as a number. What a failed query
means (keep the last answer, go stale) is each caller's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

__all__ = ["PrometheusError", "PrometheusQuery", "Sample", "parse_vector"]


class PrometheusError(Exception):
    """The query failed, or its answer is not an instant vector."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of an instant vector: its labels and its value."""

    labels: Mapping[str, str]
    value: float


def parse_vector(payload: object) -> list[Sample]:
    """The samples of a Prometheus ``/api/v1/query`` answer (finite values only)."""
    if not isinstance(payload, dict) or payload.get("status") != "success":
        error = payload.get("error") if isinstance(payload, dict) else None
        raise PrometheusError(f"query failed: {error or payload!r}"[:300])
    data = payload.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise PrometheusError("expected data.resultType 'vector'")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError("expected data.result to be a list")
    samples = []
    for item in result:
        try:
            labels, (_, raw) = item["metric"], item["value"]
            value = float(raw)
        except (KeyError, TypeError, ValueError) as exc:
            raise PrometheusError(f"malformed sample {item!r}"[:300]) from exc
        if not isinstance(labels, dict):
            raise PrometheusError(f"malformed sample {item!r}"[:300])
        if math.isfinite(value):
            samples.append(Sample({str(k): str(v) for k, v in labels.items()}, value))
    return samples


class PrometheusQuery:
    """Instant queries to one Prometheus (its base URL), each bounded by ``timeout_s``."""

    def __init__(self, *, session: aiohttp.ClientSession, url: str, timeout_s: float) -> None:
        self._session = session
        self._url = url.rstrip("/") + "/api/v1/query"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def instant(self, query: str) -> list[Sample]:
        """Run ``query`` now; its samples, or :class:`PrometheusError` saying why not."""
        try:
            async with self._session.get(
                self._url, params={"query": query}, timeout=self._timeout
            ) as resp:
                # Prometheus answers a bad query with 400 and an error body: read it.
                if resp.status >= 300 and resp.status not in (400, 422):
                    raise PrometheusError(f"GET {self._url}: HTTP {resp.status}")
                payload = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise PrometheusError(f"GET {self._url}: {type(exc).__name__}: {exc}") from exc
        return parse_vector(payload)
