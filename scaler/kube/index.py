"""Opted-in Deployments and pods -> the targets' snapshots, kept current per event.

:class:`TargetIndex` holds what the watches delivered (Deployments by key,
pods by namespace and name) and answers :meth:`TargetIndex.targets`: each
Deployment with the pods its selector matches, as the ReplicaSet controller
decides it. Pure bookkeeping, no I/O: :class:`~scaler.kube.cluster.KubeCluster`
feeds it from its watches, and tests feed it events directly.

Main decision, snapshots updated per event, not rebuilt: matching every pod
against every Deployment costs deployments x pods (a million selector checks
for 1,000 models of one replica each in one namespace), far too much to redo
after each watch event (the scaler's own status writes are events too). So
the full match is done only after a (re-)list; a Deployment event replaces
that Deployment's entry (its pods are matched again only if its selector
changed), and a pod event touches only the Deployments of its namespace whose
selector matches the pod's old or new labels, found through an index of the
selectors by one of their ``matchLabels`` (a selector with none is checked
against every pod of its namespace). Each change builds a new
mapping (copy on write), so a snapshot a caller holds never changes under it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scaler.kube.types import DeploymentInfo, PodInfo, TargetSnapshot

__all__ = ["TargetIndex"]


class TargetIndex:
    """Deployments and pods as the watches last saw them, and their snapshots."""

    def __init__(self) -> None:
        self._deployments: dict[str, DeploymentInfo] = {}
        self._pods: dict[str, dict[str, PodInfo]] = {}  # namespace -> name -> pod
        self._snapshot: dict[str, TargetSnapshot] | None = None
        # (namespace, label, value) -> Deployments whose selector requires it; and per
        # namespace the Deployments whose selector has no matchLabels.
        self._by_label: dict[tuple[str, str, str], set[str]] = {}
        self._unlabelled: dict[str, set[str]] = {}

    @staticmethod
    def _slot(d: DeploymentInfo) -> tuple[str, str, str] | None:
        labels = d.selector.match_labels
        if not labels:
            return None
        first = min(labels)
        return (d.namespace, first, labels[first])

    def _index(self, d: DeploymentInfo) -> None:
        slot = self._slot(d)
        if slot is None:
            self._unlabelled.setdefault(d.namespace, set()).add(d.key)
        else:
            self._by_label.setdefault(slot, set()).add(d.key)

    def _unindex(self, d: DeploymentInfo) -> None:
        slot = self._slot(d)
        keys = self._unlabelled.get(d.namespace) if slot is None else self._by_label.get(slot)
        if keys is not None:
            keys.discard(d.key)

    def _candidates(self, namespace: str, pods: Iterable[PodInfo | None]) -> set[str]:
        """Deployments of ``namespace`` whose selector may match one of ``pods``."""
        out = set(self._unlabelled.get(namespace, ()))
        for pod in pods:
            if pod is not None:
                for label, value in pod.labels.items():
                    out |= self._by_label.get((namespace, label, value), set())
        return out

    def namespaces(self) -> set[str]:
        """The namespaces that hold a Deployment (their pods must be watched)."""
        return {d.namespace for d in self._deployments.values()}

    def targets(self) -> Mapping[str, TargetSnapshot]:
        if self._snapshot is None:
            self._snapshot = {
                key: TargetSnapshot(deployment=d, pods=self._pods_of(d))
                for key, d in self._deployments.items()
            }
        return self._snapshot

    def _pods_of(self, d: DeploymentInfo) -> tuple[PodInfo, ...]:
        return tuple(
            p for p in self._pods.get(d.namespace, {}).values() if d.selector.matches(p.labels)
        )

    # -- Deployments -------------------------------------------------------------

    def reset_deployments(self, deployments: Iterable[DeploymentInfo]) -> None:
        """A (re-)list of the Deployments: everything is matched again at the next read."""
        self._deployments = {d.key: d for d in deployments}
        self._by_label, self._unlabelled = {}, {}
        for d in self._deployments.values():
            self._index(d)
        self._snapshot = None

    def put_deployment(self, d: DeploymentInfo) -> None:
        old = self._deployments.get(d.key)
        self._deployments[d.key] = d
        if old is not None:
            self._unindex(old)
        self._index(d)
        if self._snapshot is None:
            return
        held = self._snapshot.get(d.key)
        if held is not None and old is not None and old.selector == d.selector:
            pods = held.pods
        else:
            pods = self._pods_of(d)
        self._snapshot = {**self._snapshot, d.key: TargetSnapshot(deployment=d, pods=pods)}

    def delete_deployment(self, key: str) -> None:
        old = self._deployments.pop(key, None)
        if old is not None:
            self._unindex(old)
        if self._snapshot is not None and key in self._snapshot:
            self._snapshot = {k: v for k, v in self._snapshot.items() if k != key}

    # -- pods --------------------------------------------------------------------

    def reset_pods(self, namespace: str, pods: Iterable[PodInfo]) -> None:
        """A (re-)list of one namespace's pods."""
        self._pods[namespace] = {p.name: p for p in pods}
        self._snapshot = None

    def forget_namespace(self, namespace: str) -> None:
        if self._pods.pop(namespace, None) is not None:
            self._snapshot = None

    def put_pod(self, pod: PodInfo) -> None:
        pods = self._pods.setdefault(pod.namespace, {})
        old = pods.get(pod.name)
        pods[pod.name] = pod
        self._pod_changed(pod.namespace, pod.name, old, pod)

    def delete_pod(self, namespace: str, name: str) -> None:
        old = self._pods.get(namespace, {}).pop(name, None)
        if old is not None:
            self._pod_changed(namespace, name, old, None)

    def _pod_changed(
        self, namespace: str, name: str, old: PodInfo | None, new: PodInfo | None
    ) -> None:
        if self._snapshot is None:
            return
        changed: dict[str, TargetSnapshot] = {}
        for key in self._candidates(namespace, (old, new)):
            held = self._snapshot.get(key)
            if held is None:
                continue
            d = held.deployment
            was = old is not None and d.selector.matches(old.labels)
            now = new is not None and d.selector.matches(new.labels)
            if not (was or now):
                continue
            pods = tuple(p for p in held.pods if p.name != name)
            if now and new is not None:
                pods += (new,)
            changed[key] = TargetSnapshot(deployment=d, pods=pods)
        if changed:
            self._snapshot = {**self._snapshot, **changed}
