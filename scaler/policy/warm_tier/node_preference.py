"""A move's one write: the pod template prefers the node a replacement should start on (pure).

A pod cannot move in Kubernetes, and which time-sliced GPU a pod lands on
is the device plugin's choice within its node. What Tidal can say is which
*node* a model's next pod should prefer, and it says it where the scheduler
reads it: a preferred node affinity term in the Deployment's pod template,
``kubernetes.io/hostname In [node]`` at the highest weight (100). Changing
the template starts a rollout: the Deployment controller surges a new pod,
which the scheduler places on that node when it fits there (a preference,
never a requirement: a full node does not leave it Pending), and removes
the old pod once the new one is Ready. That is the move of
:mod:`scaler.policy.warm_tier.emptying`, done by the cluster's own
controllers.

:func:`prefer_node` edits a template and nothing else: the user's own
preferred terms are kept, Tidal's term (marked by the template annotation
:data:`PREFERRED_NODE`) is replaced, and ``None`` takes it away.

Main decision: only a Deployment of one replica is moved this way (the
warm tier's many rarely used models). With more, a rollout would replace
every replica and steer them all to one node; such targets keep their pods
where they are.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["HOSTNAME", "PREFERRED_NODE", "TIDAL_WEIGHT", "prefer_node", "preferred_node"]

#: The template annotation that marks Tidal's term and names its node.
PREFERRED_NODE = "warm.tidal.dev/preferred-node"
HOSTNAME = "kubernetes.io/hostname"
TIDAL_WEIGHT = 100
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _tidal_term(node: str) -> dict[str, Any]:
    expression = {"key": HOSTNAME, "operator": "In", "values": [node]}
    return {"weight": TIDAL_WEIGHT, "preference": {"matchExpressions": [expression]}}


def preferred_node(template: Mapping[str, Any]) -> str | None:
    """The node Tidal's term in ``template`` prefers (None: none)."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(PREFERRED_NODE)
    return value if isinstance(value, str) and value else None


def prefer_node(template: Mapping[str, Any], node: str | None) -> dict[str, Any]:
    """A copy of the pod ``template`` whose pods prefer ``node`` (None: no preference of
    Tidal's), the user's own terms kept."""
    out = copy.deepcopy(dict(template))
    old = preferred_node(out)
    spec = out.setdefault("spec", {})
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    terms = [t for t in node_affinity.get(_PREFERRED) or [] if old is None or t != _tidal_term(old)]
    annotations = out.setdefault("metadata", {}).setdefault("annotations", {})
    if node is not None:
        terms.append(_tidal_term(node))
        annotations[PREFERRED_NODE] = node
    else:
        annotations.pop(PREFERRED_NODE, None)
    if terms:
        node_affinity[_PREFERRED] = terms
    else:
        node_affinity.pop(_PREFERRED, None)
    # Leave no empty objects behind that the user did not have.
    if not node_affinity:
        spec["affinity"].pop("nodeAffinity")
    if not spec["affinity"]:
        spec.pop("affinity")
    if not annotations:
        out["metadata"].pop("annotations")
    if not out["metadata"]:
        out.pop("metadata")
    return out
