"""Step 1 of the decision: what each signal asks for, from its stable and panic averages.

Counts (concurrency, queue depth) want ``ceil(total / target)``;
utilizations want ``ceil(ready x average / target)`` (docs/architecture.md,
"The scaler"). Only *fresh* signals count toward the scale; a signal that
is missing or stale is named in :attr:`Estimates.missing`, which is what
the no-data floor (step 4) and the way to zero act on. Around a wake, the
count signals' held requests are a backlog, not demand
(:mod:`scaler.policy.wake_backlog`).
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.policy.api import Mode, Observation, ScalingConfig, SignalKind, SignalReading
from scaler.policy.steps.rounding import ceil_replicas
from scaler.policy.wake_backlog import WakeBacklog, capped, count_demand

__all__ = ["Estimates", "desired_for_signal", "estimate", "per_signal"]

_COUNT_SIGNALS = frozenset({SignalKind.CONCURRENCY, SignalKind.QUEUE_DEPTH})


def desired_for_signal(
    kind: SignalKind, average: float, *, config: ScalingConfig, ready_replicas: int
) -> int:
    """Replicas that ``kind`` at ``average`` asks for (docs/architecture.md, "The scaler").

    Counts: ``ceil(total / target)``. Utilizations (fractions 0..1):
    ``ceil(ready x average / target)``.
    """
    if kind is SignalKind.CONCURRENCY:
        return ceil_replicas(average / config.target_concurrency)
    if kind is SignalKind.QUEUE_DEPTH:
        target = config.target_queue_depth
    elif kind is SignalKind.KV_CACHE_UTILIZATION:
        target = config.target_kv_cache_utilization
    else:
        target = config.target_gpu_utilization
    if target is None:
        raise ValueError(f"signal {kind} is not configured (its target annotation is unset)")
    if kind in _COUNT_SIGNALS:
        return ceil_replicas(average / target)
    return ceil_replicas(ready_replicas * average / target)


@dataclass(frozen=True, slots=True)
class Estimates:
    stable: int  # largest stable-window desired over fresh signals (0 when none)
    panic: int  # largest panic-window desired over fresh signals (0 when none)
    per_signal_stable: dict[SignalKind, int]
    per_signal_panic: dict[SignalKind, int]
    missing: tuple[SignalKind, ...]  # configured but missing or stale


def estimate(
    config: ScalingConfig, observation: Observation, wake: WakeBacklog | None, now: float
) -> Estimates:
    stable = panic = 0
    per_stable: dict[SignalKind, int] = {}
    per_panic: dict[SignalKind, int] = {}
    missing: list[SignalKind] = []
    ready = observation.ready_replicas
    for kind in config.configured_signals():
        reading: SignalReading | None = observation.signals.get(kind)
        if reading is None or reading.stable is None:
            missing.append(kind)
            continue
        # Around a wake, the held requests are a backlog, not demand.
        stable_value, panic_value, cap = count_demand(
            kind,
            reading.stable,
            reading.panic,
            wake=wake,
            observation=observation,
            config=config,
            now=now,
        )
        s = capped(desired_for_signal(kind, stable_value, config=config, ready_replicas=ready), cap)
        per_stable[kind] = s
        p: int | None = None
        if panic_value is not None:
            p = capped(
                desired_for_signal(kind, panic_value, config=config, ready_replicas=ready), cap
            )
            per_panic[kind] = p
        if not reading.fresh:
            missing.append(kind)
            continue
        stable = max(stable, s)
        if p is not None:
            panic = max(panic, p)
    return Estimates(stable, panic, per_stable, per_panic, tuple(missing))


def per_signal(est: Estimates, mode: Mode) -> dict[SignalKind, int]:
    """What each signal asks for, for the decision's record (panic: the larger view)."""
    if mode is Mode.STABLE:
        return dict(est.per_signal_stable)
    return {k: max(v, est.per_signal_panic.get(k, 0)) for k, v in est.per_signal_stable.items()}
