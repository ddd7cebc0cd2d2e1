"""The status a Deployment reports from its ReplicaSets, and its conditions, as the real one.

Counts (``replicas``, ``updatedReplicas``, ``readyReplicas``,
``availableReplicas``, ``unavailableReplicas``) from the ReplicaSets, zeros
omitted as the real API omits them; ``observedGeneration``; the
conditions ``Available`` (``MinimumReplicasAvailable`` /
``MinimumReplicasUnavailable``) and ``Progressing`` (``NewReplicaSetCreated``,
``FoundNewReplicaSet``, ``ReplicaSetUpdated``, ``NewReplicaSetAvailable``,
``DeploymentPaused``, and ``ProgressDeadlineExceeded`` once
``progressDeadlineSeconds`` passed with no progress), Available first.

Main decision: a rollout that has not finished says when to look again (the
deadline, or what is left of it), so the controller rechecks it then and a
stalled rollout times out without another event to wake it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from loadtests.sandbox.cluster.controllers.base import Obj, set_condition
from loadtests.sandbox.cluster.controllers.deployment_rollout import replicas_of, status_count
from loadtests.sandbox.cluster.store import parse_rfc3339

__all__ = ["DeploymentStatus", "deployment_status"]


@dataclass(frozen=True, slots=True)
class DeploymentStatus:
    """The status to write, when to look again (None: no need), and whether the rollout
    has just timed out (a ``ProgressDeadlineExceeded`` Warning is due)."""

    status: Obj
    recheck_s: float | None
    timed_out: bool


# Available first, then Progressing, as kubectl shows them.
_ORDER = {"Available": 0, "Progressing": 1}


def deployment_status(
    d: Obj,
    new_rs: Obj | None,
    all_rss: list[Obj],
    *,
    max_unavailable: int,
    progress_reason: tuple[str, str] | None,
    now: datetime,
) -> DeploymentStatus:
    """``d``'s status from ``all_rss`` (``new_rs`` among them, the one of its template)."""
    spec = d.get("spec", {})
    desired = int(spec.get("replicas", 1))
    total_spec = sum(replicas_of(rs) for rs in all_rss)
    available = sum(status_count(rs, "availableReplicas") for rs in all_rss)
    counts = {
        "replicas": sum(status_count(rs, "replicas") for rs in all_rss),
        "updatedReplicas": status_count(new_rs, "replicas") if new_rs else 0,
        "readyReplicas": sum(status_count(rs, "readyReplicas") for rs in all_rss),
        "availableReplicas": available,
        "unavailableReplicas": max(0, total_spec - available),
    }
    old_status = d.get("status") or {}
    status: Obj = {"observedGeneration": d["metadata"].get("generation", 1)}
    status.update({k: v for k, v in counts.items() if v})
    if old_status.get("collisionCount"):
        status["collisionCount"] = old_status["collisionCount"]
    conditions = _available(
        list(old_status.get("conditions") or []),
        available >= desired - max_unavailable,
        now,
    )
    conditions, recheck, timed_out = _progressing(
        conditions, d, new_rs, counts, progress_reason=progress_reason, now=now
    )
    status["conditions"] = sorted(conditions, key=lambda c: _ORDER.get(c.get("type", ""), 2))
    return DeploymentStatus(status, recheck, timed_out)


def _available(conditions: list[Obj], enough: bool, now: datetime) -> list[Obj]:
    if enough:
        return set_condition(
            conditions,
            kind="Available",
            status="True",
            reason="MinimumReplicasAvailable",
            message="Deployment has minimum availability.",
            now=now,
            with_update_time=True,
        )
    return set_condition(
        conditions,
        kind="Available",
        status="False",
        reason="MinimumReplicasUnavailable",
        message="Deployment does not have minimum availability.",
        now=now,
        with_update_time=True,
    )


def _progressing(
    conditions: list[Obj],
    d: Obj,
    new_rs: Obj | None,
    counts: dict[str, int],
    *,
    progress_reason: tuple[str, str] | None,
    now: datetime,
) -> tuple[list[Obj], float | None, bool]:
    """The Progressing condition, when to look again, and whether it just timed out."""
    spec = d.get("spec", {})
    old_status = d.get("status") or {}
    desired = int(spec.get("replicas", 1))
    available = counts["availableReplicas"]
    recheck: float | None = None
    timed_out = False
    deadline_s = spec.get("progressDeadlineSeconds", 600)
    rs_name = new_rs["metadata"]["name"] if new_rs else ""
    if spec.get("paused"):
        conditions = set_condition(
            conditions,
            kind="Progressing",
            status="Unknown",
            reason="DeploymentPaused",
            message="Deployment is paused",
            now=now,
            with_update_time=True,
        )
    elif deadline_s is not None and new_rs is not None:
        complete = (
            counts["updatedReplicas"] == desired
            and counts["replicas"] == desired
            and available == desired
        )
        current = next((c for c in conditions if c.get("type") == "Progressing"), None)
        progressed = (
            counts["updatedReplicas"] > int(old_status.get("updatedReplicas", 0))
            or counts["readyReplicas"] > int(old_status.get("readyReplicas", 0))
            or available > int(old_status.get("availableReplicas", 0))
            or counts["replicas"] < int(old_status.get("replicas", 0))
        )
        if complete:
            conditions = set_condition(
                conditions,
                kind="Progressing",
                status="True",
                reason="NewReplicaSetAvailable",
                message=f'ReplicaSet "{rs_name}" has successfully progressed.',
                now=now,
                with_update_time=True,
            )
        elif progress_reason is not None or current is None:
            reason, message = progress_reason or (
                "FoundNewReplicaSet",
                f'Found new replica set "{rs_name}"',
            )
            conditions = set_condition(
                conditions,
                kind="Progressing",
                status="True",
                reason=reason,
                message=message,
                now=now,
                with_update_time=True,
            )
            recheck = float(deadline_s)
        elif progressed or current.get("reason") == "NewReplicaSetAvailable":
            conditions = [c for c in conditions if c.get("type") != "Progressing"]
            conditions = set_condition(
                conditions,
                kind="Progressing",
                status="True",
                reason="ReplicaSetUpdated",
                message=f'ReplicaSet "{rs_name}" is progressing.',
                now=now,
                with_update_time=True,
            )
            # Keep the transition time: the condition stayed True.
            if current.get("status") == "True":
                conditions[-1]["lastTransitionTime"] = current.get("lastTransitionTime")
            recheck = float(deadline_s)
        elif current.get("status") == "True":
            since = parse_rfc3339(current.get("lastUpdateTime"))
            waited = (now - since).total_seconds() if since else 0.0
            if waited >= float(deadline_s):
                conditions = set_condition(
                    conditions,
                    kind="Progressing",
                    status="False",
                    reason="ProgressDeadlineExceeded",
                    message=f'ReplicaSet "{rs_name}" has timed out progressing.',
                    now=now,
                    with_update_time=True,
                )
                timed_out = True
            else:
                recheck = float(deadline_s) - waited
    return conditions, recheck, timed_out
