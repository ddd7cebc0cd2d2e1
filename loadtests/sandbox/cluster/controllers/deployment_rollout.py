"""What a Deployment asks of its ReplicaSets, worked out without writing: hashes, bounds, a new one.

As the real deployment controller: the ``pod-template-hash`` is FNV-32a of
the pod template (with the collision count), encoded as
``rand.SafeEncodeString`` does; ``maxSurge`` and ``maxUnavailable`` resolve
against the desired replicas (a percentage rounds the surge up and the
unavailability down; both 0 makes the unavailability 1, so a rollout can
move), and ``Recreate`` allows no surge. A new ReplicaSet takes the
template with the hash label, the selector with it, the next revision,
and starts at what the surge allows (at zero under ``Recreate`` while old
replicas run; at the desired replicas when there are none).
"""

from __future__ import annotations

import json
import math
from typing import Any

from loadtests.sandbox.cluster.controllers.base import Obj, controller_ref
from loadtests.sandbox.cluster.store import copy_object

__all__ = [
    "DESIRED",
    "HASH_LABEL",
    "MAX_REPLICAS",
    "REVISION",
    "new_replicaset",
    "pod_template_hash",
    "replicas_of",
    "resolve_int_or_percent",
    "revision_of",
    "rolling_bounds",
    "status_count",
    "without_hash",
]

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


def without_hash(template: Obj) -> Obj:
    copied: Obj = copy_object(template)
    labels = (copied.get("metadata") or {}).get("labels")
    if labels:
        labels.pop(HASH_LABEL, None)
    return copied


def replicas_of(rs: Obj) -> int:
    return int(rs.get("spec", {}).get("replicas", 0))


def status_count(rs: Obj, field: str) -> int:
    return int(rs.get("status", {}).get(field, 0))


def revision_of(obj: Obj) -> int:
    try:
        return int((obj["metadata"].get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def rolling_bounds(d: Obj, desired: int) -> tuple[int, int]:
    """``(maxSurge, maxUnavailable)`` of ``d`` as replica counts for ``desired``."""
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


def new_replicaset(d: Obj, old_rss: list[Obj]) -> tuple[Obj, int]:
    """The ReplicaSet ``d``'s template asks for next (its ``old_rss`` beside it), and the
    replicas it starts with."""
    meta = d["metadata"]
    spec = d.get("spec", {})
    template: Obj = copy_object(spec.get("template") or {})
    collisions = int(d.get("status", {}).get("collisionCount", 0))
    pth = pod_template_hash(without_hash(template), collisions)
    template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = pth
    selector: Obj = copy_object(spec.get("selector") or {})
    selector.setdefault("matchLabels", {})[HASH_LABEL] = pth
    desired = int(spec.get("replicas", 1))
    surge, _ = rolling_bounds(d, desired)
    if any(replicas_of(rs) for rs in old_rss):
        # Rolling: start with what the surge allows; Recreate: start at zero.
        current = sum(replicas_of(rs) for rs in old_rss)
        is_recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
        start = 0 if is_recreate else max(0, min(desired, desired + surge - current))
    else:
        start = desired
    revision = max((revision_of(rs) for rs in old_rss), default=0) + 1
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
    return rs, start
