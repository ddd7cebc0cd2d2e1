"""GPU-seconds accounting: what the ready replicas cost between two ticks (DESIGN §8).

At each tick the GPUs of every target's ready replicas (replicas x GPUs per
replica) are multiplied by the time since the previous tick and added to
``tidal_scaler_gpu_seconds_total`` by capacity type.

Main decision: the GPUs counted are those ready *at* the tick, for the whole
interval before it (a left-closed approximation that needs no history); a
first tick, or a clock that did not advance, adds nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from scaler.kube.types import TargetSnapshot
from scaler.metrics import Metrics

__all__ = ["GpuSeconds", "ready_gpus"]


def ready_gpus(snapshots: Mapping[str, TargetSnapshot]) -> int:
    """GPUs held by ready replicas over every target."""
    return sum(
        s.deployment.ready_replicas * s.deployment.gpus_per_replica for s in snapshots.values()
    )


class GpuSeconds:
    """Adds the GPU-seconds since the previous tick to the metrics."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._last_tick: float | None = None

    def tick(self, now: float, snapshots: Mapping[str, TargetSnapshot]) -> float:
        """Account the interval ending at ``now``; the GPU-seconds added."""
        added = 0.0
        if self._last_tick is not None and now > self._last_tick:
            added = ready_gpus(snapshots) * (now - self._last_tick)
            # Placement other than on-demand is not built yet.
            self._metrics.add_gpu_seconds("on-demand", added)
        self._last_tick = now
        return added
