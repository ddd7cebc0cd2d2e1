"""The GPU view: DCGM utilization by pod, from a Prometheus server.

One instant query per refresh covers every target:
``avg by (<pod label>, <namespace label>) (<metric>)``, where the metric is
``DCGM_FI_DEV_GPU_UTIL`` (percent, 0-100) or
``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (fraction, 0-1), and both are converted to
a fraction. The label names are settings because exporters scraped through a
ServiceMonitor usually relabel the workload's pod as ``exported_pod``. The
query goes through the scaler's one Prometheus client
(:mod:`scaler.signals.prometheus_query`).

Main decision, partial answers: the view of a target is fresh only if the last
query succeeded within ``stale_after_s`` *and* it had a value for every ready
pod. A pod the exporter has not picked up yet makes the view stale (it can
raise, not lower); a failed query leaves the last answer in place and lets it
go stale.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import aiohttp
from pydantic import Field

from scaler.policy.api import SignalKind
from scaler.signals.base import SourceReading, TargetPods
from scaler.signals.prometheus_query import PrometheusError, PrometheusQuery, Sample
from scaler.signals.registry import Polled, PolledSourceSettings, SourceContext

__all__ = ["PROMETHEUS", "GpuMetric", "PrometheusGpu", "PrometheusSettings", "by_pod"]

log = logging.getLogger(__name__)

#: This source's name.
PROMETHEUS = "prometheus"


class GpuMetric(StrEnum):
    DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent 0-100
    DCGM_GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # fraction 0-1

    @property
    def to_fraction(self) -> float:
        return 0.01 if self is GpuMetric.DCGM_GPU_UTIL else 1.0


class PrometheusSettings(PolledSourceSettings):
    url: str | None = Field(
        None, description="Prometheus base URL for DCGM GPU utilization (unset: no GPU view)"
    )
    metric: GpuMetric = Field(
        GpuMetric.DCGM_GPU_UTIL,
        description="DCGM_FI_DEV_GPU_UTIL (percent) or DCGM_FI_PROF_GR_ENGINE_ACTIVE (fraction)",
    )
    pod_label: str = Field("pod", description="label naming the pod (often exported_pod)")
    namespace_label: str = Field(
        "namespace", description="label naming the namespace (often exported_namespace)"
    )
    interval_s: float = Field(5.0, gt=0, description="time between queries, seconds")
    timeout_s: float = Field(2.0, gt=0, description="timeout of one query, seconds")
    stale_after_s: float = Field(
        15.0, gt=0, description="an answer older than this is stale, seconds"
    )

    def client(self, session: aiohttp.ClientSession) -> PrometheusQuery | None:
        """A client of the configured Prometheus (``None`` without a URL)."""
        if not self.url:
            return None
        return PrometheusQuery(session=session, url=self.url, timeout_s=self.timeout_s)

    def build(self, context: SourceContext) -> Polled | None:
        client = self.client(context.session)
        if client is None:
            return None
        gpu = PrometheusGpu(
            client,
            metric=self.metric,
            pod_label=self.pod_label,
            namespace_label=self.namespace_label,
            stale_after_s=self.stale_after_s,
        )
        return Polled(gpu, self.interval_s, 1.5 * self.interval_s + self.timeout_s)


def by_pod(
    samples: Sequence[Sample], *, pod_label: str, namespace_label: str
) -> dict[tuple[str, str], float]:
    """``{(namespace, pod): value}`` of the samples that name both."""
    values: dict[tuple[str, str], float] = {}
    for sample in samples:
        pod, ns = sample.labels.get(pod_label), sample.labels.get(namespace_label)
        if pod is not None and ns is not None:
            values[(ns, pod)] = sample.value
    return values


@dataclass(frozen=True, slots=True)
class _Answer:
    at: float
    values: Mapping[tuple[str, str], float]


class PrometheusGpu:
    """GPU utilization per pod from instant queries to one Prometheus."""

    def __init__(
        self,
        client: PrometheusQuery,
        *,
        metric: GpuMetric = GpuMetric.DCGM_GPU_UTIL,
        pod_label: str = "pod",
        namespace_label: str = "namespace",
        stale_after_s: float = 15.0,
    ) -> None:
        self._client = client
        self._metric = metric
        self._pod_label = pod_label
        self._namespace_label = namespace_label
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
        raw = by_pod(
            await self._client.instant(self.query),
            pod_label=self._pod_label,
            namespace_label=self._namespace_label,
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
            return SourceReading(fresh=False, reporters=0)
        namespace, pods = listed
        got = [answer.values[(namespace, p)] for p in pods if (namespace, p) in answer.values]
        fresh = now - answer.at <= self._stale_after_s and len(got) == len(pods)
        mean = sum(got) / len(got) if got else None
        return SourceReading(
            fresh=fresh,
            reporters=len(got),
            signals={SignalKind.GPU_UTILIZATION: mean} if mean is not None else {},
            observed={"dcgm_gpu_utilization": mean} if mean is not None else {},
        )
