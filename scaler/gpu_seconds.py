"""GPU-seconds accounting: what the ready replicas cost between two ticks (DESIGN §8).

At each tick the GPUs of every target's ready replicas (replicas x GPUs per
replica) are multiplied by the time since the previous tick and added to
``tidal_scaler_gpu_seconds_total`` by capacity type.

With the warm tier, the same GPU-seconds are also split by state
(``tidal_scaler_gpu_seconds_by_state_total{state="awake|asleep"}``): a
sleeping replica still holds its GPU slice, so it counts, as asleep.

Main decision: the GPUs counted are those ready *at* the tick, for the whole
interval before it (a left-closed approximation that needs no history); a
first tick, or a clock that did not advance, adds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scaler.kube.types import TargetSnapshot
from scaler.metrics import Metrics

__all__ = ["GpuSeconds", "asleep_gpu_seconds", "ready_gpus"]


def ready_gpus(snapshots: Mapping[str, TargetSnapshot]) -> int:
    """GPUs held by ready replicas over every target."""
    return sum(
        s.deployment.ready_replicas * s.deployment.gpus_per_replica for s in snapshots.values()
    )


def asleep_gpu_seconds(
    snapshots: Mapping[str, TargetSnapshot],
    asleep: Callable[[str], int] | None,
    elapsed: float,
) -> float:
    """GPU-seconds of the ready replicas that sleep (the warm tier) over ``elapsed``."""
    if asleep is None:
        return 0.0
    total = 0.0
    for key, s in snapshots.items():
        n = min(asleep(key), s.deployment.ready_replicas)
        total += n * s.deployment.gpus_per_replica * elapsed
    return total


class GpuSeconds:
    """Adds the GPU-seconds since the previous tick to the metrics."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._last_tick: float | None = None

    def tick(
        self,
        now: float,
        snapshots: Mapping[str, TargetSnapshot],
        asleep: Callable[[str], int] | None = None,
    ) -> float:
        """Account the interval ending at ``now``; the GPU-seconds added.

        ``asleep(target)``: how many of its ready replicas sleep (the warm tier).
        """
        added = 0.0
        if self._last_tick is not None and now > self._last_tick:
            elapsed = now - self._last_tick
            added = ready_gpus(snapshots) * elapsed
            # Placement other than on-demand is not built yet.
            self._metrics.add_gpu_seconds("on-demand", added)
            sleeping = asleep_gpu_seconds(snapshots, asleep, elapsed)
            self._metrics.add_gpu_seconds_by_state(awake=added - sleeping, asleep=sleeping)
        self._last_tick = now
        return added
