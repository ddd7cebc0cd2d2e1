"""The GPU view: DCGM utilization by pod, from a Prometheus server.

One instant query per refresh covers every target:
``avg by (<pod label>, <namespace label>) (<metric>)``, where the metric is
``DCGM_FI_DEV_GPU_UTIL`` (percent, 0-100) or
``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (fraction, 0-1), and both are converted to
a fraction. The label names are settings because exporters scraped through a
ServiceMonitor usually relabel the workload's pod as ``exported_pod``.

Main decision, partial answers: the view of a target is fresh only if the last
query succeeded within ``stale_after_s`` *and* it had a value for every ready
pod. A pod the exporter has not picked up yet makes the view stale (it can
raise, not lower); a failed query leaves the last answer in place and lets it
go stale.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import aiohttp

from scaler.policy.api import SignalKind
from scaler.signals.base import SourceReading, TargetPods
from scaler.signals.names import PROMETHEUS

__all__ = ["GpuMetric", "PrometheusError", "PrometheusGpu", "parse_vector"]

log = logging.getLogger(__name__)


class GpuMetric(StrEnum):
    DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent 0-100
    DCGM_GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # fraction 0-1

    @property
    def to_fraction(self) -> float:
        return 0.01 if self is GpuMetric.DCGM_GPU_UTIL else 1.0


class PrometheusError(Exception):
    """The query failed, or its answer is not an instant vector."""


def parse_vector(
    payload: object, *, pod_label: str, namespace_label: str
) -> dict[tuple[str, str], float]:
    """``{(namespace, pod): value}`` from a Prometheus ``/api/v1/query`` answer."""
    if not isinstance(payload, dict) or payload.get("status") != "success":
        error = payload.get("error") if isinstance(payload, dict) else None
        raise PrometheusError(f"query failed: {error or payload!r}")
    data = payload.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise PrometheusError("expected data.resultType 'vector'")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError("expected data.result to be a list")
    values: dict[tuple[str, str], float] = {}
    for item in result:
        try:
            labels, (_, raw) = item["metric"], item["value"]
            value = float(raw)
        except (KeyError, TypeError, ValueError) as exc:
            raise PrometheusError(f"malformed sample {item!r}") from exc
        pod, ns = labels.get(pod_label), labels.get(namespace_label)
        if isinstance(pod, str) and isinstance(ns, str) and math.isfinite(value):
            values[(ns, pod)] = value
    return values


@dataclass(frozen=True, slots=True)
class _Answer:
    at: float
    values: Mapping[tuple[str, str], float]


class PrometheusGpu:
    """GPU utilization per pod from instant queries to one Prometheus URL."""

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        url: str,
        metric: GpuMetric = GpuMetric.DCGM_GPU_UTIL,
        pod_label: str = "pod",
        namespace_label: str = "namespace",
        timeout_s: float = 2.0,
        stale_after_s: float = 15.0,
    ) -> None:
        self._session = session
        self._url = url.rstrip("/") + "/api/v1/query"
        self._metric = metric
        self._pod_label = pod_label
        self._namespace_label = namespace_label
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._stale_after_s = stale_after_s
        self._answer: _Answer | None = None
        self._pods: dict[str, tuple[str, tuple[str, ...]]] = {}  # key -> (ns, ready pods)

    @property
    def name(self) -> str:
        return PROMETHEUS

    @property
    def feeds(self) -> frozenset[SignalKind]:
        """DCGM's GPU utilization, and only that."""
        return frozenset({SignalKind.GPU_UTILIZATION})

    @property
    def query(self) -> str:
        return f"avg by ({self._pod_label}, {self._namespace_label}) ({self._metric.value})"

    async def fetch(self) -> dict[tuple[str, str], float]:
        """Run the query once; fractions by ``(namespace, pod)``."""
        try:
            async with self._session.get(
                self._url, params={"query": self.query}, timeout=self._timeout
            ) as resp:
                if resp.status >= 500 or resp.status in (401, 403, 404):
                    raise PrometheusError(f"GET {self._url}: HTTP {resp.status}")
                payload = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise PrometheusError(f"GET {self._url}: {type(exc).__name__}: {exc}") from exc
        raw = parse_vector(
            payload, pod_label=self._pod_label, namespace_label=self._namespace_label
        )
        scale = self._metric.to_fraction
        return {k: min(1.0, max(0.0, v * scale)) for k, v in raw.items()}

    async def refresh(self, targets: Sequence[TargetPods], *, now: float) -> None:
        self._pods = {t.key: (t.namespace, tuple(p.name for p in t.pods)) for t in targets}
        try:
            values = await self.fetch()
        except PrometheusError as exc:
            log.warning("Prometheus query %r failed: %s", self.query, exc)
            return
        self._answer = _Answer(at=now, values=values)

    def read(self, key: str, *, now: float) -> SourceReading | None:
        listed = self._pods.get(key)
        answer = self._answer
        if listed is None or answer is None:
            return SourceReading(source=PROMETHEUS, fresh=False, reporters=0)
        namespace, pods = listed
        got = [answer.values[(namespace, p)] for p in pods if (namespace, p) in answer.values]
        fresh = now - answer.at <= self._stale_after_s and len(got) == len(pods)
        mean = sum(got) / len(got) if got else None
        return SourceReading(
            source=PROMETHEUS,
            fresh=fresh,
            reporters=len(got),
            gpu_utilization=mean,
            observed={"dcgm_gpu_utilization": mean} if mean is not None else {},
        )
