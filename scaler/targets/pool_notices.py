"""What is wrong with an opted-in InferencePool, said on the pool as Warning Events.

A pool is not a target of its own (its Deployment is), and a pool that
scales nothing has no target at all, so the Warnings about pools have one
owner here rather than in a target's reconciler. At every tick the
controller hands :class:`PoolNotices` the pools and the targets; it works
out what each pool should be told (:func:`pool_notices`) and raises each
notice once:

| reason | when |
| --- | --- |
| ``NoDeploymentSelected`` | the selector matches no Deployment's pod template |
| ``SeveralDeploymentsSelected`` | it matches several, or one another opted-in pool selects too |
| ``InvalidAnnotation`` | a value the pool lends is bad (each key, value, what is allowed) |
| ``UnknownAnnotation`` | a key of ours on the pool that Tidal does not know |
| ``WaitingRoomTooShort`` | the picker's ``noEndpointRequestTTL`` is under the model's cold start |

Main decisions:

- **Once per content, on the leader.** A notice is raised when it first
  holds (or holds again after it was fixed, or says something else), and
  only by the leader (:meth:`~scaler.actuator.Actuator.note` writes nothing
  on a follower, and then it is not counted as raised: a replica that takes
  over raises what still holds). The TTL notice is identified by the TTL,
  not by its message, so a cold start measured a second longer raises
  nothing new.
- **The model's cold start** is measured from its pods: the newest Ready
  pod's time from creation to Ready (scheduling, image pull and the model's
  load: what a request waits through in the picker), remembered after the
  pods go; before any pod was seen Ready, the scaler's estimate
  (:data:`~scaler.policy.idle.grace.DEFAULT_COLD_START_ESTIMATE_S`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from groundwork.rules.durations import format_duration
from groundwork.rules.pool_keys import EPP_NO_ENDPOINT_TTL
from scaler.kube.types import PoolInfo, PoolState, TargetSnapshot
from scaler.policy.events import (
    INVALID_ANNOTATION,
    NO_DEPLOYMENT_SELECTED,
    SEVERAL_DEPLOYMENTS_SELECTED,
    UNKNOWN_ANNOTATION,
    WAITING_ROOM_TOO_SHORT,
)
from scaler.policy.idle.grace import DEFAULT_COLD_START_ESTIMATE_S
from scaler.policy.pool_annotations import waiting_room_too_short
from scaler.targets.book import TargetConfig

__all__ = ["Notice", "PoolNotices", "cold_start_of", "pool_notices"]

log = logging.getLogger(__name__)

#: Writes one Warning Event about a pool; True when it was written (the leader's).
Note = Callable[[PoolInfo, str, str], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class Notice:
    """One Warning for one pool; ``identity`` says when it is new (default: the message)."""

    pool: PoolInfo
    reason: str
    message: str
    identity: str = ""

    @property
    def said(self) -> str:
        return self.identity or self.message


def _selector(pool: PoolInfo) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(pool.selector.items())) or "(empty)"


def _selection(state: PoolState) -> Notice | None:
    pool = state.pool
    if not state.listed or state.bound_to is not None:
        return None
    if not state.selected:
        message = (
            f"selector {_selector(pool)} matches the pod template of no Deployment in namespace"
            f" {pool.namespace}: nothing is scaled for this pool. Tidal scales the Deployment"
            " whose pod template carries every label of spec.selector.matchLabels"
        )
        return Notice(pool, NO_DEPLOYMENT_SELECTED, message)
    if len(state.selected) > 1:
        message = (
            f"selector {_selector(pool)} matches several Deployments"
            f" ({', '.join(state.selected)}): none is scaled for this pool. Tidal scales one"
            " Deployment per pool: narrow the selector to a label only one pod template carries"
        )
    else:
        message = (
            f"Deployment {state.selected[0]} is also selected by opted-in InferencePool(s)"
            f" {', '.join(state.shared_with)}: none of them scales it. Opt in one pool per"
            " Deployment"
        )
    return Notice(pool, SEVERAL_DEPLOYMENTS_SELECTED, message)


def _waiting_room(
    pool: PoolInfo, entry: TargetConfig, cold_start_s: float, measured: bool
) -> Notice | None:
    target = entry.pool
    if target is None:
        return None
    ttl = target.picker.no_endpoint_ttl_s
    if not waiting_room_too_short(no_endpoint_ttl_s=ttl, cold_start_s=cold_start_s):
        return None
    said = (
        f"annotation {EPP_NO_ENDPOINT_TTL.name}"
        if target.picker.ttl_said
        else f"the router's default; set {EPP_NO_ENDPOINT_TTL.name} to what the picker uses"
    )
    source = (
        "its newest replica's time from creation to Ready"
        if measured
        else "the scaler's estimate: no replica seen Ready yet"
    )
    cold = format_duration(round(cold_start_s))
    message = (
        f"the endpoint picker's noEndpointRequestTTL, {format_duration(ttl)} ({said}), is"
        f" shorter than the expected cold start of {entry.key}, {cold}"
        f" ({source}): a request that wakes it from zero is evicted (503) before a replica is"
        " ready. Raise flowControl.noEndpointRequestTTL in the picker's config above the cold"
        f" start and set {EPP_NO_ENDPOINT_TTL.name} to it"
    )
    return Notice(pool, WAITING_ROOM_TOO_SHORT, message, identity=f"ttl={ttl}")


def pool_notices(
    states: Mapping[str, PoolState],
    entries: Mapping[str, TargetConfig],
    cold_starts: Mapping[str, float],
) -> list[Notice]:
    """Every notice that holds now, pool by pool (module docstring).

    ``cold_starts``: a target's measured cold start; one not listed is estimated."""
    out: list[Notice] = []
    for state in states.values():
        pool = state.pool
        selection = _selection(state)
        if selection is not None:
            out.append(selection)
        entry = entries.get(state.bound_to) if state.bound_to is not None else None
        if entry is None or entry.pool is None:
            continue
        if entry.pool.problem is not None:
            message = f"{entry.pool.problem}; {entry.key}'s scale is left alone until it is fixed"
            out.append(Notice(pool, INVALID_ANNOTATION, message))
        if entry.pool.unknown_keys is not None:
            out.append(Notice(pool, UNKNOWN_ANNOTATION, entry.pool.unknown_keys))
        measured = entry.key in cold_starts
        cold_start_s = cold_starts.get(entry.key, DEFAULT_COLD_START_ESTIMATE_S)
        short = _waiting_room(pool, entry, cold_start_s, measured)
        if short is not None:
            out.append(short)
    return out


