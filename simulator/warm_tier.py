"""The warm tier in ``tidal simulate``: many models on a pool of time-sliced GPUs.

:mod:`simulator.world` follows each model on GPUs of its own; the warm
tier's gain is about many rarely used models *sharing* GPUs, so this module
runs a whole pool, in two policies scored on the same scorecard:

- ``tidal-pool``: Tidal's scale-to-zero alone. A model's pod exists from its
  first request (after a cold start) until it has been idle for the grace
  period; while it exists it is awake and holds its GPU memory, so a GPU
  holds only as many pods as fit awake (and at most ``slices``, the NVIDIA
  device plugin's time-sliced replicas).
- ``tidal-warm``: the same plus ``sleep-after`` and ``sleep-level``. An idle
  pod sleeps (keeps its slice and a residue of memory), and a request for it
  waits for a wake and a one-token warm-up instead of a cold start. A wake or
  a new pod that does not fit first puts the least recently used idle awake
  pods on that GPU to sleep, and waits for their sleep.

The product's own pieces decide: the annotations are parsed by
:class:`~scaler.policy.protocol.PurePolicy` (grace period, sleep-after,
level: a bad knob fails as in the cluster), :func:`scaler.policy.warm_tier.sleep_due`
and :func:`~scaler.policy.warm_tier.replicas_to_sleep` say when and which pod
sleeps, :func:`~scaler.policy.warm_tier.make_room` picks what to evict, and the
wake and sleep times are the fake vLLM's (:mod:`simulator.engine.sleep_timing`).

Simplifications, said plainly: each model has one pod; a request is served
as if alone on it (prefill, then one decode step per output token, timed by
the engine model's :class:`~simulator.engine.LlmParams`), which suits
rarely used models but not busy ones; pods never move; the adaptive grace
period is not modelled (its configured value is used). A request held longer
than the activator's cold-start timeout fails, as in the world.

Accounting: a GPU is held (GPU-seconds, cost) while any pod is on it; those
seconds are *awake* while at least one pod there is awake (or starting or
waking) and *asleep* otherwise, and *busy* while a request is served there.

Main decision: both policies share one event loop and differ only in what
the sleep deadline does, so any difference in the scorecard comes from the tier.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scaler.policy import ScalingConfig
from scaler.policy.idle.keep_alive import IdleGaps
from scaler.policy.protocol import PurePolicy
from scaler.policy.warm_tier import (
    BUSY_WAIT_S,
    Replica,
    Resident,
    keep_room_to_wake,
    mean_gap_s,
    place_pod,
    plan_wake,
    replicas_to_sleep,
    sleep_due,
    sleep_or_zero,
)
from simulator.engine import LlmParams
from simulator.engine.sleep_timing import (
    DEFAULT_RESIDUAL_MIB,
    DEFAULT_WEIGHTS_MIB,
    kv_cache_mib,
    sleep_seconds,
    wake_seconds,
)
from simulator.scorecard import Prices, Scorecard, score
from simulator.traces import TraceRequest
from simulator.world import ON_DEMAND, ReplicaLife, RunResult, Second, WorldConfig

__all__ = ["POOL_POLICIES", "PoolConfig", "PoolRun", "WarmCounts", "run_pool"]

POOL_POLICIES = ("tidal-pool", "tidal-warm")

_WAKE_TAGS = ("weights", "kv_cache")


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """The shared GPUs and what one model's pod holds on them (MiB).

    The defaults are the fake vLLM's (Llama-3.1-8B in bf16 on an H100 80GB)
    with a KV cache of 100,000 tokens (about ``--gpu-memory-utilization
    0.35``), so that two pods fit awake on one GPU and a third must wait for
    one to sleep.
    """

    slices: int = 4  # time-sliced nvidia.com/gpu replicas per physical GPU
    gpu_memory_mib: int = 81_920
    weights_mib: int = DEFAULT_WEIGHTS_MIB
    kv_cache_tokens: int = 100_000
    residual_mib: int = DEFAULT_RESIDUAL_MIB

    def __post_init__(self) -> None:
        if self.slices < 1:
            raise ValueError(f"a GPU needs at least 1 time-sliced replica, got {self.slices}")
        for name in ("weights_mib", "kv_cache_tokens", "residual_mib"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.awake_mib > self.gpu_memory_mib:
            raise ValueError(
                f"a pod needs {self.awake_mib} MiB awake but a GPU has {self.gpu_memory_mib}; "
                "lower the KV cache or raise the GPU memory"
            )

    @property
    def awake_mib(self) -> int:
        return self.residual_mib + self.weights_mib + kv_cache_mib(self.kv_cache_tokens)

    @property
    def asleep_mib(self) -> int:
        return self.residual_mib


@dataclass(frozen=True, slots=True)
class WarmCounts:
    """What the tier did: wakes, pods put to sleep to make room, wakes that fell back."""

    wakes: int = 0
    evictions: int = 0
    fallbacks: int = 0
    peak_gpus: int = 0
    waited: int = 0  # wakes that waited for a request beside them to finish


@dataclass(frozen=True, slots=True)
class PoolRun:
    scorecard: Scorecard
    result: RunResult
    counts: WarmCounts


@dataclass(slots=True)
class _Pod:
    model: str
    gpu: int
    awake: bool = True
    ready_at: float = 0.0  # until then starting or waking (busy, never evicted)
    busy_until: float = 0.0  # end of its last request: the idle start
    cold: bool = True  # ready_at ends a cold start (not a wake)
    version: int = 0  # bumped at each request: stale deadlines are skipped


@dataclass(slots=True)
class _Gpu:
    created_s: float
    pods: list[str] = field(default_factory=list)
    intervals: list[tuple[float, float]] = field(default_factory=list)  # serving


def _union_s(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


class _Pool:
    def __init__(
        self,
        config: ScalingConfig,
        pool: PoolConfig,
        world: WorldConfig,
        engine: LlmParams,
    ) -> None:
        self.config = config
        self.pool = pool
        self.world = world
        self.engine = engine
        self.warm = config.sleep_after_s is not None
        self.level = config.sleep_level
        # min-scale > 0 keeps the pod: it never reaches zero.
        self.grace_s = math.inf if config.min_scale > 0 else config.scale_to_zero_grace_s
        self.rng = random.Random(world.seed + 1)
        self.gpus: dict[int, _Gpu] = {}
        self.next_gpu = 0
        self.pods: dict[str, _Pod] = {}
        self.deadlines: list[tuple[float, int, str, int, str]] = []
        self.order = 0
        self.now = 0.0
        self.awake_s = 0.0
        self.asleep_s = 0.0
        self.starting_s = 0.0
        # Each model's idle gaps, kept across its pods as the scaler keeps them.
        self.gaps: dict[str, IdleGaps] = {}
        self.last_end: dict[str, float] = {}
        self.wake_s = wake_seconds(pool.weights_mib, self.level, _WAKE_TAGS)
        self.lives: list[ReplicaLife] = []
        self.wakes = self.evictions = self.fallbacks = self.cold_starts = 0
        self.waited_wakes = 0
        self.peak_gpus = 0

    # --- time and accounting --------------------------------------------------------------

    def _advance(self, to: float) -> None:
        # Each held GPU-second is charged to the pods on that GPU in equal
        # shares, each share by what its pod was doing: in its cold start,
        # awake (waking included), or asleep. The three add up to the held time.
        dt = max(0.0, to - self.now)
        for gpu in self.gpus.values():
            share = dt / len(gpu.pods)
            for m in gpu.pods:
                pod = self.pods[m]
                if not pod.awake:
                    self.asleep_s += share
                    continue
                starting = min(share, max(0.0, pod.ready_at - self.now)) if pod.cold else 0.0
                self.starting_s += starting
                self.awake_s += share - starting
        self.now = max(self.now, to)

    def _push(self, at: float, model: str, version: int, what: str) -> None:
        self.order += 1
        heapq.heappush(self.deadlines, (at, self.order, model, version, what))

    def expire(self, until: float) -> None:
        while self.deadlines and self.deadlines[0][0] <= until:
            at, _, model, version, what = heapq.heappop(self.deadlines)
            pod = self.pods.get(model)
            if pod is None or pod.version != version:
                continue
            self._advance(at)
            if what == "sleep":
                replica = Replica(
                    pod=model,
                    sleeping=not pod.awake,
                    level=self.level,
                    busy=pod.busy_until > at,
                    ready=pod.ready_at <= at,
                )
                # A microsecond's slack: idle start + sleep-after - idle start can
                # round to just under sleep-after, and there is no later look.
                due_at = at + 1e-6
                if model in replicas_to_sleep(self.config, [replica], pod.busy_until, due_at):
                    pod.awake = False
            elif what == "hole":
                if pod.awake and pod.ready_at <= at and pod.busy_until <= at:
                    self._keep_hole(pod.gpu)
            elif self.warm and not pod.awake and self._stay_asleep(pod, at):
                self._push(at + self.world.cold_start.median_s, model, version, "zero")
            else:
                self._remove(pod, at)

    def _keep_hole(self, index: int) -> None:
        p = self.pool
        victims = keep_room_to_wake(
            budget_mib=p.gpu_memory_mib,
            residents=self._residents(index),
            wake_need_mib=p.awake_mib - p.asleep_mib,
        )
        self._evict(victims)

    def _stay_asleep(self, pod: _Pod, at: float) -> bool:
        gaps = self._gaps_at(pod.model, at)
        share = 1.0 / len(self.gpus[pod.gpu].pods)
        cold_s = self.world.cold_start.median_s
        return sleep_or_zero(self.config, gaps, share=share, cold_start_s=cold_s, now=at)

    def _gaps_at(self, model: str, now: float) -> IdleGaps:
        """The model's idle gaps as the scaler would see them at ``now``."""
        gaps = self.gaps.get(model) or IdleGaps(started_s=now)
        end = self.last_end.get(model)
        if end is not None and end <= now:
            gaps = gaps.observe(busy=False, now=end)
        return gaps

    def _remove(self, pod: _Pod, at: float) -> None:
        gpu = self.gpus[pod.gpu]
        gpu.pods.remove(pod.model)
        del self.pods[pod.model]
        if not gpu.pods:
            del self.gpus[pod.gpu]
            self.lives.append(ReplicaLife(ON_DEMAND, gpu.created_s, at, _union_s(gpu.intervals)))

    # --- memory ---------------------------------------------------------------------------

    def _used_mib(self, gpu: _Gpu) -> int:
        p = self.pool
        return sum(p.awake_mib if self.pods[m].awake else p.asleep_mib for m in gpu.pods)

    def _residents(self, index: int) -> list[Resident]:
        p, now = self.pool, self.now
        residents = []
        for m in self.gpus[index].pods:
            pod = self.pods[m]
            busy = pod.ready_at > now or pod.busy_until > now
            residents.append(
                Resident(
                    target=m,
                    pod=m,
                    awake=pod.awake,
                    busy=busy,
                    used_mib=p.awake_mib if pod.awake else p.asleep_mib,
                    idle_since_s=None if busy else pod.busy_until,
                    mean_gap_s=mean_gap_s(self._gaps_at(m, now)),
                    free_at_s=max(pod.ready_at, pod.busy_until) if busy else None,
                )
            )
        return residents

    def _evict(self, victims: Sequence[str]) -> float:
        """Put ``victims`` to sleep; the seconds their sleeps take before memory is free."""
        for v in victims:
            self.pods[v].awake = False
            self.evictions += 1
        return sum(sleep_seconds(self.pool.weights_mib, self.level) for _ in victims)

    def _place(self, model: str) -> tuple[int, float]:
        """A GPU for a new pod of ``model`` and the wait for making room there."""
        p = self.pool
        for index in sorted(self.gpus):
            gpu = self.gpus[index]
            if len(gpu.pods) >= p.slices:
                continue
            if not self.warm:
                if self._used_mib(gpu) + p.awake_mib <= p.gpu_memory_mib:
                    return index, 0.0
                continue
            plan = place_pod(
                budget_mib=p.gpu_memory_mib,
                residents=self._residents(index),
                new_mib=p.awake_mib,
                wake_need_mib=p.awake_mib - p.asleep_mib,
            )
            if plan.fits:
                return index, self._evict(plan.sleep)
        index = self.next_gpu
        self.next_gpu += 1
        self.gpus[index] = _Gpu(created_s=self.now)
        self.peak_gpus = max(self.peak_gpus, len(self.gpus))
        return index, 0.0

    def _start_pod(self, model: str, pod: _Pod | None) -> _Pod:
        index, extra = self._place(model)
        self.gpus[index].pods.append(model)
        ready_at = self.now + extra + self.world.cold_start.draw(self.rng)
        if pod is None:
            pod = _Pod(model, index, ready_at=ready_at)
        else:
            pod.gpu, pod.awake, pod.ready_at, pod.cold = index, True, ready_at, True
        self.pods[model] = pod
        self.cold_starts += 1
        return pod

    # --- requests -------------------------------------------------------------------------

    def _warm_up_s(self) -> float:
        # The scaler's one-token warm-up after a wake (the first request is slow without it).
        return self.engine.step_time_s(decoding=0, prefill_tokens=1)

    def request(self, r: TraceRequest) -> tuple[float | None, float | None, str | None, bool]:
        """Serve one request: (first token, finished, failure, held for a start or wake)."""
        at = r.offset_s
        self.expire(at)
        self._advance(at)
        self._observe_arrival(r.model, at)
        pod = self.pods.get(r.model)
        if pod is None:
            pod = self._start_pod(r.model, None)
        elif not pod.awake:
            pod = self._wake(pod, at)
        start = max(at, pod.ready_at)
        held = pod.ready_at > at
        pod.version += 1
        if start - at > self.world.cold_start_timeout_s:
            self._schedule(pod)
            return None, None, "cold-start-timeout", held
        e = self.engine
        first = start + e.step_time_s(decoding=0, prefill_tokens=r.prompt_tokens)
        finished = first + (r.output_tokens - 1) * e.step_time_s(decoding=1, prefill_tokens=0)
        self.gpus[pod.gpu].intervals.append((start, finished))
        pod.busy_until = max(pod.busy_until, finished)
        self.last_end[pod.model] = pod.busy_until
        self._schedule(pod)
        return first, finished, None, held

    def _observe_arrival(self, model: str, at: float) -> None:
        gaps = self._gaps_at(model, at)
        self.gaps[model] = gaps.observe(busy=True, now=at)

    def _wake(self, pod: _Pod, at: float) -> _Pod:
        """Wake a sleeping pod for a request at ``at``: now, after requests about
        to finish beside it, or (no room within a cold start) a fresh pod."""
        p = self.pool
        cold_s = self.world.cold_start.median_s
        plan = plan_wake(
            budget_mib=p.gpu_memory_mib,
            residents=self._residents(pod.gpu),
            waking_pod=pod.model,
            need_mib=p.awake_mib - p.asleep_mib,
            now=at,
            max_wait_s=min(BUSY_WAIT_S, max(0.0, cold_s - self.wake_s)),
        )
        if not plan.fits:
            # Nothing there can make room in time: the path from zero, a fresh
            # pod where one fits, as the scaler falls back.
            self.fallbacks += 1
            self._remove(pod, at)
            return self._start_pod(pod.model, pod)
        wait = (plan.at_s - at) + self._evict(plan.sleep) + self.wake_s
        pod.awake, pod.cold = True, False
        pod.ready_at = at + wait + self._warm_up_s()
        self.wakes += 1
        if plan.at_s > at:
            self.waited_wakes += 1
        return pod

    def _schedule(self, pod: _Pod) -> None:
        idle_since = max(pod.busy_until, pod.ready_at)
        if self.warm:
            self._push(idle_since, pod.model, pod.version, "hole")
            _, wait = sleep_due(self.config, idle_since, idle_since)
            self._push(idle_since + (wait or 0.0), pod.model, pod.version, "sleep")
        if math.isfinite(self.grace_s):
            self._push(idle_since + self.grace_s, pod.model, pod.version, "zero")

    def finish(self, end_s: float) -> float:
        """Run the deadlines out to ``end_s`` and release every GPU then; the end time."""
        self.expire(end_s)
        self._advance(end_s)
        for pod in list(self.pods.values()):
            self._remove(pod, end_s)
        return end_s


