"""The warm tier in simulation: many rarely used models sharing a pool of time-sliced GPUs.

``tidal simulate``'s world (:mod:`scaler.sim.world`) follows one model in
detail; the warm tier's gain is about *many* models on *shared* GPUs, so this
module compares two ways of running such a pool, on the same arrivals:

- **zero**: scale-to-zero alone. A model's pod exists from its first request
  (after a cold start) until it has been idle for the grace period; while it
  exists it is awake and holds its GPU memory, so a GPU holds at most
  ``gpu_memory // model_mib`` pods (and at most ``slices`` time-sliced units).
- **warm**: the same, plus ``sleep-after``: an idle pod sleeps (keeps its
  slice, gives back all but ``asleep_mib``), and a request for it waits for a
  wake instead of a cold start. A wake that does not fit first puts the least
  recently used awake pod on that GPU to sleep (the product's
  :func:`scaler.policy.warm.make_room`), which costs the handoff and its sleep.

A GPU counts as held (GPU-seconds) while any pod, awake or asleep, is on it;
a new pod goes to the first GPU with a free slice and room for it awake
(making room by sleeping idle pods, in warm), else a new GPU is added.

Simplifications, said plainly: requests are served in no time once their pod
is awake (the wait measured is the cold start or wake, not inference), every
pod is one replica, and a pod never moves. So this isolates what the tier
changes: waits after idle, and how many GPUs the pool keeps.

Main decision: both modes share one event loop and differ only in what an
idle deadline does and what a request to a pod that exists costs, so any
difference in the scorecard comes from the tier.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from scaler.policy.warm import Resident, make_room

__all__ = ["PoolConfig", "PoolResult", "rare_models", "simulate_pool"]


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """The pool and the models' timings (seconds, MiB)."""

    slices: int = 4  # time-sliced nvidia.com/gpu units per physical GPU
    gpu_memory_mib: int = 81_920  # H100 80GB
    model_mib: int = 36_000  # awake: weights + KV cache (two fit on a GPU)
    asleep_mib: int = 600
    cold_start_s: float = 60.0
    wake_s: float = 1.0  # level 1, warm-up included
    evict_s: float = 3.0  # handoff + the other model's sleep, before the wake
    sleep_after_s: float = 60.0
    grace_s: float = 900.0
    slo_wait_s: float = 5.0

    def __post_init__(self) -> None:
        if self.slices < 1 or self.model_mib < 1 or self.gpu_memory_mib < self.model_mib:
            raise ValueError("need slices >= 1 and 1 <= model_mib <= gpu_memory_mib")
        if not 0 < self.sleep_after_s < self.grace_s:
            raise ValueError("need 0 < sleep_after_s < grace_s (one idle clock, sleep first)")


@dataclass(slots=True)
class PoolResult:
    mode: str
    requests: int = 0
    within_slo: int = 0
    cold_starts: int = 0
    wakes: int = 0
    evictions: int = 0
    total_wait_s: float = 0.0
    gpu_seconds: float = 0.0
    peak_gpus: int = 0

    @property
    def slo_attainment(self) -> float:
        return self.within_slo / self.requests if self.requests else 1.0

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600.0

    def as_json(self) -> dict[str, float | int | str]:
        return {
            "mode": self.mode,
            "requests": self.requests,
            "slo_attainment": round(self.slo_attainment, 4),
            "cold_starts": self.cold_starts,
            "wakes": self.wakes,
            "evictions": self.evictions,
            "mean_wait_s": round(self.total_wait_s / self.requests, 3) if self.requests else 0.0,
            "gpu_hours": round(self.gpu_hours, 3),
            "peak_gpus": self.peak_gpus,
        }


@dataclass(slots=True)
class _Pod:
    model: int
    gpu: int
    awake: bool
    last_used: float
    ready_at: float
    version: int = 0  # bumped at each request: stale deadlines are skipped


