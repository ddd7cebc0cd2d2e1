"""Raw Kubernetes objects (JSON as the API server serves them) -> the scaler's plain values.

:func:`deployment_from_raw` and :func:`pod_from_raw` read the handful of
fields the scaler uses (:mod:`scaler.kube.types`) out of a Deployment and a
Pod; every watch and listing of the scaler goes through them, so a field is
read one way wherever it is read.

Main decision: a missing or malformed field takes the API's own default
(an omitted ``spec.replicas`` is 1) or a neutral value (0, empty), never an
exception: one odd object must not stop a watch.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from groundwork.kube.raw import RawObject
from scaler.kube.types import (
    POD_DELETION_COST,
    DeploymentInfo,
    LabelRequirement,
    LabelSelector,
    PodInfo,
)
from scaler.policy.placement.cost import gpu_requests, gpus_requested

__all__ = ["GPU_RESOURCE", "deployment_from_raw", "pod_from_raw"]


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


GPU_RESOURCE = "nvidia.com/gpu"


def _epoch(text: Any) -> float:
    """Seconds since the epoch of an RFC 3339 timestamp (0 when missing or bad)."""
    if not isinstance(text, str) or not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _gpus(spec: RawObject) -> int:
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    total = 0
    for c in pod_spec.get("containers") or ():
        res = c.get("resources") or {}
        got = (res.get("limits") or {}).get(GPU_RESOURCE) or (res.get("requests") or {}).get(
            GPU_RESOURCE
        )
        total += _int(got, 0)
    return total or 1


def deployment_from_raw(obj: RawObject) -> DeploymentInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    sel = spec.get("selector") or {}
    exprs = tuple(
        LabelRequirement(
            key=str(e.get("key", "")),
            operator=str(e.get("operator", "")),
            values=tuple(str(v) for v in e.get("values") or ()),
        )
        for e in sel.get("matchExpressions") or ()
    )
    return DeploymentInfo(
        namespace=str(meta.get("namespace", "default")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        annotations=dict(meta.get("annotations") or {}),
        # apps/v1 defaults an omitted spec.replicas to 1.
        spec_replicas=_int(spec.get("replicas", 1), 1),
        ready_replicas=_int(status.get("readyReplicas", 0), 0),
        selector=LabelSelector(
            match_labels=dict(sel.get("matchLabels") or {}), match_expressions=exprs
        ),
        resource_version=str(meta.get("resourceVersion", "")),
        gpus_per_replica=_gpus(spec),
        raw=obj,
        pod_labels=dict(((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}),
        labels=dict(meta.get("labels") or {}),
    )


def pod_from_raw(obj: RawObject) -> PodInfo:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    ready_condition = next(
        (
            c
            for c in status.get("conditions") or ()
            if c.get("type") == "Ready" and c.get("status") == "True"
        ),
        None,
    )
    ready = ready_condition is not None
    ports: dict[str, int] = {}
    for container in spec.get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") and port.get("containerPort"):
                ports.setdefault(str(port["name"]), _int(port["containerPort"], 0))
    cost = (meta.get("annotations") or {}).get(POD_DELETION_COST)
    evicted = status.get("reason") == "Evicted" or any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    return PodInfo(
        namespace=str(meta.get("namespace", "default")),
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        ip=status.get("podIP") or None,
        ready=ready,
        terminating=meta.get("deletionTimestamp") is not None,
        ports=ports,
        deletion_cost=_int(cost, 0) if cost is not None else None,
        node=spec.get("nodeName") or None,
        phase=str(status.get("phase") or "Pending"),
        created_at=_epoch(meta.get("creationTimestamp")),
        evicted=evicted,
        gpus=gpus_requested(spec),
        gpu_resource=min(gpu_requests(spec), default=GPU_RESOURCE),
        ready_at=_epoch(ready_condition.get("lastTransitionTime")) or None
        if ready_condition is not None
        else None,
    )
