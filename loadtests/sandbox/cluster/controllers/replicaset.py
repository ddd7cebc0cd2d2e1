"""ReplicaSets to pods, as the real ReplicaSet controller does it.

The deployment controller (``deployment.py``) owns ReplicaSets, one per pod
template (named ``<deployment>-<pod-template-hash>``), and this controller
owns the pods: it creates pods from the ReplicaSet's template (named
``<replicaset>-<random>``, with an ``ownerReference`` that has
``controller: true``, so deleting the Deployment garbage-collects all of
them) until the active ones match ``spec.replicas``, and deletes the
surplus.

Which pods go on scale-down is the real controller's ranking
(``ActivePodsWithRanks`` in kubernetes/pkg/controller/controller_utils.go),
first criterion first:

1. not yet scheduled before scheduled;
2. phase Pending before Unknown before Running;
3. not ready before ready;
4. lower ``controller.kubernetes.io/pod-deletion-cost`` before higher
   (an int32 annotation; missing or invalid reads as 0);
5. pods sharing their node with more pods of the same Deployment first;
6. ready for less time before ready for longer;
7. more container restarts before fewer;
8. newer before older (then by uid, for a stable order).

The real controller compares 6 and 8 on a log2 time scale (the
LogarithmicScaleDown feature); we compare plain times, which differs only
between pods started within the same power-of-two interval.

Status: ``replicas`` (active pods), ``fullyLabeledReplicas``,
``readyReplicas``, ``availableReplicas`` (ready for ``minReadySeconds``) and
``observedGeneration``, with zero counts left out as the real API omits them.
"""

from __future__ import annotations

import contextlib
from typing import Any

from loadtests.sandbox.cluster.controllers.base import (
    PODS,
    REPLICASETS,
    Cache,
    Controller,
    Key,
    Obj,
    condition,
    controller_ref,
    controller_uid,
    is_pod_active,
    is_pod_ready,
)
from loadtests.sandbox.cluster.errors import NotFound
from loadtests.sandbox.cluster.store import Store, copy_object, parse_rfc3339

__all__ = ["DELETION_COST", "ReplicaSetController", "deletion_rank", "pod_from_template"]

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
# The real controller creates at most this many pods per sync ("burst").
_BURST = 500
_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}


def _deletion_cost(pod: Obj) -> int:
    raw = (pod["metadata"].get("annotations") or {}).get(DELETION_COST)
    if raw is None:
        return 0
    try:
        cost = int(str(raw).strip())
    except ValueError:
        return 0
    return cost if -(2**31) <= cost < 2**31 else 0


def deletion_rank(pod: Obj, *, colocated: int) -> tuple[Any, ...]:
    """Sort key: pods that sort first are deleted first (see the module docstring)."""
    status = pod.get("status", {})
    ready = is_pod_ready(pod)
    ready_since = parse_rfc3339((condition(pod, "Ready") or {}).get("lastTransitionTime"))
    created = parse_rfc3339(pod["metadata"].get("creationTimestamp"))
    restarts = sum(int(c.get("restartCount", 0)) for c in status.get("containerStatuses") or ())
    return (
        bool(pod.get("spec", {}).get("nodeName")),
        _PHASE_ORDER.get(status.get("phase", "Pending"), 0),
        ready,
        _deletion_cost(pod),
        -colocated,
        # Ready for less time first: a later ready time sorts first.
        -(ready_since.timestamp()) if ready and ready_since else float("-inf"),
        -restarts,
        -(created.timestamp()) if created else float("-inf"),
        pod["metadata"].get("uid", ""),
    )


def pod_from_template(owner: Obj, template: Obj, *, owner_kind: str) -> Obj:
    """A pod as the controller would create it from ``template``.

    Through the API server the pod would get its defaults there; created
    in-process it gets the ones kubectl shows and the kubelet reads here.
    """
    meta = owner["metadata"]
    tmeta = template.get("metadata") or {}
    spec = copy_object(template.get("spec") or {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("securityContext", {})
    for container in spec.get("containers") or ():
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("imagePullPolicy", "IfNotPresent")
        container.setdefault("resources", {})
        resources = container["resources"]
        # Requests default to limits, as the API server's defaulting does.
        for name, value in (resources.get("limits") or {}).items():
            resources.setdefault("requests", {}).setdefault(name, value)
        for port in container.get("ports") or ():
            port.setdefault("protocol", "TCP")
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": dict(tmeta.get("labels") or {}),
            "ownerReferences": [
                controller_ref(
                    owner, kind=owner_kind, api_version=owner.get("apiVersion", "apps/v1")
                )
            ],
        },
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": _qos_class(spec)},
    }
    if tmeta.get("annotations"):
        pod["metadata"]["annotations"] = dict(tmeta["annotations"])
    return pod


