"""Opted-in InferencePools and the Deployments of their namespaces -> which pool scales what.

:class:`PoolIndex` holds what the watches delivered (the opted-in pools,
and every Deployment of each namespace that holds one) and answers two
questions: what each pool selects (:meth:`PoolIndex.states`) and which
Deployments a pool makes a target (:meth:`PoolIndex.bound`). Pure
bookkeeping, no I/O: :class:`~scaler.kube.pools.PoolWatch` feeds it, and
tests feed it directly.

A pool selects a Deployment when the pool's ``spec.selector.matchLabels``
are all among the labels of the Deployment's pod template: then every pod
the Deployment runs is one of the pool's endpoints. Tidal's own companion
Deployments (``<name>-spot``, annotated ``placement.tidal.dev/companion-of``)
carry the user's pod labels and are part of the user's target, so they are
never counted.

Main decision, one pool scales one Deployment (docs/gateway-api.md): a
pool is **bound** to a Deployment when it selects exactly that one and no
other opted-in pool selects it too. A pool that selects none, or several
(two Deployments behind one picker: prefill and decode, or two model
versions), is bound to nothing and its :class:`PoolState` says why; the
scaler raises an Event on the pool and scales none of them, because one
queue of demand cannot be split between Deployments that serve different
roles, and guessing would scale the wrong one. Tidal's own answer to
"one model on several kinds of capacity" is its companions, which are not
counted. Until a namespace's Deployments have been listed, its pools are
``listed=False``: nothing is said about them yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scaler.kube.types import DeploymentInfo, PoolInfo, PoolState
from scaler.policy.placement.companion import COMPANION_OF

__all__ = ["PoolIndex", "PoolState"]


def _counted(d: DeploymentInfo) -> bool:
    return COMPANION_OF not in d.annotations


class PoolIndex:
    """Opted-in pools and their namespaces' Deployments, as the watches last saw them."""

    def __init__(self) -> None:
        self._pools: dict[str, PoolInfo] = {}
        self._deployments: dict[str, dict[str, DeploymentInfo]] = {}  # namespace -> name -> d
        self._states: dict[str, PoolState] | None = None

    def namespaces(self) -> set[str]:
        """The namespaces that hold an opted-in pool (their Deployments must be watched)."""
        return {p.namespace for p in self._pools.values()}

    # -- pools --------------------------------------------------------------------

    def reset_pools(self, pools: Iterable[PoolInfo]) -> None:
        """A (re-)list of the pools; those not opted in are not kept."""
        self._pools = {p.key: p for p in pools if p.opted_in}
        self._states = None

    def put_pool(self, pool: PoolInfo) -> None:
        if pool.opted_in:
            self._pools[pool.key] = pool
        else:
            self._pools.pop(pool.key, None)
        self._states = None

    def delete_pool(self, key: str) -> None:
        if self._pools.pop(key, None) is not None:
            self._states = None

    # -- Deployments --------------------------------------------------------------

    def reset_deployments(self, namespace: str, deployments: Iterable[DeploymentInfo]) -> None:
        """A (re-)list of one namespace's Deployments."""
        self._deployments[namespace] = {d.name: d for d in deployments}
        self._states = None

    def put_deployment(self, d: DeploymentInfo) -> None:
        self._deployments.setdefault(d.namespace, {})[d.name] = d
        self._states = None

    def delete_deployment(self, namespace: str, name: str) -> None:
        if self._deployments.get(namespace, {}).pop(name, None) is not None:
            self._states = None

    def forget_namespace(self, namespace: str) -> None:
        if self._deployments.pop(namespace, None) is not None:
            self._states = None

    # -- answers ------------------------------------------------------------------

    def states(self) -> Mapping[str, PoolState]:
        """Every opted-in pool's state, by pool key."""
        if self._states is None:
            self._states = self._compute()
        return self._states

    def bound(self) -> Mapping[str, tuple[DeploymentInfo, PoolInfo]]:
        """Deployment key -> (the Deployment, the pool that makes it a target)."""
        out = {}
        for state in self.states().values():
            key = state.bound_to
            if key is not None:
                namespace, _, name = key.partition("/")
                out[key] = (self._deployments[namespace][name], state.pool)
        return out

    def _compute(self) -> dict[str, PoolState]:
        selected: dict[str, tuple[str, ...]] = {}
        selectors: dict[str, set[str]] = {}  # Deployment key -> pools selecting it
        for key, pool in self._pools.items():
            listed = self._deployments.get(pool.namespace)
            if listed is None:
                continue
            got = tuple(
                sorted(d.key for d in listed.values() if _counted(d) and pool.selects(d.pod_labels))
            )
            selected[key] = got
            for d in got:
                selectors.setdefault(d, set()).add(key)
        states = {}
        for key, pool in sorted(self._pools.items()):
            if key not in selected:
                states[key] = PoolState(pool, listed=False)
                continue
            shared = set().union(*(selectors[d] for d in selected[key])) - {key}
            states[key] = PoolState(pool, selected[key], tuple(sorted(shared)))
        return states
