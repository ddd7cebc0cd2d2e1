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

Main decision: a failed query keeps the last answer and the answer carries
its time; the warm tier uses it only while it is younger than
``stale_after_s``, and otherwise falls back to trying the wake and making
room when it fails for memory.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import aiohttp

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


def _result(payload: object) -> list[dict[str, object]]:
    if not isinstance(payload, dict) or payload.get("status") != "success":
        raise ValueError(f"query failed: {payload!r}"[:300])
    data = payload.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise ValueError("expected an instant vector")
    result = data.get("result")
    if not isinstance(result, list):
        raise ValueError("expected data.result to be a list")
    return result


def parse_memory(
    used: object, free: object, *, at: float, pod_label: str, namespace_label: str
) -> GpuMemorySnapshot:
    """The snapshot from the two answers; raises ValueError on a malformed one."""
    pods: dict[tuple[str, str], tuple[str, float]] = {}
    for item in _result(used):
        labels, value = item.get("metric"), item.get("value")
        if not isinstance(labels, dict) or not isinstance(value, list) or len(value) != 2:
            raise ValueError(f"malformed sample {item!r}")
        mib = float(value[1])
        pod, ns, uuid = labels.get(pod_label), labels.get(namespace_label), labels.get("UUID")
        named = isinstance(pod, str) and isinstance(ns, str) and isinstance(uuid, str)
        if named and math.isfinite(mib) and mib >= 0:
            pods[(str(ns), str(pod))] = (str(uuid), mib)
    frees: dict[str, float] = {}
    for item in _result(free):
        labels, value = item.get("metric"), item.get("value")
        if not isinstance(labels, dict) or not isinstance(value, list) or len(value) != 2:
            raise ValueError(f"malformed sample {item!r}")
        mib = float(value[1])
        uuid = labels.get("UUID")
        if isinstance(uuid, str) and math.isfinite(mib) and mib >= 0:
            frees[uuid] = mib
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
        *,
        session: aiohttp.ClientSession,
        url: str,
        pod_label: str = "pod",
        namespace_label: str = "namespace",
        timeout_s: float = 2.0,
        stale_after_s: float = 15.0,
    ) -> None:
        super().__init__(stale_after_s=stale_after_s)
        self._session = session
        self._url = url.rstrip("/") + "/api/v1/query"
        self._pod_label = pod_label
        self._namespace_label = namespace_label
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    @property
    def queries(self) -> tuple[str, str]:
        by = f"{self._pod_label}, {self._namespace_label}, UUID"
        return (f"max by ({by}) (DCGM_FI_DEV_FB_USED)", "max by (UUID) (DCGM_FI_DEV_FB_FREE)")

    async def _query(self, query: str) -> object:
        async with self._session.get(
            self._url, params={"query": query}, timeout=self._timeout
        ) as resp:
            if resp.status >= 300:
                raise ValueError(f"GET {self._url}: HTTP {resp.status}")
            return await resp.json(content_type=None)

    async def refresh(self, *, now: float) -> None:
        used_q, free_q = self.queries
        try:
            used, free = await self._query(used_q), await self._query(free_q)
            self.snapshot = parse_memory(
                used,
                free,
                at=now,
                pod_label=self._pod_label,
                namespace_label=self._namespace_label,
            )
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.warning("GPU memory query failed, keeping the last answer: %s", exc)
