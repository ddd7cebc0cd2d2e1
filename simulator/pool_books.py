"""The books of ``tidal simulate``'s shared pool: its devices, the pods on them, the bill.

:mod:`simulator.warm_tier` runs many models on a pool of time-sliced
devices; this module keeps what is where and what it costs, and decides
nothing:

- each held device, its pods (a model has one pod, two while a move's
  replacement starts), the memory they take, and its node's host memory
  (each device is its own node, as on single-device cloud instances: the
  node's RAM holds the weights of its level-1 sleepers);
- the bill, by the rule of :mod:`scaler.policy.warm_tier.gpu_use`: a device
  counts whole from its first pod to its last, each second *serving*,
  *starting* or *sleeping-only* by what its pods were doing, and busy while
  a request was served there; a device given back becomes a
  :class:`~simulator.world.ReplicaLife` for the scorecard;
- the pods as the product's pure rules see them
  (:class:`~scaler.policy.warm_tier.Resident`, :class:`~scaler.policy.warm_tier.Site`).

Main decision: a pod's use is read from its times, never stored: a pod is
starting until the ``ready_at`` of its cold start and waking until that of
its wake, so the bill splits a second where a cold start ends without an
event for it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from scaler.policy.warm_tier import (
    HANDOFF_S,
    GpuSeconds,
    GpuUse,
    PodUse,
    Resident,
    Site,
    gpu_use,
)
from simulator.engine.sleep_timing import (
    DEFAULT_RESIDUAL_MIB,
    DEFAULT_WEIGHTS_MIB,
    host_memory_mib,
    kv_cache_mib,
)
from simulator.world import ON_DEMAND, ReplicaLife

__all__ = ["Device", "ModelOdds", "PoolBooks", "PoolConfig", "PoolPod", "WarmCounts"]


class ModelOdds(Protocol):
    """What the pure rules know of a model's traffic (from its idle gaps)."""

    def mean_gap(self, model: str) -> float | None: ...
    def p_soon(self, model: str) -> float: ...


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """The shared devices, their nodes, and what one model's pod holds on them (MiB).

    The defaults are the fake vLLM's (Llama-3.1-8B in bf16 on an H100 80GB)
    with a KV cache of 100,000 tokens (about ``--gpu-memory-utilization
    0.35``), so that two pods fit awake on one device and a third must wait
    for one to sleep. Each device is a node of its own with 256 GiB of host
    memory (a p5.48xlarge's 2 TiB per 8 H100s), which holds the weights of
    17 level-1 sleepers; ``slices`` time-sliced replicas per device (the
    device plugin's ``replicas``) let 16 pods share one: two awake and the
    rest asleep, each asleep holding 600 MiB of the device.
    """

    slices: int = 16  # time-sliced nvidia.com/gpu replicas per physical device
    gpu_memory_mib: int = 81_920
    host_memory_mib: int = 256 * 1024
    weights_mib: int = DEFAULT_WEIGHTS_MIB
    kv_cache_tokens: int = 100_000
    residual_mib: int = DEFAULT_RESIDUAL_MIB
    handoff_s: float = HANDOFF_S  # the scaler's sleep handoff, before every sleep
    # Give back the emptiest GPU whose pods all fit elsewhere once the pool stops
    # growing (False: only GPUs of sleepers alone are emptied).
    compaction: bool = True

    def __post_init__(self) -> None:
        if self.slices < 1:
            raise ValueError(f"a device needs at least 1 time-sliced replica, got {self.slices}")
        for name in ("weights_mib", "kv_cache_tokens", "residual_mib", "host_memory_mib"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.awake_mib > self.gpu_memory_mib:
            raise ValueError(
                f"a pod needs {self.awake_mib} MiB awake but a device has {self.gpu_memory_mib}; "
                "lower the KV cache or raise the device memory"
            )

    @property
    def awake_mib(self) -> int:
        return self.residual_mib + self.weights_mib + kv_cache_mib(self.kv_cache_tokens)

    @property
    def asleep_mib(self) -> int:
        return self.residual_mib


@dataclass(frozen=True, slots=True)
class WarmCounts:
    """What the tier did: wakes, pods put to sleep to make room, wakes that fell back,
    wakes that waited for a request beside them, and how devices were emptied."""

    wakes: int = 0
    evictions: int = 0
    fallbacks: int = 0
    peak_gpus: int = 0
    waited: int = 0
    level2_sleeps: int = 0
    moves: int = 0
    emptied: int = 0


@dataclass(slots=True)
class PoolPod:
    model: str
    device: int
    awake: bool = True
    level: int = 0  # the level it sleeps at (0 while awake)
    ready_at: float = 0.0  # until then starting (cold) or waking
    busy_until: float = 0.0  # end of its last request: the idle start
    cold: bool = True  # ready_at ends a cold start (not a wake)
    version: int = 0  # bumped at each request and state change: stale deadlines are skipped
    replaces: bool = False  # a move's replacement, until it takes over
    # A sleep under way: announced until ``call_at`` (a request then cancels it), its
    # call running until ``freed_at``, when its memory is down to the residue.
    call_at: float = 0.0
    freed_at: float = 0.0

    def use(self, at: float) -> PodUse:
        if not self.awake:
            # Until its sleep is done it still holds the whole model.
            return PodUse.AWAKE if at < self.freed_at else PodUse.ASLEEP
        if self.ready_at > at:
            return PodUse.STARTING if self.cold else PodUse.WAKING
        return PodUse.AWAKE

    def busy(self, at: float) -> bool:
        return self.ready_at > at or self.busy_until > at


@dataclass(slots=True)
class Device:
    created_s: float
    pods: list[PoolPod] = field(default_factory=list)
    intervals: list[tuple[float, float]] = field(default_factory=list)  # serving
    sleeping_since: float | None = None  # held only sleepers since
    version: int = 0

    def use(self, at: float) -> GpuUse | None:
        return gpu_use(p.use(at) for p in self.pods)


def _union_s(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


class PoolBooks:
    """The held devices and their pods, and the device-seconds by use."""

    def __init__(self, sizes: PoolConfig) -> None:
        self.sizes = sizes
        self.devices: dict[int, Device] = {}
        self.next_device = 0
        self.now = 0.0
        self.seconds = GpuSeconds()
        self.lives: list[ReplicaLife] = []
        self.peak = 0

    # --- the bill -------------------------------------------------------------------------

    def advance(self, to: float) -> None:
        """Charge every held device from now to ``to`` by its use, split where a cold start ends."""
        if to <= self.now:
            return
        for device in self.devices.values():
            edges = sorted(
                {t for p in device.pods for t in (p.ready_at, p.freed_at) if self.now < t < to}
            )
            start = self.now
            for edge in (*edges, to):
                self.seconds = self.seconds.add(device.use(start), edge - start)
                start = edge
        self.now = to

    # --- devices and pods -----------------------------------------------------------------

    def open_device(self) -> int:
        index = self.next_device
        self.next_device += 1
        self.devices[index] = Device(created_s=self.now)
        self.peak = max(self.peak, len(self.devices))
        return index

    def add(self, pod: PoolPod) -> None:
        self.devices[pod.device].pods.append(pod)

    def remove(self, pod: PoolPod, at: float) -> None:
        """Take ``pod`` off its device; a device left empty is given back at ``at``."""
        device = self.devices[pod.device]
        device.pods.remove(pod)
        if not device.pods:
            del self.devices[pod.device]
            busy = _union_s(device.intervals)
            self.lives.append(ReplicaLife(ON_DEMAND, device.created_s, at, busy))

    def pods_on(self, index: int) -> Iterator[PoolPod]:
        yield from self.devices[index].pods

    # --- memory ---------------------------------------------------------------------------

    def mib(self, pod: PoolPod) -> int:
        held = pod.awake or self.now < pod.freed_at
        return self.sizes.awake_mib if held else self.sizes.asleep_mib

    def used_mib(self, index: int) -> int:
        return sum(self.mib(p) for p in self.devices[index].pods)

    def host_used_mib(self, index: int) -> int:
        """Host memory of the device's node taken by its level-1 sleepers."""
        return sum(
            host_memory_mib(self.sizes.weights_mib, p.level)
            for p in self.devices[index].pods
            if not p.awake and p.level in (1, 2)
        )

    def host_free_mib(self, index: int) -> int:
        return self.sizes.host_memory_mib - self.host_used_mib(index)

    # --- as the pure rules see them -------------------------------------------------------

    def residents(self, index: int, odds: ModelOdds) -> list[Resident]:
        now = self.now
        out = []
        for pod in self.devices[index].pods:
            busy = pod.busy(now)
            draining = not pod.awake and now < pod.freed_at
            out.append(
                Resident(
                    target=pod.model,
                    pod=_key(pod),
                    awake=pod.awake,
                    busy=busy or pod.replaces,
                    used_mib=self.mib(pod),
                    idle_since_s=None if busy else pod.busy_until,
                    mean_gap_s=odds.mean_gap(pod.model),
                    p_soon=odds.p_soon(pod.model),
                    # A move's replacement is never put to sleep before it takes over.
                    free_at_s=pod.freed_at
                    if draining
                    else max(pod.ready_at, pod.busy_until)
                    if busy and not pod.replaces
                    else None,
                    draining_to_mib=self.sizes.asleep_mib if draining else None,
                )
            )
        return out

    def sites(self, odds: ModelOdds, *, but: int | None = None) -> list[Site]:
        out = []
        for index, device in self.devices.items():
            use = device.use(self.now)
            if index == but or use is None:
                continue
            out.append(
                Site(
                    device=str(index),
                    use=use,
                    free_slices=self.sizes.slices - len(device.pods),
                    budget_mib=self.sizes.gpu_memory_mib,
                    residents=tuple(self.residents(index, odds)),
                    host_free_mib=self.host_free_mib(index),
                )
            )
        return out


def _key(pod: PoolPod) -> str:
    """A pod's name in the pure rules: the model, and a mark on a move's replacement."""
    return pod.model + ("'" if pod.replaces else "")
