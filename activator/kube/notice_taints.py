"""Which node taints announce an interruption, for the activator.

A cloud takes a spot node back after a short notice, which a node handler
(Karpenter, GKE's maintenance handler, the AWS Node Termination Handler)
announces by tainting the node. The activator stops sending *new* requests
to replicas on such a node and lets the ones in flight finish
(:mod:`activator.kube.translate` marks their endpoints draining).

Main decision: the activator does not know which provider the scaler is set
to (and must not import the scaler), so by default it treats the notice
taint of *every* provider preset as a notice: :data:`DEFAULT_NOTICE_TAINTS`
is the union of the scaler's presets (Karpenter, GKE, EKS's termination
handler; AKS has none), which a unit test checks against
``scaler.policy.placement.providers.PRESETS``. A taint from another provider never
appears on a node by accident, so the union costs nothing. Custom keys (the
scaler's ``placement.notice_taints``) go in the activator's ``notice_taints``
setting too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["DEFAULT_NOTICE_TAINTS", "nodes_under_notice", "parse_notice_taints"]

_NTH = "aws-node-termination-handler/"

#: Every provider preset's interruption-notice taint key (see the module docstring).
DEFAULT_NOTICE_TAINTS: tuple[str, ...] = (
    "karpenter.sh/disrupted",
    "cloud.google.com/impending-node-termination",
    _NTH + "spot-itn",
    _NTH + "scheduled-maintenance",
    _NTH + "asg-lifecycle-termination",
    _NTH + "rebalance-recommendation",
)


def parse_notice_taints(value: str) -> tuple[str, ...]:
    """Comma-separated taint keys -> a tuple; a key with a space, ``=`` or ``:`` is refused."""
    keys = tuple(dict.fromkeys(k.strip() for k in value.split(",") if k.strip()))
    for key in keys:
        if any(c.isspace() for c in key) or "=" in key or ":" in key:
            raise ValueError(
                f"notice_taints: {key!r} is not a taint key; allowed: comma-separated keys "
                "such as karpenter.sh/disrupted (the key alone, no =value or :effect)"
            )
    return keys


def nodes_under_notice(nodes: Iterable[Mapping[str, Any]], keys: Iterable[str]) -> frozenset[str]:
    """Names of the nodes carrying any of ``keys`` in ``spec.taints`` (any value or effect)."""
    wanted = frozenset(keys)
    names: set[str] = set()
    if not wanted:
        return frozenset()
    for node in nodes:
        taints = (node.get("spec") or {}).get("taints") or ()
        if any(isinstance(t, Mapping) and t.get("key") in wanted for t in taints):
            name = (node.get("metadata") or {}).get("name")
            if name:
                names.add(str(name))
    return frozenset(names)