def cold_start_of(snap: TargetSnapshot) -> float | None:
    """The newest Ready pod's time from creation to Ready, seconds (``None``: no such pod)."""
    timed = [p for p in snap.pods if p.ready_at is not None and p.created_at > 0]
    if not timed:
        return None
    newest = max(timed, key=lambda p: p.created_at)
    assert newest.ready_at is not None
    return max(0.0, newest.ready_at - newest.created_at)


class PoolNotices:
    """Raises each pool notice once (module docstring)."""

    def __init__(self, note: Note) -> None:
        self._note = note
        self._raised: dict[tuple[str, str], str] = {}  # (pool, reason) -> what was said
        self._logged: dict[tuple[str, str], str] = {}  # likewise, logged (on every replica)
        self._cold_starts: dict[str, float] = {}  # target -> its measured cold start

    def measure(self, snapshots: Mapping[str, TargetSnapshot]) -> None:
        """Keep each target's latest measured cold start (forget targets that went)."""
        for key in [k for k in self._cold_starts if k not in snapshots]:
            del self._cold_starts[key]
        for key, snap in snapshots.items():
            got = cold_start_of(snap)
            if got is not None:
                self._cold_starts[key] = got

    async def tend(
        self,
        states: Mapping[str, PoolState],
        entries: Mapping[str, TargetConfig],
        snapshots: Mapping[str, TargetSnapshot],
    ) -> None:
        """Raise the notices that hold now and were not raised yet."""
        self.measure(snapshots)
        holding = pool_notices(states, entries, self._cold_starts)
        now = {(n.pool.key, n.reason) for n in holding}
        for kept in (self._raised, self._logged):
            for fixed in [k for k in kept if k not in now]:
                del kept[fixed]  # fixed: said again if it comes back
        for notice in holding:
            slot = (notice.pool.key, notice.reason)
            if self._logged.get(slot) != notice.said:
                self._logged[slot] = notice.said
                log.warning(
                    "InferencePool %s: %s: %s", notice.pool.key, notice.reason, notice.message
                )
            if self._raised.get(slot) == notice.said:
                continue
            if await self._note(notice.pool, notice.reason, notice.message):
                self._raised[slot] = notice.said
