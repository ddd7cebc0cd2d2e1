"""The one interface every demand source offers, and the values it hands over.

Three sources feed the scaler (docs/architecture.md, "The scaler"):
activator reports (pushed to us), model-server scrapes and Prometheus
queries (pulled by us on their own schedule). Whatever their transport, each
says which signals it measures (:attr:`DemandSource.feeds`), and the signal
hub asks each the same question at decision time: "what do you know about target ``ns/name`` at
``now``?" and gets a :class:`SourceReading` back, or ``None`` when the source
has no say for that target (no activator reports at all, engine ``generic``,
no Prometheus URL). ``None`` means "not expected", which differs from a
reading that is stale: a stale reading may still raise the scale but it can
never lower it, because no data is not zero load.

A reading is plain data with units in the field names; combining readings
into policy signals (max for concurrency, sum for queue depth) lives in
:mod:`scaler.signals.combine`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scaler.policy.api import SignalKind

__all__ = [
    "COUNTS",
    "DemandSource",
    "PodEndpoint",
    "PolledSource",
    "SourceReading",
    "TargetPods",
]


#: The request counts: concurrency and queue depth.
COUNTS = frozenset({SignalKind.CONCURRENCY, SignalKind.QUEUE_DEPTH})


@dataclass(frozen=True, slots=True)
class SourceReading:
    """One source's view of one target at one time.

    ``fresh`` is true only when every party this source expects to hear from
    (every reporting activator, every ready pod) answered recently; values
    from the parties that did answer (or their last known values) are still
    given, so a partial view can raise the scale. ``None`` for a value means
    the source does not measure it.
    """

    source: str
    fresh: bool
    reporters: int  # activators reporting, or pods with data
    activators: int = 0  # of those, activators (the count /v1/targets shows)
    concurrency: float | None = None  # requests held or running
    queue_depth: float | None = None  # requests waiting for a slot
    busy: bool = False  # anything held, running or waiting right now
    kv_cache_utilization: float | None = None  # mean over pods, fraction 0..1
    gpu_utilization: float | None = None  # mean over pods, fraction 0..1
    pod_load: Mapping[str, float] = field(default_factory=dict)  # pod name -> requests on it
    # Raw observed values for /v1/targets and metrics, named with units.
    observed: Mapping[str, float] = field(default_factory=dict)
    # First tokens new since the previous refresh at or under each TTFT bound
    # (cumulative, rising bounds, +inf last): the servers' TTFT histogram.
    ttft_new: tuple[tuple[float, float], ...] = ()
    # The same view of each group of the target's pods (a GPU shape's replicas,
    # named by PodEndpoint.group), where the source tells its pods apart.
    groups: Mapping[str, SourceReading] = field(default_factory=dict)


class DemandSource(Protocol):
    """Anything the signal hub can ask about a target's demand.

    ``feeds``: the signals this source measures. The hub combines every
    source the same way from it (:mod:`scaler.signals.combine`): counts across
    the sources that measure them, a utilization from the most direct source
    that measures it."""

    @property
    def name(self) -> str: ...

    @property
    def feeds(self) -> frozenset[SignalKind]: ...

    def read(self, key: str, *, now: float) -> SourceReading | None:
        """This source's view of ``key`` (``namespace/name``) at ``now``, or
        ``None`` when this source has no say for that target."""
        ...


@dataclass(frozen=True, slots=True)
class PodEndpoint:
    """One ready pod a pulled source may query."""

    name: str
    ip: str
    metrics_port: int
    # Which of the target's groups the pod is in (its GPU shape, docs/shapes.md;
    # "" for the shape of the user's own pod template); None for a target whose
    # pods are all alike.
    group: str | None = None


@dataclass(frozen=True, slots=True)
class TargetPods:
    """What a pulled source needs to know about one target to refresh it."""

    key: str  # namespace/name
    namespace: str
    engine: str  # vllm | triton | generic
    pods: Sequence[PodEndpoint]


class PolledSource(DemandSource, Protocol):
    """A source that fetches on its own schedule (scrapes, Prometheus)."""

    async def refresh(self, targets: Sequence[TargetPods], *, now: float) -> None:
        """Fetch fresh data for ``targets``, timestamped ``now`` on success;
        forget targets and pods that are no longer listed."""
        ...
