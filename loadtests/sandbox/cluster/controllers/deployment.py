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
- writes status from the ReplicaSets (:mod:`.deployment_status`: the counts,
  the conditions ``Available`` and ``Progressing``, the progress deadline).

What the rollout asks of the ReplicaSets before anything is written (the
template hash, the surge and unavailability bounds, a new ReplicaSet) is
:mod:`.deployment_rollout`; this module does the writes, with the real
controller's ``ScalingReplicaSet`` Events.

``kubectl rollout status`` reads only these status fields: it waits for
``observedGeneration >= generation``, ``updatedReplicas == replicas ==
spec.replicas`` and ``availableReplicas == updatedReplicas``.
"""

from __future__ import annotations

from loadtests.sandbox.cluster.controllers.base import (
    DEPLOYMENTS,
    PODS,
    REPLICASETS,
    Cache,
    Controller,
    EventRecorder,
    Key,
    Obj,
    controller_uid,
)
from loadtests.sandbox.cluster.controllers.deployment_rollout import (
    DESIRED,
    MAX_REPLICAS,
    REVISION,
    new_replicaset,
    replicas_of,
    revision_of,
    rolling_bounds,
    status_count,
    without_hash,
)
from loadtests.sandbox.cluster.controllers.deployment_status import deployment_status
from loadtests.sandbox.cluster.store import Store

__all__ = ["DeploymentController"]


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
                if without_hash(rs["spec"].get("template") or {}) == without_hash(template)
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
        elif new_rs is not None and revision_of(new_rs) <= max(
            (revision_of(r) for r in old_rss), default=0
        ):
            # An old template came back (rollback): it becomes the newest revision.
            new_rs = self._setrevision_of(new_rs, max(revision_of(r) for r in old_rss) + 1)
        max_surge, max_unavailable = rolling_bounds(d, desired)
        if not paused and new_rs is not None:
            if (spec.get("strategy") or {}).get("type") == "Recreate":
                new_rs = self._recreate(new_rs, old_rss, desired)
            else:
                new_rs, old_rss = self._roll(new_rs, old_rss, desired, max_surge, max_unavailable)
            self._syncrevision_of(d, new_rs)
        if not paused:
            self._cleanup(d, old_rss)
        d = self.store.peek(DEPLOYMENTS, namespace, name)
        if d is None:
            return None
        return self._write_status(d, new_rs, old_rss, max_unavailable, progress_reason)

    def _create_replicaset(self, d: Obj, old_rss: list[Obj]) -> Obj:
        meta = d["metadata"]
        rs, start = new_replicaset(d, old_rss)
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

    def _setrevision_of(self, rs: Obj, revision: int) -> Obj:
        annotations = {**(rs["metadata"].get("annotations") or {}), REVISION: str(revision)}
        return self.store.update(
            REPLICASETS, {**rs, "metadata": {**rs["metadata"], "annotations": annotations}}
        )

    def _syncrevision_of(self, d: Obj, new_rs: Obj) -> None:
        revision = str(revision_of(new_rs))
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
        current = replicas_of(rs)
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
            if replicas_of(rs):
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
        if replicas_of(new_rs) > desired:
            new_rs = self._scale(owner, new_rs, desired, desired=desired, max_total=max_total)
        elif replicas_of(new_rs) < desired:
            current = replicas_of(new_rs) + sum(replicas_of(rs) for rs in old_rss)
            if current < max_total:
                up = min(max_total - current, desired - replicas_of(new_rs))
                new_rs = self._scale(
                    owner, new_rs, replicas_of(new_rs) + up, desired=desired, max_total=max_total
                )
        # 2. The old ones: down by what availability allows.
        if not any(replicas_of(rs) for rs in old_rss):
            return new_rs, old_rss
        all_count = replicas_of(new_rs) + sum(replicas_of(rs) for rs in old_rss)
        min_available = desired - max_unavailable
        new_unavailable = replicas_of(new_rs) - status_count(new_rs, "availableReplicas")
        max_scaled_down = all_count - min_available - new_unavailable
        if max_scaled_down <= 0:
            return new_rs, old_rss
        updated: list[Obj] = []
        # First the old replicas that are not available anyway (cleanupUnhealthyReplicas).
        cleaned = 0
        for rs in old_rss:
            unhealthy = replicas_of(rs) - status_count(rs, "availableReplicas")
            if cleaned < max_scaled_down and unhealthy > 0:
                step = min(max_scaled_down - cleaned, unhealthy)
                rs = self._scale(
                    owner, rs, replicas_of(rs) - step, desired=desired, max_total=max_total
                )
                cleaned += step
            updated.append(rs)
        old_rss = updated
        # Then available ones, keeping at least minAvailable available overall.
        available = status_count(new_rs, "availableReplicas") + sum(
            min(status_count(rs, "availableReplicas"), replicas_of(rs)) for rs in old_rss
        )
        budget = available - min_available
        updated = []
        for rs in old_rss:
            if budget > 0 and replicas_of(rs) > 0:
                step = min(replicas_of(rs), budget)
                rs = self._scale(
                    owner, rs, replicas_of(rs) - step, desired=desired, max_total=max_total
                )
                budget -= step
            updated.append(rs)
        return new_rs, updated

    def _cleanup(self, d: Obj, old_rss: list[Obj]) -> None:
        limit = int(d.get("spec", {}).get("revisionHistoryLimit", 10))
        empty = [rs for rs in old_rss if not replicas_of(rs) and not status_count(rs, "replicas")]
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
        """Write the status the ReplicaSets give ``d`` (as they are now) when it changed;
        when to reconcile again."""
        ns = d["metadata"]["namespace"]
        if new_rs is not None:
            new_rs = self.store.peek(REPLICASETS, ns, new_rs["metadata"]["name"])
        olds = [self.store.peek(REPLICASETS, ns, rs["metadata"]["name"]) for rs in old_rss]
        made = deployment_status(
            d,
            new_rs,
            [rs for rs in [new_rs, *olds] if rs is not None],
            max_unavailable=max_unavailable,
            progress_reason=progress_reason,
            now=self.store.now(),
        )
        if made.timed_out:
            rs_name = new_rs["metadata"]["name"] if new_rs else ""
            self.recorder.record(
                d,
                event_type="Warning",
                reason="ProgressDeadlineExceeded",
                message=f'ReplicaSet "{rs_name}" has timed out progressing.',
            )
        if made.status != (d.get("status") or {}):
            self.store.update(DEPLOYMENTS, {**d, "status": made.status}, subresource="status")
        return made.recheck_s
