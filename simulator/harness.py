"""A small simulated world for one target: a clock, a Deployment, an activator's view.

The seed of the policy simulator: it steps the scaler's own :func:`decide`
and :class:`SignalWindows` through a load curve (no requests, no engine), which
is what the policy's scenario and property tests need. The full simulator
(:mod:`simulator.world`) adds requests, replicas with engines, the
activator's holding and balancing, and the baselines.

- :func:`config` builds a :class:`ScalingConfig` from keyword overrides.
- :func:`observation` builds an :class:`Observation` with defaults (one
  ready replica, every signal fresh, idle, all sources fresh).
- :class:`Sim` steps a simulated clock one second at a time. Each second it
  records the load (concurrency, optionally KV-cache utilization) into real
  :class:`SignalWindows`, as the controller would when reports arrive; every
  ``tick_s`` it calls :func:`decide`; when the target is at zero and load
  arrives it decides at once with ``activation_requested`` (the activator's
  poke). Pods become ready ``cold_start_s`` after they are asked for; a
  scale-down removes the youngest pods first. Every decision is kept in
  ``Sim.log`` for the checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from scaler.policy import (
    Decision,
    Demand,
    Mode,
    Observation,
    PolicyState,
    Reason,
    ScalingConfig,
    SignalKind,
    SignalReading,
    SignalWindows,
    decide,
)

Load = Callable[[float], float]


def config(**overrides: object) -> ScalingConfig:
    """The docs/annotations.md defaults with ``overrides`` (field names of ScalingConfig)."""
    return replace(ScalingConfig(), **overrides)  # type: ignore[arg-type]


def reading(
    value: float | None, *, panic: float | None = None, fresh: bool = True
) -> SignalReading:
    """A reading whose stable average is ``value`` and panic average ``panic`` (default: same)."""
    return SignalReading(stable=value, panic=value if panic is None else panic, fresh=fresh)


def observation(
    *,
    ready: int = 1,
    spec: int | None = None,
    concurrency: float | None = 0.0,
    signals: Mapping[SignalKind, SignalReading] | None = None,
    busy: bool = False,
    all_sources_fresh: bool = True,
    activation: bool = False,
) -> Observation:
    """An observation with defaults: ``spec`` defaults to ``ready``; ``signals``
    defaults to one fresh concurrency reading (``None``: no concurrency data)."""
    if signals is None:
        signals = {} if concurrency is None else {SignalKind.CONCURRENCY: reading(concurrency)}
    return Observation(
        ready_replicas=ready,
        spec_replicas=ready if spec is None else spec,
        signals=signals,
        demand=Demand(busy=busy, all_sources_fresh=all_sources_fresh),
        activation_requested=activation,
    )


def constant(value: float) -> Load:
    return lambda _t: value


def steps(*points: tuple[float, float]) -> Load:
    """Piecewise-constant load: ``(from_s, value)`` pairs, in time order, 0 before the first."""

    def load(t: float) -> float:
        value = 0.0
        for start, level in points:
            if t >= start:
                value = level
        return value

    return load


@dataclass(frozen=True)
class Entry:
    at_s: float
    decision: Decision
    spec_before: int
    ready: int
    load: float


@dataclass
class Sim:
    """One target in simulated time (see the module docstring). Defaults: docs/annotations.md."""

    config: ScalingConfig = field(default_factory=ScalingConfig)
    load: Load = field(default_factory=lambda: constant(0.0))
    # Seconds in which the signal sources are silent (no samples, demand not fresh).
    outage: Callable[[float], bool] = lambda _t: False
    # Seconds in which only the KV-cache signal is silent (e.g. a model still loading).
    kv_outage: Callable[[float], bool] = lambda _t: False
    # KV-cache utilization per replica at load L over R ready replicas: L / (R * kv_capacity).
    kv_capacity: float = 32.0
    spec: int = 0
    cold_start_s: float = 30.0
    tick_s: float = 2.0
    fresh_within_s: float = 3.0
    now: float = 0.0
    log: list[Entry] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.windows = SignalWindows.for_config(self.config)
        self.state = PolicyState.initial(self.now)
        # Times at which each current pod was asked for (oldest first).
        self.pods: list[float] = [self.now - self.cold_start_s] * self.spec

    @property
    def ready(self) -> int:
        return sum(1 for started in self.pods if started + self.cold_start_s <= self.now)

    def _record(self) -> None:
        t = self.now
        if self.outage(t):
            return
        load = self.load(t)
        self.windows.record(SignalKind.CONCURRENCY, load, t)
        if self.config.target_kv_cache_utilization is not None and not self.kv_outage(t):
            ready = self.ready
            if ready:
                self.windows.record(
                    SignalKind.KV_CACHE_UTILIZATION,
                    min(1.0, load / (ready * self.kv_capacity)),
                    t,
                )

    def decide_now(self, *, activation: bool = False) -> Decision:
        t = self.now
        load = self.load(t)
        up = not self.outage(t)
        obs = Observation(
            ready_replicas=self.ready,
            spec_replicas=self.spec,
            signals=self.windows.readings(self.config, t, fresh_within_s=self.fresh_within_s),
            demand=Demand(busy=up and load > 0, all_sources_fresh=up),
            activation_requested=activation,
        )
        decision, self.state = decide(config=self.config, observation=obs, state=self.state, now=t)
        self.log.append(Entry(t, decision, self.spec, obs.ready_replicas, load))
        self._apply(decision.desired)
        return decision

    def _apply(self, desired: int) -> None:
        if desired > len(self.pods):
            self.pods.extend([self.now] * (desired - len(self.pods)))
        else:
            del self.pods[desired:]  # youngest (least ready) first
        self.spec = desired

    def run(self, until_s: float) -> Sim:
        """Step one second at a time up to ``until_s`` (inclusive)."""
        while self.now <= until_s:
            self._record()
            if self.spec == 0 and self.load(self.now) > 0 and not self.outage(self.now):
                self.decide_now(activation=True)  # the activator's poke
            elif math.isclose(self.now % self.tick_s, 0.0, abs_tol=1e-9):
                self.decide_now()
            self.now += 1.0
        return self

    # --- queries for checks ------------------------------------------------------

    def between(self, start_s: float, end_s: float) -> list[Entry]:
        return [e for e in self.log if start_s <= e.at_s <= end_s]

    def at(self, at_s: float) -> Entry:
        for entry in self.log:
            if entry.at_s == at_s:
                return entry
        raise AssertionError(f"no decision at t={at_s}s; decisions at {[e.at_s for e in self.log]}")

    def first(self, predicate: Callable[[Entry], bool], *, after_s: float = -math.inf) -> Entry:
        for entry in self.log:
            if entry.at_s >= after_s and predicate(entry):
                return entry
        raise AssertionError("no decision matched")

    def desired(self, start_s: float, end_s: float) -> list[int]:
        return [e.decision.desired for e in self.between(start_s, end_s)]

    def summary(self, start_s: float = -math.inf, end_s: float = math.inf) -> str:
        lines = [
            f"t={e.at_s:>6.0f} load={e.load:>6.1f} ready={e.ready:>3} spec={e.spec_before:>3}"
            f" -> {e.decision.desired:>3} {e.decision.reason:<12} {e.decision.mode:<6}"
            f" {e.decision.message}"
            for e in self.between(start_s, end_s)
        ]
        return "\n".join(lines)


__all__ = [
    "Entry",
    "Load",
    "Mode",
    "Reason",
    "Sim",
    "config",
    "constant",
    "observation",
    "reading",
    "steps",
]