def _timeline(
    requests: Sequence[TraceRequest], finished: Sequence[float | None], end_s: float
) -> tuple[Second, ...]:
    seconds = math.ceil(end_s) + 1
    arrivals = [0] * seconds
    load = [0.0] * seconds
    for r, done in zip(requests, finished, strict=True):
        arrivals[min(int(r.offset_s), seconds - 1)] += 1
        stop = r.offset_s if done is None else done
        t = r.offset_s
        while t < stop:  # held plus in flight, averaged over each second
            edge = min(stop, math.floor(t) + 1.0)
            load[min(int(t), seconds - 1)] += edge - t
            t = edge
    return tuple(Second(float(s), arrivals[s], load[s], 0, 0) for s in range(seconds))


def run_pool(
    requests: Sequence[TraceRequest],
    *,
    name: str,
    annotations: Mapping[str, str],
    pool: PoolConfig | None = None,
    world: WorldConfig | None = None,
    slo_ttft_s: float = 2.0,
    prices: Prices | None = None,
) -> PoolRun:
    """Run the pool under Tidal's policy as ``annotations`` configure it, and score it.

    With ``autoscaling.tidal.dev/sleep-after`` set the warm tier is on; without,
    it is scale-to-zero alone. ``requests`` are sorted by offset; their
    ``model`` field says which model each wants.
    """
    if not requests:
        raise ValueError("a simulation needs at least one request")
    world = world or WorldConfig()
    config = PurePolicy(cold_start_estimate_s=world.cold_start.median_s).parse(dict(annotations))
    sim = _Pool(config, pool or PoolConfig(), world, world.engine)
    first: list[float | None] = []
    done: list[float | None] = []
    failed: list[str | None] = []
    held_waits: list[float] = []
    for r in requests:
        token, finished, reason, held = sim.request(r)
        first.append(token)
        done.append(finished)
        failed.append(reason)
        if held:
            held_waits.append(
                (token if token is not None else r.offset_s + world.cold_start_timeout_s)
                - r.offset_s
            )
    last = max([r.offset_s for r in requests] + [d for d in done if d is not None])
    end_s = sim.finish(float(math.floor(last) + 1))
    result = RunResult(
        name=name,
        arrival_s=tuple(r.offset_s for r in requests),
        first_token_s=tuple(first),
        finished_s=tuple(done),
        output_tokens=tuple(r.output_tokens for r in requests),
        failed_reason=tuple(failed),
        cold_start_wait_s=tuple(held_waits),
        cold_starts=sim.cold_starts,
        replicas=tuple(sim.lives),
        timeline=_timeline(requests, done, end_s),
        end_s=end_s,
        preemptions=0,
    )
    card = score(result, slo_ttft_s=slo_ttft_s, prices=prices)
    card = replace(
        card,
        gpu_seconds_awake=sim.awake_s,
        gpu_seconds_asleep=sim.asleep_s,
        gpu_seconds_starting=sim.starting_s,
        wakes=sim.wakes,
        peak_replicas=sim.peak_gpus,
    )
    counts = WarmCounts(sim.wakes, sim.evictions, sim.fallbacks, sim.peak_gpus, sim.waited_wakes)
    return PoolRun(card, result, counts)
