"""Deployments to ReplicaSets, as the real deployment controller does it.

Choice: we keep the real two-level ownership, Deployment -> ReplicaSet ->
Pod, rather than owning pods from the Deployment directly. Code tested
against the sandbox then sees what it sees on a real cluster: pods named
``<deployment>-<pod-template-hash>-<random>``, labelled
``pod-template-hash``, owned (``controller: true``) by a ReplicaSet that is
owned by the Deployment, so ``kubectl get rs``, ``describe`` and garbage
collection all behave as usual. The pods themselves are the ReplicaSet
controller's job (``replicaset.py``).

Each sync of a Deployment:

- finds its new ReplicaSet, the one whose template equals the Deployment's
  (ignoring the hash label), creating it when the template changed
  (revision annotation bumped, as ``kubectl rollout history`` reads it);
- rolls: ``RollingUpdate`` (the default, ``maxSurge``/``maxUnavailable``
  25%/25%) scales the new ReplicaSet up by at most what the surge allows and
  the old ones down by at most what availability allows, as
  ``rolling.go`` does (unhealthy old replicas first); ``Recreate`` scales
  the old ones to zero and waits for their pods to be gone first. A plain
  scale (same template) is the same step with one ReplicaSet. Mid-rollout
  scaling is not proportional (the real controller splits a scale change
  across the ReplicaSets by size; here the rollout absorbs it);
- removes old empty ReplicaSets past ``revisionHistoryLimit`` (10);
- writes status from the ReplicaSets: ``observedGeneration``, ``replicas``,
  ``updatedReplicas``, ``readyReplicas``, ``availableReplicas``,
  ``unavailableReplicas`` (zeros omitted, as the real API omits them), and
  the conditions ``Available`` (``MinimumReplicasAvailable`` /
  ``MinimumReplicasUnavailable``) and ``Progressing`` (``NewReplicaSetCreated``,
  ``FoundNewReplicaSet``, ``ReplicaSetUpdated``, ``NewReplicaSetAvailable``,
  ``ProgressDeadlineExceeded`` after ``progressDeadlineSeconds``).

``kubectl rollout status`` reads only these status fields: it waits for
``observedGeneration >= generation``, ``updatedReplicas == replicas ==
spec.replicas`` and ``availableReplicas == updatedReplicas``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from loadtests.sandbox.cluster.controllers.base import (
    DEPLOYMENTS,
    PODS,
    REPLICASETS,
    Cache,
    Controller,
    EventRecorder,
    Key,
    Obj,
    controller_ref,
    controller_uid,
    set_condition,
)
from loadtests.sandbox.cluster.store import Store, copy_object, parse_rfc3339

__all__ = ["DeploymentController", "pod_template_hash", "resolve_int_or_percent"]

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.SafeEncodeString


def pod_template_hash(template: Obj, collision_count: int = 0) -> str:
    """FNV-32a of the template, encoded as the real controller encodes it."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in str(h))


def resolve_int_or_percent(value: Any, total: int, *, round_up: bool, field: str) -> int:
    if value is None:
        value = "25%"
    if isinstance(value, int) and not isinstance(value, bool):
        return max(0, value)
    text = str(value).strip()
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            raise ValueError(f"{field}: {value!r} is not an integer or a percentage") from None
        amount = pct * total / 100
        return max(0, math.ceil(amount) if round_up else math.floor(amount))
    try:
        return max(0, int(text))
    except ValueError:
        raise ValueError(f"{field}: {value!r} is not an integer or a percentage") from None


def _without_hash(template: Obj) -> Obj:
    copied: Obj = copy_object(template)
    labels = (copied.get("metadata") or {}).get("labels")
    if labels:
        labels.pop(HASH_LABEL, None)
    return copied


def _replicas(rs: Obj) -> int:
    return int(rs.get("spec", {}).get("replicas", 0))


def _status(rs: Obj, field: str) -> int:
    return int(rs.get("status", {}).get(field, 0))


