"""GPU memory by pod and physical GPU, from DCGM through Prometheus (the warm tier).

Two instant queries, when the scaler has a Prometheus URL:

- ``max by (<pod>, <namespace>, UUID) (DCGM_FI_DEV_FB_USED)``: what each pod
  holds on which physical GPU (MiB);
- ``max by (UUID) (DCGM_FI_DEV_FB_FREE)``: what each physical GPU has free.

A GPU's budget is then its pods' use plus its free memory. The warm tier
learns each model's awake and asleep footprint from these samples
(:class:`scaler.policy.warm_tier.MemoryBook`) and, before a wake, plans which idle
models on the same GPU to put to sleep (:func:`scaler.policy.warm_tier.make_room`),
instead of waiting for an out-of-memory answer.

Both go through the scaler's one Prometheus client
(:mod:`scaler.signals.prometheus_query`).

Main decision: a failed query keeps the last answer and the answer carries
its time; the warm tier uses it only while it is younger than
``stale_after_s``, and otherwise falls back to trying the wake and making
room when it fails for memory.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from scaler.signals.prometheus_query import PrometheusError, PrometheusQuery, Sample

__all__ = ["GpuMemory", "GpuMemorySnapshot", "PrometheusGpuMemory", "parse_memory"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GpuMemorySnapshot:
    """``pods``: (namespace, pod) -> (GPU UUID, MiB used); ``free``: UUID -> MiB free."""

    at: float
    pods: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)
    free: dict[str, float] = field(default_factory=dict)

    def budget(self, uuid: str) -> float | None:
        """The GPU's memory: its pods' use plus what is free; None if unknown."""
        if uuid not in self.free:
            return None
        used = sum(mib for gpu, mib in self.pods.values() if gpu == uuid)
        return used + self.free[uuid]

    def on_gpu(self, uuid: str) -> dict[tuple[str, str], float]:
        return {key: mib for key, (gpu, mib) in self.pods.items() if gpu == uuid}


def parse_memory(
    used: Sequence[Sample],
    free: Sequence[Sample],
    *,
    at: float,
    pod_label: str,
    namespace_label: str,
) -> GpuMemorySnapshot:
    """The snapshot from the two queries' samples (a sample that names no pod or GPU, or a
    negative value, is left out)."""
    pods: dict[tuple[str, str], tuple[str, float]] = {}
    for sample in used:
        labels = sample.labels
        pod, ns, uuid = labels.get(pod_label), labels.get(namespace_label), labels.get("UUID")
        if pod is not None and ns is not None and uuid is not None and sample.value >= 0:
            pods[(ns, pod)] = (uuid, sample.value)
    frees: dict[str, float] = {}
    for sample in free:
        uuid = sample.labels.get("UUID")
        if uuid is not None and sample.value >= 0:
            frees[uuid] = sample.value
    return GpuMemorySnapshot(at=at, pods=pods, free=frees)


class GpuMemory:
    """The latest snapshot, fresh or not (what the warm tier reads)."""

    def __init__(self, *, stale_after_s: float = 15.0) -> None:
        self.stale_after_s = stale_after_s
        self.snapshot: GpuMemorySnapshot | None = None

    def fresh(self, now: float) -> GpuMemorySnapshot | None:
        snap = self.snapshot
        if snap is None or now - snap.at > self.stale_after_s:
            return None
        return snap


class PrometheusGpuMemory(GpuMemory):
    """:class:`GpuMemory` refreshed by instant queries to one Prometheus."""

    def __init__(
        self,
        client: PrometheusQuery,
        *,
        pod_label: str = "pod",
        namespace_label: str = "namespace",
        stale_after_s: float = 15.0,
    ) -> None:
        super().__init__(stale_after_s=stale_after_s)
        self._client = client
        self._pod_label = pod_label
        self._namespace_label = namespace_label

    @property
    def queries(self) -> tuple[str, str]:
        by = f"{self._pod_label}, {self._namespace_label}, UUID"
        return (f"max by ({by}) (DCGM_FI_DEV_FB_USED)", "max by (UUID) (DCGM_FI_DEV_FB_FREE)")

    async def refresh(self, *, now: float) -> None:
        used_q, free_q = self.queries
        try:
            used, free = await self._client.instant(used_q), await self._client.instant(free_q)
        except PrometheusError as exc:
            log.warning("GPU memory query failed, keeping the last answer: %s", exc)
            return
        self.snapshot = parse_memory(
            used, free, at=now, pod_label=self._pod_label, namespace_label=self._namespace_label
        )