@dataclass(slots=True)
class _Pool:
    config: PoolConfig
    warm: bool
    result: PoolResult
    gpus: list[list[int]] = field(default_factory=list)  # gpu -> models on it
    pods: dict[int, _Pod] = field(default_factory=dict)
    deadlines: list[tuple[float, int, int, str]] = field(default_factory=list)
    now: float = 0.0

    def _account(self, to: float) -> None:
        held = sum(1 for models in self.gpus if models)
        self.result.gpu_seconds += held * max(0.0, to - self.now)
        self.now = to

    def _used(self, gpu: int) -> int:
        c = self.config
        return sum(c.model_mib if self.pods[m].awake else c.asleep_mib for m in self.gpus[gpu])

    def _room(self, gpu: int, model: int, need: int) -> tuple[list[int], bool]:
        """Models to put to sleep on ``gpu`` so that ``need`` more MiB fit (LRU first)."""
        c = self.config
        residents = [
            Resident(
                target=str(m),
                pod=str(m),
                awake=self.pods[m].awake,
                busy=self.pods[m].ready_at > self.now,  # still starting or waking
                used_mib=c.model_mib if self.pods[m].awake else c.asleep_mib,
                idle_since_s=self.pods[m].last_used,
            )
            for m in self.gpus[gpu]
            if m != model
        ]
        mine = c.asleep_mib if model in self.gpus[gpu] else 0
        plan = make_room(
            budget_mib=c.gpu_memory_mib,
            residents=[*residents, Resident(str(model), str(model), False, True, mine, None)],
            waking_pod=str(model),
            need_mib=need,
        )
        return [int(p) for p in plan.sleep], plan.fits

    def _place(self, model: int) -> tuple[int, float]:
        """A GPU for a new pod of ``model`` and the extra wait for making room there."""
        c = self.config
        for gpu, models in enumerate(self.gpus):
            if len(models) >= c.slices:
                continue
            if self.warm:
                victims, fits = self._room(gpu, model, c.model_mib)
                if not fits:
                    continue
                for v in victims:
                    self.pods[v].awake = False
                    self.result.evictions += 1
                return gpu, c.evict_s if victims else 0.0
            if self._used(gpu) + c.model_mib <= c.gpu_memory_mib:
                return gpu, 0.0
        self.gpus.append([])
        self.result.peak_gpus = max(self.result.peak_gpus, len(self.gpus))
        return len(self.gpus) - 1, 0.0

    def _schedule(self, pod: _Pod) -> None:
        c = self.config
        if self.warm:
            heapq.heappush(
                self.deadlines, (pod.last_used + c.sleep_after_s, pod.model, pod.version, "sleep")
            )
        heapq.heappush(self.deadlines, (pod.last_used + c.grace_s, pod.model, pod.version, "zero"))

    def _expire(self, until: float) -> None:
        while self.deadlines and self.deadlines[0][0] <= until:
            at, model, version, what = heapq.heappop(self.deadlines)
            pod = self.pods.get(model)
            if pod is None or pod.version != version:
                continue
            self._account(at)
            if what == "sleep":
                pod.awake = False
            else:
                self.gpus[pod.gpu].remove(model)
                del self.pods[model]

    def request(self, model: int, at: float) -> None:
        self._expire(at)
        self._account(at)
        c, r = self.config, self.result
        pod = self.pods.get(model)
        start = max(at, pod.ready_at) if pod is not None else at
        if pod is None:
            gpu, extra = self._place(model)
            self.gpus[gpu].append(model)
            pod = _Pod(model, gpu, True, at, at + extra + c.cold_start_s)
            self.pods[model] = pod
            r.cold_starts += 1
        elif not pod.awake:
            victims, fits = self._room(pod.gpu, model, c.model_mib - c.asleep_mib)
            if fits:
                for v in victims:
                    self.pods[v].awake = False
                    r.evictions += 1
                pod.awake = True
                pod.ready_at = start + (c.evict_s if victims else 0.0) + c.wake_s
                r.wakes += 1
            else:
                # Nothing can make room (the others are starting or waking): the
                # path from zero, a fresh pod where one fits, as the scaler falls back.
                self.gpus[pod.gpu].remove(model)
                gpu, extra = self._place(model)
                self.gpus[gpu].append(model)
                pod.gpu, pod.awake = gpu, True
                pod.ready_at = start + extra + c.cold_start_s
                r.cold_starts += 1
        wait = max(0.0, pod.ready_at - at)
        pod.last_used = max(at, pod.ready_at)
        pod.version += 1
        self._schedule(pod)
        r.requests += 1
        r.total_wait_s += wait
        if wait <= c.slo_wait_s:
            r.within_slo += 1

    def finish(self) -> None:
        self._expire(math.inf)


def simulate_pool(
    arrivals: Sequence[Sequence[float]], config: PoolConfig, *, warm: bool
) -> PoolResult:
    """Run the pool on per-model arrival times (seconds); ``warm``: with the tier."""
    pool = _Pool(config, warm, PoolResult("warm" if warm else "zero"))
    events = sorted((t, m) for m, times in enumerate(arrivals) for t in times)
    for at, model in events:
        pool.request(model, at)
    pool.finish()
    return pool.result


def rare_models(
    count: int, *, duration_s: float, mean_gap_s: tuple[float, float], seed: int = 1
) -> list[list[float]]:
    """Arrivals of ``count`` rarely used models: Poisson, each with its own mean gap
    drawn uniformly from ``mean_gap_s`` (seconds)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        gap = rng.uniform(*mean_gap_s)
        t, times = rng.expovariate(1 / gap), []
        while t < duration_s:
            times.append(t)
            t += rng.expovariate(1 / gap)
        out.append(times)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scaler.sim.warm_pool``: both modes on a synthetic pool, one JSON line each."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m scaler.sim.warm_pool", description=__doc__)
    parser.add_argument("--models", type=int, default=24, help="rarely used models (default 24)")
    parser.add_argument("--hours", type=float, default=8.0, help="trace length (default 8)")
    parser.add_argument("--min-gap-s", type=float, default=120.0, help="default 120")
    parser.add_argument("--max-gap-s", type=float, default=1800.0, help="default 1800")
    parser.add_argument("--grace-s", type=float, default=900.0, help="default 900")
    parser.add_argument("--sleep-after-s", type=float, default=60.0, help="default 60")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    arrivals = rare_models(
        args.models,
        duration_s=args.hours * 3600,
        mean_gap_s=(args.min_gap_s, args.max_gap_s),
        seed=args.seed,
    )
    config = PoolConfig(grace_s=args.grace_s, sleep_after_s=args.sleep_after_s)
    for warm in (False, True):
        print(json.dumps(simulate_pool(arrivals, config, warm=warm).as_json()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
