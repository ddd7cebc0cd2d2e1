"""Which pods a scale-down should remove: pod-deletion-cost from load (docs/architecture.md).

Before lowering ``spec.replicas`` the scaler sets
``controller.kubernetes.io/pod-deletion-cost`` on the target's pods to their
load (requests running or held for them, rounded up), so the ReplicaSet
removes the idlest first and cuts as few requests as it can.

Main decision, unknown load: a pod no source reports on ranks as busy as the
busiest known pod, so an unmeasured pod is never taken for an idle one. Load
is looked up by pod name, then by ``ip:port`` (activators key pods by
address). Only costs that differ from the pod's current one are returned, so
an unchanged ranking writes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol

__all__ = ["RankedPod", "deletion_costs"]


class RankedPod(Protocol):
    """What ranking needs of a pod (``scaler.kube.types.PodInfo`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def ip(self) -> str | None: ...

    @property
    def deletion_cost(self) -> int | None: ...


def _load_of(pod: RankedPod, load: Mapping[str, float]) -> float:
    value = load.get(pod.name)
    if value is None and pod.ip:
        value = next((v for k, v in load.items() if k.split(":")[0] == pod.ip), None)
    if value is None:
        value = max(load.values(), default=0.0)
    return value


def deletion_costs(pods: Sequence[RankedPod], load: Mapping[str, float]) -> dict[str, int]:
    """Pod name -> the deletion cost to set, for the pods whose cost must change.

    ``load`` maps a pod name or ``ip:port`` to the requests on it.
    """
    costs = {}
    for pod in pods:
        cost = math.ceil(_load_of(pod, load))
        if pod.deletion_cost != cost:
            costs[pod.name] = cost
    return costs