def _qos_class(spec: Obj) -> str:
    containers = spec.get("containers") or []
    if not any(
        (c.get("resources") or {}).get("requests") or (c.get("resources") or {}).get("limits")
        for c in containers
    ):
        return "BestEffort"
    for c in containers:
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                return "Burstable"
    return "Guaranteed"


class ReplicaSetController(Controller):
    name = "replicaset-controller"

    def __init__(self, store: Store, cache: Cache) -> None:
        super().__init__(store, cache)
        cache.on(REPLICASETS, self._on_replicaset)
        cache.on(PODS, self._on_pod)
        for rs in store.list(REPLICASETS, copy=False)[0]:
            self.queue.add((rs["metadata"]["namespace"], rs["metadata"]["name"]))

    def _on_replicaset(self, _event: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        assert obj is not None
        self.queue.add((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def _on_pod(self, _event: str, old: Obj | None, new: Obj | None) -> None:
        for pod in (old, new):
            if pod is None:
                continue
            uid = controller_uid(pod)
            if uid is None:
                continue
            for ref in pod["metadata"].get("ownerReferences") or ():
                if ref.get("uid") == uid and ref.get("kind") == "ReplicaSet":
                    self.queue.add((pod["metadata"]["namespace"], ref["name"]))

    def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        rs = self.store.peek(REPLICASETS, namespace, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return None
        uid = rs["metadata"]["uid"]
        pods = self.cache.by(PODS, "owner", uid)
        active = [p for p in pods if is_pod_active(p)]
        want = int(rs.get("spec", {}).get("replicas", 1))
        diff = len(active) - want
        if diff < 0:
            for _ in range(min(-diff, _BURST)):
                self.store.create(
                    PODS,
                    pod_from_template(
                        rs, rs["spec"].get("template") or {}, owner_kind="ReplicaSet"
                    ),
                    namespace=namespace,
                )
        elif diff > 0:
            for pod in self._pods_to_delete(rs, active, diff):
                with contextlib.suppress(NotFound):
                    self.store.delete(PODS, namespace, pod["metadata"]["name"])
        return self._update_status(rs)

    def _pods_to_delete(self, rs: Obj, active: list[Obj], count: int) -> list[Obj]:
        if count >= len(active):
            return active
        # Pods of the same Deployment (all its ReplicaSets) on each node.
        related: list[Obj] = []
        owner = controller_uid(rs)
        if owner is not None:
            for sibling in self.cache.by(REPLICASETS, "owner", owner):
                related.extend(self.cache.by(PODS, "owner", sibling["metadata"]["uid"]))
        else:
            related = active
        on_node: dict[str, int] = {}
        for pod in related:
            node = pod.get("spec", {}).get("nodeName")
            if node and is_pod_active(pod):
                on_node[node] = on_node.get(node, 0) + 1
        ranked = sorted(
            active,
            key=lambda p: deletion_rank(
                p, colocated=on_node.get(p.get("spec", {}).get("nodeName") or "", 0)
            ),
        )
        return ranked[:count]

    def _update_status(self, rs: Obj) -> float | None:
        meta = rs["metadata"]
        pods = [p for p in self.cache.by(PODS, "owner", meta["uid"]) if is_pod_active(p)]
        template_labels = ((rs.get("spec", {}).get("template") or {}).get("metadata") or {}).get(
            "labels"
        ) or {}
        min_ready_s = int(rs.get("spec", {}).get("minReadySeconds", 0))
        now = self.store.now()
        ready = available = fully = 0
        recheck: float | None = None
        for pod in pods:
            labels = pod["metadata"].get("labels") or {}
            if all(labels.get(k) == v for k, v in template_labels.items()):
                fully += 1
            if not is_pod_ready(pod):
                continue
            ready += 1
            since = parse_rfc3339((condition(pod, "Ready") or {}).get("lastTransitionTime"))
            waited = (now - since).total_seconds() if since else 0.0
            if min_ready_s <= 0 or waited >= min_ready_s:
                available += 1
            else:
                left = min_ready_s - waited
                recheck = left if recheck is None else min(recheck, left)
        # ``replicas`` is always there; the other counts are omitted at zero.
        status: Obj = {"replicas": len(pods)}
        for field, value in (
            ("fullyLabeledReplicas", fully),
            ("readyReplicas", ready),
            ("availableReplicas", available),
        ):
            if value:
                status[field] = value
        status["observedGeneration"] = meta.get("generation", 1)
        if status != rs.get("status"):
            self.store.update(REPLICASETS, {**rs, "status": status}, subresource="status")
        return recheck
