"""The warm tier's moves in a cluster: a GPU of sleepers alone is emptied onto serving ones.

A GPU (or MIG instance) whose pods all sleep is paid for nothing
(:mod:`scaler.policy.warm_tier.gpu_use`). With GPU metrics (DCGM through
Prometheus: which pod is on which GPU, and how much memory each holds) the
leader looks at every GPU each tick: one that has held only sleepers for a
while is emptied when moving its sleepers beside serving models costs less
than keeping it (:func:`scaler.policy.warm_tier.plan_emptying`, moves only:
going to zero stays the scaling policy's call).

A pod cannot move; the move is the cluster's own: the target's pod template
is made to prefer the destination GPU's node
(:mod:`scaler.policy.warm_tier.node_preference`), which starts a rollout:
the Deployment controller surges a replacement, the scheduler places it
there, and the old pod goes once the replacement is Ready. A request
meanwhile is served by the old pod where it is. The replacement is awake
when it starts, and the tier puts it to sleep as it does any idle pod.

Limits, said plainly: only Deployments of one replica are moved (a rollout
replaces every replica); the destination is a node, and on a node of several
GPUs the device plugin picks the GPU; a target moved is not moved again
while its rollout runs, nor within ``cooldown_s``.

Main decision: plans come from the same pure rules the simulator runs; this
module only turns DCGM's samples into devices and a plan into one write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scaler.kube.types import PodInfo, TargetSnapshot
from scaler.policy.idle.keep_alive import IdleGaps
from scaler.policy.warm_tier import (
    GpuUse,
    Leaver,
    MoveCosts,
    PodUse,
    Rungs,
    Site,
    gpu_use,
    plan_emptying,
)
from scaler.warm.choices import WarmChoices
from scaler.warm.gpu_memory import GpuMemorySnapshot
from scaler.warm.pool import Phase, WarmPool, pod_name
from scaler.warm.views import ModelView

__all__ = ["Move", "MoveSettings", "WarmMoves"]

#: An 8B model's weights, the host memory a level-1 sleeper's replacement will
#: take where the node's use is not known (the node's RAM is not measured).
_UNKNOWN_HOST_MIB = 1 << 30


@dataclass(frozen=True, slots=True)
class MoveSettings:
    # A GPU of sleepers is looked at once it has held only sleepers this long.
    settle_s: float = 60.0
    # A target moved is not moved again for this long.
    cooldown_s: float = 600.0
    # The cold start a move's replacement pays, and the horizon of its price.
    cold_start_s: float = 60.0


@dataclass(frozen=True, slots=True)
class Move:
    """``pod`` of ``target`` moves to ``node`` (where GPU ``device`` is)."""

    target: str
    pod: str
    node: str
    device: str


class WarmMoves:
    """Which GPUs hold only sleepers and since when, and the moves that empty them."""

    def __init__(
        self,
        pool: WarmPool,
        choices: WarmChoices,
        views: Mapping[str, ModelView],
        settings: MoveSettings | None = None,
        *,
        leading: Callable[[], bool] = lambda: True,
    ) -> None:
        self._leading = leading  # plans only while this replica leads
        self._pool = pool
        self._choices = choices
        self._views = views
        self.settings = settings or MoveSettings()
        self._since: dict[str, float] = {}  # GPU UUID -> held only sleepers since
        self._moved: dict[str, float] = {}  # target -> when it was last moved

    def plan(self, now: float, snapshots: Mapping[str, TargetSnapshot]) -> list[Move]:
        """The moves due now (at most one GPU emptied per call; none unless leading)."""
        if not self._leading():
            return []
        snap = self._pool.memory.fresh(now) if self._pool.memory is not None else None
        if snap is None:
            return []
        pods = {pod_name(p): p for snap in snapshots.values() for p in snap.pods}
        sites = {uuid: self._site(snap, uuid, pods) for uuid in snap.free}
        for uuid, site in sites.items():
            if site is None or site.use is not GpuUse.SLEEPING_ONLY:
                self._since.pop(uuid, None)
            else:
                self._since.setdefault(uuid, now)
        for uuid, since in sorted(self._since.items(), key=lambda kv: kv[1]):
            if now - since < self.settings.settle_s:
                continue
            moves = self._empty(uuid, now, since, sites, pods, snapshots)
            if moves:
                for move in moves:
                    self._moved[move.target] = now
                return moves
        return []

    def _site(self, snap: GpuMemorySnapshot, uuid: str, pods: Mapping[str, PodInfo]) -> Site | None:
        budget = snap.budget(uuid)
        residents = tuple(self._choices.residents_on(snap, uuid))
        uses = [self._use(r.pod, pods) for r in residents]
        use = gpu_use(uses)
        if budget is None or use is None:
            return None
        return Site(uuid, use, 1 << 16, round(budget), residents, _UNKNOWN_HOST_MIB)

    def _use(self, name: str, pods: Mapping[str, PodInfo]) -> PodUse:
        phase = self._pool.phase_of(name)
        if phase is Phase.SLEEPING:
            return PodUse.ASLEEP
        pod = pods.get(name)
        return PodUse.STARTING if pod is not None and not pod.ready else PodUse.AWAKE

    def _empty(
        self,
        uuid: str,
        now: float,
        since: float,
        sites: Mapping[str, Site | None],
        pods: Mapping[str, PodInfo],
        snapshots: Mapping[str, TargetSnapshot],
    ) -> list[Move]:
        site = sites[uuid]
        if site is None:
            return []
        leavers = []
        for resident in site.residents:
            target = resident.target
            snap = snapshots.get(target)
            if not self._movable(target, snap, now):
                return []
            view = self._views.get(target)
            gaps = view.gaps if view is not None and view.gaps is not None else None
            leavers.append(
                Leaver(
                    pod=resident.pod,
                    target=target,
                    gaps=gaps or IdleGaps(started_s=now),
                    host_mib=0,
                )
            )
        others = [s for u, s in sites.items() if u != uuid and s is not None]
        s = self.settings
        rungs = Rungs(wake_s={1: 1.0, 2: 2.5}, cold_start_s=s.cold_start_s, wake_budget_s=1.8)
        asleep = max((r.used_mib for r in site.residents), default=0)
        book = self._pool.book.awake
        # A sleeper's awake footprint, learned while it was awake; a model that slept
        # before a sample was taken is taken to be as large as the largest known.
        awake = max((book.get(r.target, 0) for r in site.residents), default=0)
        awake = awake or max(book.values(), default=0)
        costs = MoveCosts(
            new_mib=awake,
            wake_need_mib=max(0, awake - asleep),
            move_cost_s=s.cold_start_s * awake / max(1, site.budget_mib),
        )
        plan = plan_emptying(
            leavers, sites=others, keep_cost_s=now - since, rungs=rungs, now=now,
            costs=costs, zero_allowed=False,
        )  # fmt: skip
        if plan is None or awake <= 0:
            return []
        node_of = {u: self._node(sites[u], pods) for u in sites}
        out = []
        for pod, device in plan.moves:
            node = node_of.get(device)
            if node is None:
                return []
            out.append(Move(_target_of(leavers, pod), pod, node, device))
        return out

    def _movable(self, target: str, snap: TargetSnapshot | None, now: float) -> bool:
        """One replica, no rollout under way, not moved within the cooldown."""
        if not target or snap is None:
            return False
        if snap.deployment.spec_replicas != 1 or len(snap.pods) != 1:
            return False
        moved = self._moved.get(target)
        return moved is None or now - moved >= self.settings.cooldown_s

    @staticmethod
    def _node(site: Site | None, pods: Mapping[str, PodInfo]) -> str | None:
        if site is None:
            return None
        for resident in site.residents:
            pod = pods.get(resident.pod)
            if pod is not None and pod.node:
                return pod.node
        return None


def _target_of(leavers: list[Leaver], pod: str) -> str:
    return next(leaver.target for leaver in leavers if leaver.pod == pod)
