"""Which spot replicas count as serving: the *available* and *ready* spot counts (placement.md).

The split (:mod:`~scaler.policy.placement.split`) covers with on-demand the spot
replicas that are not available. This module turns what the controller
knows about each spot pod (:class:`PodFacts`, plain values, no Kubernetes
objects) into two counts, with time passed in:

- **available**: the replica serves now or is on its way to serving. It is
  Ready, or still starting (Running but not Ready yet: the model loads; or
  Pending for less than ``pending-timeout`` since it was created: the node
  is being found or the image pulled), and it is neither on a node under
  an interruption notice nor evicted nor terminating.
- **ready**: available *and* Ready. On-demand cover is released only
  against ready spot (:mod:`~scaler.policy.placement.fallback`), never against spot
  that is merely starting.

Main decision: a spot replica that boots normally is available, so the
split does not put the whole target on demand every time spot scales up
(models take minutes to load); only a replica that is stuck (Pending past
the timeout: spot capacity ran out), doomed (its node has a notice) or gone
(evicted, terminating, failed) is not. ``unavailable`` says why, per pod,
for Events and logs.

A pod's capacity type comes from its node (the provider's label), or, before
it is scheduled, from which Deployment owns it; the caller decides and
passes it in :attr:`PodFacts.capacity_type`. Only spot pods are counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "CapacityType",
    "PodFacts",
    "SpotCounts",
    "Unavailable",
    "count_spot",
    "unavailable_reason",
]


class CapacityType(StrEnum):
    SPOT = "spot"
    ON_DEMAND = "on-demand"


class Unavailable(StrEnum):
    """Why a spot replica does not count as serving."""

    NOTICE = "node under interruption notice"
    EVICTED = "evicted"
    TERMINATING = "terminating"
    FAILED = "failed"
    PENDING_TIMEOUT = "pending past the timeout"


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the placement needs to know about one replica.

    ``created_at`` is on the same clock as the ``now`` passed to
    :func:`count_spot` (seconds). ``phase`` is the pod's ``status.phase``.
    """

    name: str
    capacity_type: CapacityType
    phase: str = "Running"  # Pending | Running | Succeeded | Failed | Unknown
    ready: bool = False
    created_at: float = 0.0
    node: str | None = None
    node_under_notice: bool = False
    evicted: bool = False
    terminating: bool = False
    gpus: int = 0
    gpu_model: str | None = None


@dataclass(frozen=True, slots=True)
class SpotCounts:
    """Spot replicas that serve or will (``available``), that serve now (``ready``), the rest."""

    available: int = 0
    ready: int = 0
    unavailable: dict[str, Unavailable] = field(default_factory=dict)  # pod name -> why


def unavailable_reason(
    pod: PodFacts, *, now: float, pending_timeout_s: float
) -> Unavailable | None:
    """Why ``pod`` does not count as available, ``None`` when it does (see the module docstring)."""
    if pending_timeout_s < 0:
        raise ValueError(f"pending_timeout_s must be >= 0 seconds, got {pending_timeout_s}")
    # Order matters only for the reason shown: the most specific cause first.
    if pod.evicted:
        return Unavailable.EVICTED
    if pod.node_under_notice:
        return Unavailable.NOTICE
    if pod.terminating:
        return Unavailable.TERMINATING
    if pod.phase in ("Failed", "Succeeded"):
        return Unavailable.FAILED
    if pod.ready:
        return None
    if pod.phase == "Pending" and now - pod.created_at >= pending_timeout_s:
        return Unavailable.PENDING_TIMEOUT
    return None  # starting: Running and loading, or Pending within the timeout


def count_spot(pods: Iterable[PodFacts], *, now: float, pending_timeout_s: float) -> SpotCounts:
    """Available and ready spot replicas among ``pods`` (on-demand pods are ignored)."""
    available = ready = 0
    unavailable: dict[str, Unavailable] = {}
    for pod in pods:
        if pod.capacity_type is not CapacityType.SPOT:
            continue
        reason = unavailable_reason(pod, now=now, pending_timeout_s=pending_timeout_s)
        if reason is not None:
            unavailable[pod.name] = reason
            continue
        available += 1
        if pod.ready:
            ready += 1
    return SpotCounts(available=available, ready=ready, unavailable=unavailable)