def _revision(obj: Obj) -> int:
    try:
        return int((obj["metadata"].get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


class DeploymentController(Controller):
    name = "deployment-controller"

    def __init__(self, store: Store, cache: Cache, *, recorder: EventRecorder) -> None:
        super().__init__(store, cache)
        self.recorder = recorder
        cache.on(DEPLOYMENTS, self._on_deployment)
        cache.on(REPLICASETS, self._on_replicaset)
        # Old pods going away matter to Recreate.
        cache.on(PODS, self._on_pod)
        for d in store.list(DEPLOYMENTS, copy=False)[0]:
            self.queue.add((d["metadata"]["namespace"], d["metadata"]["name"]))
        self._rs_owner: dict[str, Key] = {}

    def _on_deployment(self, _event: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        assert obj is not None
        self.queue.add((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def _on_replicaset(self, _event: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        assert obj is not None
        for ref in obj["metadata"].get("ownerReferences") or ():
            if ref.get("controller") and ref.get("kind") == "Deployment":
                key = (obj["metadata"]["namespace"], ref["name"])
                self._rs_owner[obj["metadata"]["uid"]] = key
                self.queue.add(key)
        if new is None:
            self._rs_owner.pop(obj["metadata"]["uid"], None)

    def _on_pod(self, event: str, old: Obj | None, new: Obj | None) -> None:
        if event != "DELETED" or old is None:
            return
        uid = controller_uid(old)
        if uid is not None and uid in self._rs_owner:
            self.queue.add(self._rs_owner[uid])

    # --- sync -------------------------------------------------------------------------

    def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        d = self.store.peek(DEPLOYMENTS, namespace, name)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return None
        spec = d.get("spec", {})
        desired = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        owned = self.cache.by(REPLICASETS, "owner", d["metadata"]["uid"])
        new_rs = next(
            (
                rs
                for rs in owned
                if _without_hash(rs["spec"].get("template") or {}) == _without_hash(template)
            ),
            None,
        )
        old_rss = sorted(
            (
                rs
                for rs in owned
                if new_rs is None or rs["metadata"]["uid"] != new_rs["metadata"]["uid"]
            ),
            key=lambda rs: (rs["metadata"].get("creationTimestamp", ""), rs["metadata"]["name"]),
        )
        progress_reason: tuple[str, str] | None = None
        paused = bool(spec.get("paused"))
        if new_rs is None and not paused:
            new_rs = self._create_replicaset(d, old_rss)
            progress_reason = (
                "NewReplicaSetCreated",
                f'Created new replica set "{new_rs["metadata"]["name"]}"',
            )
        elif new_rs is not None and _revision(new_rs) <= max(
            (_revision(r) for r in old_rss), default=0
        ):
            # An old template came back (rollback): it becomes the newest revision.
            new_rs = self._set_revision(new_rs, max(_revision(r) for r in old_rss) + 1)
        max_surge, max_unavailable = self._rolling_bounds(d, desired)
        if not paused and new_rs is not None:
            if (spec.get("strategy") or {}).get("type") == "Recreate":
                new_rs = self._recreate(new_rs, old_rss, desired)
            else:
                new_rs, old_rss = self._roll(new_rs, old_rss, desired, max_surge, max_unavailable)
            self._sync_revision(d, new_rs)
        if not paused:
            self._cleanup(d, old_rss)
        d = self.store.peek(DEPLOYMENTS, namespace, name)
        if d is None:
            return None
        return self._write_status(d, new_rs, old_rss, max_unavailable, progress_reason)

    def _rolling_bounds(self, d: Obj, desired: int) -> tuple[int, int]:
        strategy = d.get("spec", {}).get("strategy") or {}
        if strategy.get("type") == "Recreate":
            return 0, desired
        rolling = strategy.get("rollingUpdate") or {}
        surge = resolve_int_or_percent(
            rolling.get("maxSurge"),
            desired,
            round_up=True,
            field="spec.strategy.rollingUpdate.maxSurge",
        )
        unavailable = resolve_int_or_percent(
            rolling.get("maxUnavailable"),
            desired,
            round_up=False,
            field="spec.strategy.rollingUpdate.maxUnavailable",
        )
        if surge == 0 and unavailable == 0:
            unavailable = 1  # as the real controller: a rollout must be able to move
        return surge, unavailable

    def _create_replicaset(self, d: Obj, old_rss: list[Obj]) -> Obj:
        meta = d["metadata"]
        spec = d.get("spec", {})
        template: Obj = copy_object(spec.get("template") or {})
        collisions = int(d.get("status", {}).get("collisionCount", 0))
        pth = pod_template_hash(_without_hash(template), collisions)
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = pth
        selector: Obj = copy_object(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = pth
        desired = int(spec.get("replicas", 1))
        surge, _ = self._rolling_bounds(d, desired)
        if any(_replicas(rs) for rs in old_rss):
            # Rolling: start with what the surge allows; Recreate: start at zero.
            current = sum(_replicas(rs) for rs in old_rss)
            is_recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
            start = 0 if is_recreate else max(0, min(desired, desired + surge - current))
        else:
            start = desired
        revision = max((_revision(rs) for rs in old_rss), default=0) + 1
        rs = {
            "metadata": {
                "name": f"{meta['name']}-{pth}",
                "namespace": meta["namespace"],
                "labels": dict(template["metadata"]["labels"]),
                "annotations": {
                    DESIRED: str(desired),
                    MAX_REPLICAS: str(desired + surge),
                    REVISION: str(revision),
                },
                "ownerReferences": [controller_ref(d, kind="Deployment", api_version="apps/v1")],
            },
            "spec": {
                "replicas": start,
                "minReadySeconds": int(spec.get("minReadySeconds", 0)),
                "selector": selector,
                "template": template,
            },
        }
        created = self.store.create(REPLICASETS, rs, namespace=meta["namespace"])
        if start > 0:  # as the real controller: a replica set created empty scaled nothing
            self.recorder.record(
                d,
                event_type="Normal",
                reason="ScalingReplicaSet",
                message=f"Scaled up replica set {created['metadata']['name']} from 0 to {start}",
            )
        return (
            self.store.peek(REPLICASETS, meta["namespace"], created["metadata"]["name"]) or created
        )

    def _set_revision(self, rs: Obj, revision: int) -> Obj:
        annotations = {**(rs["metadata"].get("annotations") or {}), REVISION: str(revision)}
        return self.store.update(
            REPLICASETS, {**rs, "metadata": {**rs["metadata"], "annotations": annotations}}
        )

    def _sync_revision(self, d: Obj, new_rs: Obj) -> None:
        revision = str(_revision(new_rs))
        annotations = d["metadata"].get("annotations") or {}
        if annotations.get(REVISION) != revision:
            current = self.store.peek(
                DEPLOYMENTS, d["metadata"]["namespace"], d["metadata"]["name"]
            )
            if current is not None:
                meta = {
                    **current["metadata"],
                    "annotations": {
                        **(current["metadata"].get("annotations") or {}),
                        REVISION: revision,
                    },
                }
                self.store.update(DEPLOYMENTS, {**current, "metadata": meta})

    def _scale(self, d_name: str, rs: Obj, replicas: int, *, desired: int, max_total: int) -> Obj:
        current = _replicas(rs)
        if current == replicas:
            return rs
        annotations = {
            **(rs["metadata"].get("annotations") or {}),
            DESIRED: str(desired),
            MAX_REPLICAS: str(max_total),
        }
        updated = self.store.update(
            REPLICASETS,
            {
                **rs,
                "metadata": {**rs["metadata"], "annotations": annotations},
                "spec": {**rs["spec"], "replicas": replicas},
            },
        )
        owner = self.store.peek(DEPLOYMENTS, rs["metadata"]["namespace"], d_name)
        if owner is not None:
            direction = "up" if replicas > current else "down"
            self.recorder.record(
                owner,
                event_type="Normal",
                reason="ScalingReplicaSet",
                message=(
                    f"Scaled {direction} replica set {rs['metadata']['name']} "
                    f"from {current} to {replicas}"
                ),
            )
        return (
            self.store.peek(REPLICASETS, rs["metadata"]["namespace"], rs["metadata"]["name"])
            or updated
        )

    def _owner_name(self, rs: Obj) -> str:
        for ref in rs["metadata"].get("ownerReferences") or ():
            if ref.get("controller"):
                return str(ref["name"])
        return ""

    def _recreate(self, new_rs: Obj, old_rss: list[Obj], desired: int) -> Obj:
        owner = self._owner_name(new_rs)
        for rs in old_rss:
            if _replicas(rs):
                self._scale(owner, rs, 0, desired=desired, max_total=desired)
        old_pods = any(self.cache.by(PODS, "owner", rs["metadata"]["uid"]) for rs in old_rss)
        if old_pods:
            return new_rs  # wait until every old pod is gone
        return self._scale(owner, new_rs, desired, desired=desired, max_total=desired)

    def _roll(
        self, new_rs: Obj, old_rss: list[Obj], desired: int, max_surge: int, max_unavailable: int
    ) -> tuple[Obj, list[Obj]]:
        owner = self._owner_name(new_rs)
        max_total = desired + max_surge
        # 1. The new ReplicaSet: up to what the surge allows, or down to desired.
        if _replicas(new_rs) > desired:
            new_rs = self._scale(owner, new_rs, desired, desired=desired, max_total=max_total)
        elif _replicas(new_rs) < desired:
            current = _replicas(new_rs) + sum(_replicas(rs) for rs in old_rss)
            if current < max_total:
                up = min(max_total - current, desired - _replicas(new_rs))
                new_rs = self._scale(
                    owner, new_rs, _replicas(new_rs) + up, desired=desired, max_total=max_total
                )
        # 2. The old ones: down by what availability allows.
        if not any(_replicas(rs) for rs in old_rss):
            return new_rs, old_rss
        all_count = _replicas(new_rs) + sum(_replicas(rs) for rs in old_rss)
        min_available = desired - max_unavailable
        new_unavailable = _replicas(new_rs) - _status(new_rs, "availableReplicas")
        max_scaled_down = all_count - min_available - new_unavailable
        if max_scaled_down <= 0:
            return new_rs, old_rss
        updated: list[Obj] = []
        # First the old replicas that are not available anyway (cleanupUnhealthyReplicas).
        cleaned = 0
        for rs in old_rss:
            unhealthy = _replicas(rs) - _status(rs, "availableReplicas")
            if cleaned < max_scaled_down and unhealthy > 0:
                step = min(max_scaled_down - cleaned, unhealthy)
                rs = self._scale(
                    owner, rs, _replicas(rs) - step, desired=desired, max_total=max_total
                )
                cleaned += step
            updated.append(rs)
        old_rss = updated
        # Then available ones, keeping at least minAvailable available overall.
        available = _status(new_rs, "availableReplicas") + sum(
            min(_status(rs, "availableReplicas"), _replicas(rs)) for rs in old_rss
        )
        budget = available - min_available
        updated = []
        for rs in old_rss:
            if budget > 0 and _replicas(rs) > 0:
                step = min(_replicas(rs), budget)
                rs = self._scale(
                    owner, rs, _replicas(rs) - step, desired=desired, max_total=max_total
                )
                budget -= step
            updated.append(rs)
        return new_rs, updated

    def _cleanup(self, d: Obj, old_rss: list[Obj]) -> None:
        limit = int(d.get("spec", {}).get("revisionHistoryLimit", 10))
        empty = [rs for rs in old_rss if not _replicas(rs) and not _status(rs, "replicas")]
        for rs in empty[: max(0, len(empty) - limit)]:
            if not self.cache.by(PODS, "owner", rs["metadata"]["uid"]):
                self.store.delete(REPLICASETS, rs["metadata"]["namespace"], rs["metadata"]["name"])

    # --- status -----------------------------------------------------------------------

    def _write_status(
        self,
        d: Obj,
        new_rs: Obj | None,
        old_rss: list[Obj],
        max_unavailable: int,
        progress_reason: tuple[str, str] | None,
    ) -> float | None:
        ns = d["metadata"]["namespace"]
        if new_rs is not None:
            new_rs = self.store.peek(REPLICASETS, ns, new_rs["metadata"]["name"])
        olds = [self.store.peek(REPLICASETS, ns, rs["metadata"]["name"]) for rs in old_rss]
        all_rss = [rs for rs in [new_rs, *olds] if rs is not None]
        spec = d.get("spec", {})
        desired = int(spec.get("replicas", 1))
        total_spec = sum(_replicas(rs) for rs in all_rss)
        available = sum(_status(rs, "availableReplicas") for rs in all_rss)
        counts = {
            "replicas": sum(_status(rs, "replicas") for rs in all_rss),
            "updatedReplicas": _status(new_rs, "replicas") if new_rs else 0,
            "readyReplicas": sum(_status(rs, "readyReplicas") for rs in all_rss),
            "availableReplicas": available,
            "unavailableReplicas": max(0, total_spec - available),
        }
        old_status = d.get("status") or {}
        status: Obj = {"observedGeneration": d["metadata"].get("generation", 1)}
        status.update({k: v for k, v in counts.items() if v})
        if old_status.get("collisionCount"):
            status["collisionCount"] = old_status["collisionCount"]
        now = self.store.now()
        conditions = list(old_status.get("conditions") or [])
        if available >= desired - max_unavailable:
            conditions = set_condition(
                conditions,
                kind="Available",
                status="True",
                reason="MinimumReplicasAvailable",
                message="Deployment has minimum availability.",
                now=now,
                with_update_time=True,
            )
        else:
            conditions = set_condition(
                conditions,
                kind="Available",
                status="False",
                reason="MinimumReplicasUnavailable",
                message="Deployment does not have minimum availability.",
                now=now,
                with_update_time=True,
            )
        recheck: float | None = None
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
                    self.recorder.record(
                        d,
                        event_type="Warning",
                        reason="ProgressDeadlineExceeded",
                        message=f'ReplicaSet "{rs_name}" has timed out progressing.',
                    )
                else:
                    recheck = float(deadline_s) - waited
        # Available first, then Progressing, as kubectl shows them.
        order = {"Available": 0, "Progressing": 1}
        status["conditions"] = sorted(conditions, key=lambda c: order.get(c.get("type", ""), 2))
        if status != old_status:
            self.store.update(DEPLOYMENTS, {**d, "status": status}, subresource="status")
        return recheck
