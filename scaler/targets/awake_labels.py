"""The warm tier behind an InferencePool: only awake replicas carry the label the pool selects.

Behind Tidal's activator, a replica the warm tier puts to sleep is taken
out of rotation by the scaler's answers to the activators (the
``sleeping`` endpoints). An endpoint picker hears nothing of the scaler: it
routes to every Ready pod its pool selects, and a sleeping vLLM answers
503. So for a pool whose selector requires ``autoscaling.tidal.dev/awake:
"true"`` (the pod template carries it, so every new replica starts
selected), the scaler keeps that label in step with the warm tier: a pod
the tier is putting to sleep, sleeps or is waking is labelled ``"false"``
(the picker drops it from the pool at once, before the sleep call, which
waits out the tier's hand-off), and ``"true"`` again once it is awake.
When every replica sleeps, the pool has no endpoint: a request waits in
the picker's queue, the scaler sees it there (the waiting room) and its
activation wakes a sleeping replica, whose label comes back as soon as the
wake and its warm-up end (docs/gateway-api.md, docs/warm-tier.md).

Main decision, only where the pool asks for it: a pool whose selector does
not name the label gets no label written (its pods would stay selected
whatever the label said, so writing it would only churn the pods), and
neither does a Deployment whose own selector names it (the pod would leave
its ReplicaSet, which would start another); docs/gateway-api.md says how to
ask. The labels are written by the
leader, through the actuator, at every tick after the warm tier's intents,
and right after an activation's wake.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from scaler.actuator import Actuator
from scaler.kube.types import PodInfo, TargetSnapshot
from scaler.policy.pool_annotations import AWAKE_LABEL
from scaler.targets.book import TargetConfig

__all__ = ["AwakeLabels", "awake_changes", "wants_awake_label"]

log = logging.getLogger(__name__)


def wants_awake_label(entry: TargetConfig | None, snap: TargetSnapshot) -> bool:
    """Whether ``entry``'s pool selects only pods labelled awake, and the Deployment's own
    selector leaves the label alone (a pod relabelled out of it would be orphaned, and
    its ReplicaSet would start another)."""
    pool = entry.pool if entry is not None else None
    info = pool.info if pool is not None else None
    if info is None or info.selector.get(AWAKE_LABEL) != "true":
        return False
    selector = snap.deployment.selector
    named = {*selector.match_labels, *(r.key for r in selector.match_expressions)}
    return AWAKE_LABEL not in named


def awake_changes(pods: Sequence[PodInfo], not_awake: Collection[str]) -> dict[str, str]:
    """Pod name -> the awake label it must get (only where it differs): ``"false"`` for
    the pods in ``not_awake`` (``namespace/pod``), ``"true"`` for the others; terminating
    pods are left as they are."""
    out = {}
    for pod in pods:
        if pod.terminating:
            continue
        want = "false" if f"{pod.namespace}/{pod.name}" in not_awake else "true"
        if pod.labels.get(AWAKE_LABEL) != want:
            out[pod.name] = want
    return out


class AwakeLabels:
    """Keeps the awake label of pool targets' pods in step with the warm tier."""

    def __init__(self, actuator: Actuator) -> None:
        self._actuator = actuator

    async def sync(
        self,
        entries: Mapping[str, TargetConfig],
        snapshots: Mapping[str, TargetSnapshot],
        not_awake: Collection[str],
        *,
        keys: Collection[str] | None = None,
    ) -> None:
        """Write the labels that differ, for ``keys`` (default: every target)."""
        for key in entries.keys() if keys is None else keys:
            snap = snapshots.get(key)
            if snap is None or not wants_awake_label(entries.get(key), snap):
                continue
            changes = awake_changes(snap.pods, not_awake)
            if changes and await self._actuator.label_pods(
                snap.deployment.namespace, AWAKE_LABEL, changes
            ):
                log.info("%s: awake label set: %s", key, changes)
