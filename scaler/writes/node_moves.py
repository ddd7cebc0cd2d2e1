"""The warm tier's one write to a pod template: prefer a node.

The warm tier moves a sleeping or idle replica off a GPU it would empty
(:mod:`scaler.warm.moves`) by making its Deployment's template prefer
another node: a rollout starts a replacement there and removes the old pod
once it is Ready. The write goes through the actuator's write slots and is
fenced by the Lease like every other; it is best effort: a failure is
logged and the move is tried again at a later decision.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from groundwork.kube.errors import KubeError
from scaler.kube.types import DeploymentInfo, LeaderElector, NodePreference
from scaler.writes.announcements import LeaseLost

__all__ = ["NodeMoves"]

log = logging.getLogger(__name__)


class NodeMoves:
    """The warm tier's one write to a pod template: prefer a node (a rollout that starts
    a replacement there and removes the old pod once it is Ready); fenced by the
    Lease, within the actuator's write slots, best effort."""

    def __init__(
        self,
        leader: LeaderElector,
        slots: asyncio.Semaphore,
        writes: NodePreference | None,
        fence: Callable[[], None],
    ) -> None:
        self._leader = leader
        self._slots = slots
        self._writes = writes
        self._fence = fence  # raises when the Lease was lost

    async def prefer_node(self, deployment: DeploymentInfo, node: str) -> bool:
        """True when ``deployment``'s template was changed to prefer ``node``."""
        if not self._leader.is_leader or self._writes is None:
            return False
        try:
            async with self._slots:
                self._fence()
                return await self._writes.prefer_node(deployment.namespace, deployment.name, node)
        except (KubeError, LeaseLost) as exc:
            log.warning("%s: could not prefer node %s: %s", deployment.key, node, exc)
            return False
