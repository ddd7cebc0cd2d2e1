"""The warm tier's decisions: which replicas to put to sleep, which to wake, what makes room.

:class:`WarmChoices` reads two things and changes neither: the models'
views (:class:`~scaler.warm.views.ModelView`, what each model's last
decision saw: its idle start, its last use, each pod's load) and the
:class:`~scaler.warm.pool.WarmPool` (which pods are not awake). From them it
answers the tier's questions with the pure rules of :mod:`scaler.policy.warm_tier`:

- which idle replicas are due to sleep (never one with work on it, never a
  server that has no sleep mode);
- whether a pod announced for sleep is still idle at the end of its handoff;
- which sleeping replica to wake;
- with GPU memory known, which idle models on the same GPU to put to sleep
  before a wake so that it fits (:meth:`WarmChoices.plan_room`), and which
  to put to sleep as soon as they are idle so that a GPU holding sleeping
  pods keeps room for one of them to wake (:meth:`WarmChoices.room_keepers`); without it,
  the idle models on a node, least recently used first, to evict after a
  wake failed for memory (:meth:`WarmChoices.lru_on`).

Main decision: the views are what the last decisions saw, not a fresh
look; a pod that got work since shows it at the next decision, and the
sleep call itself is made only after a handoff that re-reads them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from scaler.kube.types import PodInfo
from scaler.policy.api import ScalingConfig
from scaler.policy.warm_tier import (
    Replica,
    Resident,
    choose_wake,
    keep_room_to_wake,
    make_room,
    replicas_to_sleep,
)
from scaler.warm.gpu_memory import GpuMemorySnapshot
from scaler.warm.pool import Phase, PoolEntry, WarmPool, pod_name
from scaler.warm.views import ModelView

__all__ = ["WarmChoices"]


class WarmChoices:
    """The tier's decisions, from the models' views and the pool (reads both)."""

    def __init__(self, pool: WarmPool, views: Mapping[str, ModelView]) -> None:
        self._pool = pool
        # The models as their last decisions saw them (the reconcilers publish them).
        self._views = views

    def idle_since(self, target: str) -> float | None:
        """Start of the target's idle stretch (None: busy, or unknown)."""
        view = self._views.get(target)
        return view.idle_since if view is not None else None

    def last_used(self, target: str) -> float | None:
        """When the target last had work (None: never): the LRU order of evictions."""
        view = self._views.get(target)
        return view.last_used if view is not None else None

    def pod_load(self, target: str, pod: str) -> float:
        """Requests running or waiting on one pod (by name), as the last decision saw them."""
        view = self._views.get(target)
        return view.pod_load.get(pod, 0.0) if view is not None else 0.0

    def due_sleeps(
        self, target: str, config: ScalingConfig, pods: Sequence[PodInfo], now: float
    ) -> list[str]:
        """The target's awake replicas to put to sleep now."""
        entries = self._pool.entries
        replicas = [
            Replica(
                pod=pod_name(p),
                sleeping=pod_name(p) in entries,
                level=config.sleep_level,
                busy=self.pod_load(target, p.name) > 0,
                ready=p.ready and not p.terminating,
            )
            for p in pods
        ]
        chosen = replicas_to_sleep(config, replicas, self.idle_since(target), now)
        return [name for name in chosen if name not in self._pool.no_sleep_pods]

    def headroom_sleeps(
        self, target: str, pods: Sequence[PodInfo], awake_needed: int | None
    ) -> list[str]:
        """Awake replicas beyond what the load needs awake (SLO-first scaling's
        ``awake_needed``): headroom the tier holds asleep, the least loaded first and
        never one with work on it."""
        if awake_needed is None:
            return []
        entries = self._pool.entries
        awake = [p for p in pods if p.ready and not p.terminating and pod_name(p) not in entries]
        spare = len(awake) - awake_needed
        idle = sorted(
            (p for p in awake if self.pod_load(target, p.name) <= 0), key=lambda p: p.name
        )
        names = [pod_name(p) for p in idle if pod_name(p) not in self._pool.no_sleep_pods]
        return names[: max(0, spare)]

    def still_idle(self, entry: PoolEntry) -> bool:
        """At the end of a handoff: the model is still idle (a replica slept as headroom:
        its model may be busy) and no work reached the pod."""
        pod = entry.name.split("/", 1)[1]
        model_idle = entry.headroom or self.idle_since(entry.target) is not None
        return model_idle and self.pod_load(entry.target, pod) <= 0

    def to_wake(self, target: str) -> PoolEntry | str:
        """The sleeping replica of ``target`` to wake, or why none."""
        entries = self._pool.of(target)
        candidates = [
            Replica(pod=p.name, sleeping=True, level=p.level, ready=p.phase is Phase.SLEEPING)
            for p in entries
        ]
        chosen = choose_wake(candidates)
        if chosen is None:
            return "waking already" if entries else "nothing sleeps"
        return self._pool.entries[chosen.pod]

    def plan_room(self, entry_name: str, target: str, now: float) -> tuple[list[str], bool]:
        """(pods to put to sleep first, whether the wake then fits), from the memory
        learned and the fresh DCGM snapshot at ``now``; ([], True) when memory is
        unknown (the wake is tried, and room made if it fails)."""
        pool = self._pool
        snap = pool.memory.fresh(now) if pool.memory is not None else None
        need = pool.book.wake_need_mib(target)
        ns, pod = entry_name.split("/", 1)
        placed = snap.pods.get((ns, pod)) if snap is not None else None
        if snap is None or need is None or placed is None:
            return [], True
        uuid = placed[0]
        budget = snap.budget(uuid)
        if budget is None:
            return [], True
        residents = self.residents_on(snap, uuid)
        plan = make_room(
            budget_mib=round(budget), residents=residents, waking_pod=entry_name, need_mib=need
        )
        return list(plan.sleep), plan.fits

    def residents_on(self, snap: GpuMemorySnapshot, uuid: str) -> list[Resident]:
        """The pods on one GPU as the pure rules see them."""
        pool = self._pool
        residents = []
        for (r_ns, r_pod), mib in snap.on_gpu(uuid).items():
            name = f"{r_ns}/{r_pod}"
            owner = pool.targets.get(name)
            used = self.last_used(owner) if owner is not None else None
            view = self._views.get(owner) if owner is not None else None
            asleep = name in pool.entries
            if owner is not None:
                # The sample may predate this tier's own last sleeps and wakes
                # (Prometheus answers every few seconds): hold each pod at the
                # footprint learned for its current state.
                book = pool.book.asleep if asleep else pool.book.awake
                mib = book.get(owner, mib)
            residents.append(
                Resident(
                    target=owner or "",
                    pod=name,
                    awake=not asleep,
                    # Pods outside the warm tier are never put to sleep: count them busy.
                    busy=owner is None or self.pod_load(owner, r_pod) > 0,
                    used_mib=round(mib),
                    idle_since_s=float("-inf") if used is None else used,
                    mean_gap_s=view.mean_gap_s if view is not None else None,
                )
            )
        return residents

    def draining_beside(self, entry_name: str, now: float) -> list[PoolEntry]:
        """Pods on the same GPU as ``entry_name`` whose sleep is under way (none
        without a fresh DCGM snapshot that places them)."""
        pool = self._pool
        snap = pool.memory.fresh(now) if pool.memory is not None else None
        ns, pod = entry_name.split("/", 1)
        placed = snap.pods.get((ns, pod)) if snap is not None else None
        if snap is None or placed is None:
            return []
        on_gpu = {f"{k[0]}/{k[1]}" for k in snap.on_gpu(placed[0])}
        return [
            e
            for name, e in pool.entries.items()
            if name in on_gpu and name != entry_name and e.phase is Phase.DRAINING
        ]

    def room_keepers(self, now: float) -> list[tuple[str, str, int]]:
        """Idle awake pods to put to sleep now so that each GPU holding sleeping
        pods keeps room for one of them to wake at once, as ``(target, pod, sleep
        level)``; none without a fresh DCGM snapshot and learned footprints."""
        pool = self._pool
        snap = pool.memory.fresh(now) if pool.memory is not None else None
        if snap is None:
            return []
        out = []
        for uuid in snap.free:
            budget = snap.budget(uuid)
            residents = self.residents_on(snap, uuid)
            needs = [
                pool.book.wake_need_mib(r.target) for r in residents if not r.awake and r.target
            ]
            known = [n for n in needs if n is not None]
            if budget is None or not known:
                continue
            victims = keep_room_to_wake(
                budget_mib=round(budget), residents=residents, wake_need_mib=max(known)
            )
            for victim in victims:
                owner = pool.targets.get(victim)
                if owner is not None and victim not in pool.entries:
                    out.append((owner, victim, pool.levels.get(owner, 1)))
        return out

    def lru_on(self, node: str | None, target: str) -> list[tuple[str, str, int]]:
        """Idle awake pods of other warm-tier models on ``node``, the one expected
        back latest first, then least recently used, as ``(target, pod, sleep level)``."""
        pods: dict[str, tuple[PodInfo, ...]] = {}
        levels: dict[str, int] = {}
        for key, view in self._views.items():
            if view.sleep_level is None:
                continue  # only models opted in to the warm tier are put to sleep
            pods[key] = view.pods
            levels[key] = view.sleep_level
        ranked = self.idle_awake_on(node, exclude_target=target, pods=pods)
        return [(t, pod, levels[t]) for _, t, pod in ranked]

    def idle_awake_on(
        self, node: str | None, *, exclude_target: str, pods: Mapping[str, Sequence[PodInfo]]
    ) -> list[tuple[float, str, str]]:
        """(last used, target, pod) of awake pods of other models on ``node`` with no
        request running or waiting: the model whose next request is expected latest
        first (last use plus its mean idle gap; unknown counts as latest), then
        least recently used."""
        out = []
        expected: dict[str, float] = {}
        for target, target_pods in pods.items():
            if target == exclude_target:
                continue
            used = self.last_used(target)
            for p in target_pods:
                name = pod_name(p)
                if node is not None and p.node != node:
                    continue
                if name in self._pool.entries or not p.ready or p.terminating:
                    continue
                if self.pod_load(target, p.name) > 0:
                    continue
                out.append((float("-inf") if used is None else used, target, name))
                view = self._views.get(target)
                expected[target] = view.next_request_s() if view is not None else math.inf
        return sorted(out, key=lambda row: (-expected[row[1]], row))
