"""GPU-seconds accounting: what the ready replicas cost between two ticks (DESIGN §8).

At each tick the GPUs of every target's ready replicas (replicas x GPUs per
replica) are multiplied by the time since the previous tick and added to
``tidal_scaler_gpu_seconds_total`` by capacity type. Without placement every
replica is on demand; with a :class:`~scaler.placing.Placer` each ready pod
counts under its node's capacity type (with the pod's own GPU request where it
has one), and the placer accounts each target's dollars on the wall clock.

With the warm tier, the same GPU-seconds are also split by state
(``tidal_scaler_gpu_seconds_by_state_total{state="awake|asleep"}``): a
sleeping replica still holds its GPU slice, so it counts, as asleep.

Main decision: the GPUs counted are those ready *at* the tick, for the whole
interval before it (a left-closed approximation that needs no history); a
first tick, or a clock that did not advance, adds nothing.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping

from scaler.kube.types import TargetSnapshot
from scaler.metrics import Metrics
from scaler.placing import Placer

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

    def __init__(
        self,
        metrics: Metrics,
        *,
        placer: Placer | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._metrics = metrics
        self._placer = placer
        self._wall_clock = wall_clock
        self._last_tick: float | None = None

    def _by_capacity(self, snapshots: Mapping[str, TargetSnapshot]) -> dict[str, float]:
        """GPUs held by ready replicas, by capacity type."""
        if self._placer is None:
            return {"on-demand": float(ready_gpus(snapshots))}
        gpus: dict[str, float] = defaultdict(float)
        for snap in snapshots.values():
            for facts in self._placer.facts(snap.ready_pods):
                gpus[facts.capacity_type.value] += facts.gpus or snap.deployment.gpus_per_replica
        return gpus

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
            for capacity, gpus in self._by_capacity(snapshots).items():
                self._metrics.add_gpu_seconds(capacity, gpus * elapsed)
                added += gpus * elapsed
            sleeping = min(added, asleep_gpu_seconds(snapshots, asleep, elapsed))
            self._metrics.add_gpu_seconds_by_state(awake=added - sleeping, asleep=sleeping)
        self._last_tick = now
        if self._placer is not None:
            self._placer.account(
                {key: snap.pods for key, snap in snapshots.items()}, now_wall=self._wall_clock()
            )
        return added
