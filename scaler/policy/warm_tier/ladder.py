"""The warm tier's ladder: when a model's replicas sleep, which one wakes, sleep or zero (pure).

A model opted in with ``autoscaling.tidal.dev/sleep-after`` climbs down a
ladder as it stays idle, every rung counted from the same idle start (the
policy state's ``idle_since_s``, the clock the grace period already uses):

    serving --(idle >= sleep-after)--> sleeping --(idle >= grace period)--> zero

A sleeping replica (vLLM's sleep mode) keeps its pod, process and GPU slice
but gives back its GPU memory; waking it takes about a second instead of a
cold start. Any request restarts the idle clock, and one arriving while the
model sleeps wakes a replica.

- :func:`sleep_due`: is the idle stretch long enough to sleep, and when to
  look again;
- :func:`replicas_to_sleep`: the awake replicas to put to sleep now, never
  one with requests running or waiting;
- :func:`choose_wake`: which sleeping replica to wake (level 1 first: its
  weights are in host RAM, so it wakes fastest);
- :func:`sleep_or_zero`: at the end of the grace period, whether a sleeping
  replica stays asleep or goes to zero, on expected cost (the keep-alive
  rule of :mod:`scaler.policy.idle.keep_alive` with the wake's cost in
  place of the cold start's).

Main decision: a busy replica (requests running or waiting) is never put to
sleep, so the ladder can never cut a running request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from scaler.policy.api import ScalingConfig
from scaler.policy.idle.keep_alive import IdleGaps, miss_price_s

__all__ = [
    "Replica",
    "Rung",
    "choose_wake",
    "mean_gap_s",
    "replicas_to_sleep",
    "rung",
    "sleep_due",
    "sleep_or_zero",
]


class Rung(StrEnum):
    """Where a model stands on the ladder."""

    SERVING = "serving"  # at least one replica awake
    SLEEPING = "sleeping"  # replicas exist, all asleep
    ZERO = "zero"  # no replicas


@dataclass(frozen=True, slots=True)
class Replica:
    """One pod of a model as the scaler sees it."""

    pod: str
    sleeping: bool = False
    level: int = 0  # the sleep level while sleeping
    busy: bool = False  # requests running or waiting on it (scrape or activator)
    ready: bool = True


def sleep_due(
    config: ScalingConfig, idle_since_s: float | None, now: float
) -> tuple[bool, float | None]:
    """(sleep now?, seconds until it will be due) for a model idle since ``idle_since_s``.

    Off (``sleep-after`` unset) or busy (``idle_since_s`` None): never due, no recheck.
    """
    after = config.sleep_after_s
    if after is None or idle_since_s is None:
        return False, None
    idle_for = now - idle_since_s
    if idle_for >= after:
        return True, None
    return False, after - idle_for


def replicas_to_sleep(
    config: ScalingConfig, replicas: Sequence[Replica], idle_since_s: float | None, now: float
) -> tuple[str, ...]:
    """The pods to put to sleep now: awake, ready and not busy, once sleep is due."""
    due, _ = sleep_due(config, idle_since_s, now)
    if not due:
        return ()
    return tuple(r.pod for r in replicas if r.ready and not r.sleeping and not r.busy)


def rung(replicas: Sequence[Replica]) -> Rung:
    if not replicas:
        return Rung.ZERO
    if any(not r.sleeping for r in replicas):
        return Rung.SERVING
    return Rung.SLEEPING


def choose_wake(replicas: Sequence[Replica]) -> Replica | None:
    """The sleeping replica to wake: level 1 before level 2, then by name."""
    asleep = [r for r in replicas if r.sleeping and r.ready]
    if not asleep:
        return None
    return min(asleep, key=lambda r: (r.level != 1, r.pod))


def mean_gap_s(gaps: IdleGaps) -> float | None:
    """A model's mean idle gap (end of use to its next request); None before one ended."""
    if not gaps.gaps:
        return None
    return sum(gaps.gaps) / len(gaps.gaps)


def sleep_or_zero(
    config: ScalingConfig, gaps: IdleGaps, *, share: float, cold_start_s: float, now: float
) -> bool:
    """At the end of the grace period: does a sleeping replica stay asleep (True)?

    The keep-alive rule with the wake in place of the awake replica: staying
    asleep for the next cold start costs ``share`` (the part of its GPU the
    pod is charged for: see the scorecard's accounting) of a GPU for that
    long; going to zero makes the next request within it wait a cold start,
    it and those behind it missing the objective at the miss price. A wake
    costs about a second and misses nothing, so it stays asleep while
    ``share x C <= P(request within C) x misses x miss price``.
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share of a GPU must be within 0..1; got {share!r}")
    p = gaps.p_request_within(cold_start_s, now)
    span = max(1e-9, now - gaps.started_s)
    misses = 1.0 + (len(gaps.gaps) + 1) / span * cold_start_s
    price = miss_price_s(cold_start_s=cold_start_s, attainment=config.slo_attainment)
    return share * cold_start_s <= p * misses * price
