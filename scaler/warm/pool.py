"""The warm tier's books: which replicas sleep, where they listen, what was counted.

:class:`WarmPool` holds what the tier knows of the replicas of every model
in the warm tier, and nothing else: each pod that is not awake (draining
towards a sleep, asleep, waking) with its phase and level, the address and
model of every warm-tier pod it has seen, which pods it has asked whether
they sleep (a new leader asks each once), the servers that have no sleep
mode, the counters ``tidal status`` shows, and the GPU memory each model
was learned to use awake and asleep. It makes no call and decides nothing:
:mod:`scaler.warm.choices` reads it to decide, :mod:`scaler.warm.tier`
changes it as its calls succeed.

Main decision: a pod absent from the books is awake. The books hold only
pods in some other phase, so a pod the tier never touched, or one whose
state it dropped (gone, a lost Lease), is routed as the EndpointSlice says.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scaler.kube.types import PodInfo
from scaler.policy.api import ScalingConfig
from scaler.policy.warm_tier import MemoryBook
from scaler.warm.gpu_memory import GpuMemory

__all__ = ["Counters", "Phase", "PoolEntry", "WarmPool", "address_of", "pod_name"]


class Phase(enum.StrEnum):
    DRAINING = "draining"  # announced as not routable; the sleep call comes next
    SLEEPING = "sleeping"
    WAKING = "waking"


@dataclass(slots=True)
class PoolEntry:
    """One pod that is not awake."""

    target: str
    name: str  # namespace/pod
    base: str  # http://ip:port
    endpoint: str  # ip:port, as the activators key endpoints
    node: str | None
    phase: Phase
    level: int
    since: float
    task: asyncio.Task[None] | None = None  # a sleep waiting out its handoff
    # Put to sleep as headroom (the model busy, this replica beyond what its load
    # needs awake), not because the model is idle.
    headroom: bool = False

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()


@dataclass(slots=True)
class Counters:
    sleeps: int = 0
    wakes: int = 0
    failed_wakes: int = 0
    oom_retries: int = 0  # wakes that failed for memory and were retried after an eviction
    last_wake_s: float | None = None


def pod_name(pod: PodInfo) -> str:
    return f"{pod.namespace}/{pod.name}"


def address_of(pod: PodInfo, config: ScalingConfig) -> tuple[str, str] | None:
    """``(http://ip:port, ip:port)`` of ``pod``'s server, or None before it has both."""
    port = pod.port(config.metrics_port)
    if pod.ip is None or port is None:
        return None
    host = f"[{pod.ip}]" if ":" in pod.ip else pod.ip
    return f"http://{host}:{port}", f"{pod.ip}:{port}"


class WarmPool:
    """The replicas that are not awake, and what the tier knows of every warm-tier pod."""

    def __init__(self, memory: GpuMemory | None = None) -> None:
        # GPU memory from DCGM, when Prometheus is configured: what learn() feeds on
        # and what a wake plans its room from.
        self.memory = memory
        self.entries: dict[str, PoolEntry] = {}  # namespace/pod -> not awake
        self.book = MemoryBook()
        self.counters: dict[str, Counters] = {}
        self.targets: dict[str, str] = {}  # namespace/pod -> target (warm-tier pods)
        self.levels: dict[str, int] = {}  # target -> sleep level
        self.addresses: dict[str, tuple[str, str]] = {}  # namespace/pod -> (base, ip:port)
        self._checked: set[str] = set()  # pods asked whether they sleep, this term
        self._locks: dict[str, asyncio.Lock] = {}
        # Servers without sleep mode: target -> what the first such pod answered,
        # and the pods that answered so (not asked again while they run).
        self.no_sleep_mode: dict[str, str] = {}
        self.no_sleep_pods: set[str] = set()

    # -- reading ----------------------------------------------------------------------

    def of(self, target: str) -> list[PoolEntry]:
        return [p for p in self.entries.values() if p.target == target]

    def not_routable(self) -> dict[str, list[str]]:
        """``{target: [ip:port]}`` of the pods that must not get requests (the answers)."""
        out: dict[str, list[str]] = {}
        for entry in self.entries.values():
            out.setdefault(entry.target, []).append(entry.endpoint)
        return {k: sorted(v) for k, v in out.items()}

    def phase_of(self, pod: str) -> Phase | None:
        entry = self.entries.get(pod)
        return entry.phase if entry is not None else None

    def asleep_count(self, target: str) -> int:
        return len(self.of(target))

    def awake_ready(self, pods: Sequence[PodInfo]) -> list[PodInfo]:
        """The ready pods among ``pods`` that are awake (not draining, asleep or waking)."""
        return [
            p for p in pods if p.ready and not p.terminating and pod_name(p) not in self.entries
        ]

    def describe(self, target: str) -> dict[str, Any]:
        """The target's warm state for ``/v1/targets`` and ``tidal status``."""
        c = self.counters.get(target, Counters())
        return {
            "pods": {
                p.name: {"phase": p.phase.value, "level": p.level, "since": p.since}
                for p in self.of(target)
            },
            "sleeps": c.sleeps,
            "wakes": c.wakes,
            "failedWakes": c.failed_wakes,
            "outOfMemoryRetries": c.oom_retries,
            "lastWakeSeconds": c.last_wake_s,
            "sleepModeUnavailable": self.no_sleep_mode.get(target),
        }

    def counter(self, target: str) -> Counters:
        return self.counters.setdefault(target, Counters())

    def lock(self, pod: str) -> asyncio.Lock:
        """One call at a time per pod."""
        return self._locks.setdefault(pod, asyncio.Lock())

    # -- keeping up with the pods -----------------------------------------------------

    def remember(self, target: str, config: ScalingConfig, pods: Sequence[PodInfo]) -> None:
        """Where a warm-tier target's pods listen, and that they are its (for evictions)."""
        self.levels[target] = config.sleep_level
        for pod in pods:
            name = pod_name(pod)
            self.targets[name] = target
            address = address_of(pod, config)
            if address is not None:
                self.addresses[name] = address

    def forget_missing(self, target: str, pods: Sequence[PodInfo]) -> None:
        """Drop state of pods that are gone or terminating (scaled to zero, deleted)."""
        alive = {pod_name(p) for p in pods if not p.terminating}
        for name in [n for n, p in self.entries.items() if p.target == target and n not in alive]:
            self.entries.pop(name).cancel()
        self.no_sleep_pods -= {
            n for n in self.no_sleep_pods if self.targets.get(n) == target and n not in alive
        }
        gone = {n for n in self._checked if self.targets.get(n) == target and n not in alive}
        self._checked -= gone
        for name in gone:
            self.targets.pop(name, None)
            self.addresses.pop(name, None)

    def unasked(
        self, target: str, config: ScalingConfig, pods: Sequence[PodInfo]
    ) -> list[tuple[PodInfo, str, str]]:
        """Ready pods not yet asked whether they sleep, with their addresses; each is
        marked asked (:meth:`ask_again` when the question failed)."""
        out = []
        for pod in pods:
            name = pod_name(pod)
            if name in self._checked or not pod.ready or pod.terminating:
                continue
            address = address_of(pod, config)
            if address is None:
                continue
            self._checked.add(name)
            self.targets[name] = target
            out.append((pod, *address))
        return out

    def ask_again(self, pod: str) -> None:
        self._checked.discard(pod)

    def clear(self) -> None:
        """A lost Lease: forget which pods sleep (a sleep waiting for its handoff is
        dropped) and which were asked; a new term starts by asking the pods."""
        for entry in self.entries.values():
            entry.cancel()
        self.entries.clear()
        self._checked.clear()

    def cancel_draining(self, target: str) -> int:
        """Pods still draining go back into rotation (no wake needed); how many."""
        back = 0
        for name, entry in list(self.entries.items()):
            if entry.target == target and entry.phase is Phase.DRAINING:
                entry.cancel()
                del self.entries[name]
                back += 1
        return back

    def drop(self, entry: PoolEntry) -> None:
        """``entry`` is awake again (or never slept), unless it was replaced meanwhile."""
        if self.entries.get(entry.name) is entry:
            del self.entries[entry.name]

    def no_sleep_mode_found(self, target: str, pod: str, message: str) -> bool:
        """``pod`` has no sleep mode: it is not asked again while it runs. True for the
        first such pod of ``target`` (until a replica of it sleeps)."""
        self.no_sleep_pods.add(pod)
        self.targets.setdefault(pod, target)
        if target in self.no_sleep_mode:
            return False
        self.no_sleep_mode[target] = message
        return True

    def slept(self, entry: PoolEntry, now: float) -> None:
        """``entry``'s sleep call succeeded."""
        self.no_sleep_mode.pop(entry.target, None)
        entry.phase = Phase.SLEEPING
        entry.since = now
        self.counter(entry.target).sleeps += 1

    def learn(self, now: float) -> int:
        """Feed the memory book from a fresh DCGM snapshot; the samples taken (pods
        between two states, or not in the warm tier, are skipped)."""
        snap = self.memory.fresh(now) if self.memory is not None else None
        if snap is None:
            return 0
        taken = 0
        for (ns, pod), (_, mib) in snap.pods.items():
            name = f"{ns}/{pod}"
            target = self.targets.get(name)
            entry = self.entries.get(name)
            if target is None or (entry is not None and entry.phase is not Phase.SLEEPING):
                continue
            self.book.observe(target, mib=mib, sleeping=entry is not None)
            taken += 1
        return taken
