"""What the warm tier reads of the models, and where its Events go.

The warm tier decides from a read-only view instead of calling back into
the control loop: after each decision a target's reconciler publishes a
:class:`ModelView` (its idle stretch, when it last had work, each pod's load,
its pods and sleep level) on the :class:`ModelBoard`, and the tier reads the
board (a ``Mapping``) when it needs them: at a sleep's handoff, to rank idle
models for making room, to list the idle models on a node. Its Events go out
through :class:`ActuatorEvents`, a thin sink over the fenced writer.

Main decision: a view is a frozen value replaced whole after each decision,
so what the tier reads at a handoff is what the last decision saw, and the
tier holds no reference into a reconciler.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from groundwork.background_tasks import BackgroundTasks
from scaler.actuator import Actuator
from scaler.kube.types import PodInfo, TargetSnapshot
from scaler.metrics import Metrics
from scaler.policy.events import SLEPT
from scaler.policy.idle.keep_alive import IdleGaps

__all__ = ["ActuatorEvents", "ModelBoard", "ModelView", "WarmEvents"]


@dataclass(frozen=True, slots=True)
class ModelView:
    """One model as its last decision saw it.

    ``idle_since``: the start of its idle stretch (``None``: busy);
    ``last_used``: when it last had work (``None``: not since this scaler
    started; the least recently used order of evictions); ``pod_load``:
    requests running or waiting, by pod name; ``sleep_level``: ``None`` when
    the model is not in the warm tier (its pods are never put to sleep);
    ``mean_gap_s``: its mean time between requests (``None``: no history,
    e.g. without ``slo-ttft``), so that the model expected back latest is
    put to sleep first.
    """

    idle_since: float | None = None
    last_used: float | None = None
    pod_load: Mapping[str, float] = field(default_factory=dict)
    pods: tuple[PodInfo, ...] = ()
    sleep_level: int | None = None
    mean_gap_s: float | None = None
    gaps: IdleGaps | None = None  # its idle gaps (with ``slo-ttft``), for moves

    def next_request_s(self) -> float:
        """When its next request is expected: last use plus its mean gap; +inf unknown."""
        if self.last_used is None or self.mean_gap_s is None:
            return math.inf
        return self.last_used + self.mean_gap_s


class ModelBoard(Mapping[str, ModelView]):
    """The models' latest views: reconcilers publish, the warm tier reads."""

    def __init__(self) -> None:
        self._views: dict[str, ModelView] = {}

    def publish(self, key: str, view: ModelView) -> None:
        self._views[key] = view

    def forget(self, key: str) -> None:
        self._views.pop(key, None)

    def __getitem__(self, key: str) -> ModelView:
        return self._views[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._views)

    def __len__(self) -> int:
        return len(self._views)


class WarmEvents(Protocol):
    """Where the warm tier's Events go (sleeps, wakes, a server without sleep mode);
    the sink sends them on its own, so no sleep or wake waits for the API."""

    def note(self, target: str, reason: str, message: str, warning: bool) -> None: ...


class Snapshots(Protocol):
    """The opted-in Deployments as last seen (the target book has them)."""

    def snapshots(self) -> Mapping[str, TargetSnapshot]: ...


class ActuatorEvents:
    """:class:`WarmEvents` through the actuator: fenced, best effort, in the
    background; a sleep is counted at once."""

    def __init__(self, actuator: Actuator, book: Snapshots, metrics: Metrics) -> None:
        self._actuator = actuator
        self._book = book
        self._metrics = metrics
        self._tasks = BackgroundTasks()

    def note(self, target: str, reason: str, message: str, warning: bool) -> None:
        snap = self._book.snapshots().get(target)
        if snap is None:
            return
        if reason == SLEPT:
            self._metrics.slept(target)
        write = self._actuator.note(
            snap.deployment, reason=reason, message=message, warning=warning
        )
        self._tasks.spawn(write, name=f"tidal-scaler-event:{target}")

    async def close(self) -> None:
        """Cancel the Events still being written."""
        await self._tasks.stop()
