"""One target's scaling decision: ``decide(config, observation, state, now) -> (Decision, state)``.

Pure: no clock, no I/O; the state goes in and comes out as a frozen
:class:`PolicyState`, so a test steps a simulated clock through a scenario.

The pipeline, in order (DESIGN §4; Knative's KPA ``autoscaler.go`` where it
says "as Knative"):

1. **Per signal**, from its stable and panic averages: counts (concurrency,
   queue depth) want ``ceil(total / target)``; utilizations want
   ``ceil(ready x average / target)``. Only *fresh* signals count.
2. **Rates** (as Knative, on ``max(ready, 1)``): at most
   ``ceil(up_rate x max(ready, 1))`` (the ceiling guarantees a step of at
   least one replica when the rate is close to 1), but never forcing a
   decrease below the current scale while pods are still starting; at least
   ``ceil(max(ready, 1) / down_rate)`` as DESIGN says ("desired >= ready /
   rate"; Knative rounds this one down), capped at ``ready - 1`` so that a
   rate close to 1 still lets the scale step down, and at the current scale
   so that pods still terminating (counted ready) never push it back up.
3. **Panic** (as Knative): enter when panic-desired / max(ready, 1) reaches
   the threshold; every crossing extends it; leave once a whole stable window
   has passed since the last crossing. In panic the desired scale is the
   largest seen since panic began (panic never scales down).
4. **No data is not zero load**: if any configured signal is missing or
   stale, the scale may rise but not fall below the current one (reason
   ``NoData``). Likewise during the first stable window after the policy
   state was created (a restarted scaler has empty windows; Knative starts
   in panic for the same reason).
5. **Scale-down delay**: the highest decision within the delay is held.
6. **Bounds**: ``[max(1, min_scale), max_scale]`` above zero.

**Zero** has its own rules, outside that pipeline:

- To zero only when ``min_scale == 0``, nothing is busy, every source is
  fresh (demand and signals), and that has held continuously for
  ``scale_to_zero_grace_s``. The grace period is the delay for this step: it
  bypasses the scale-down delay and rate, because with nothing running
  anywhere for the whole grace period no request can be cut. Never while
  busy.
- From zero, an activation (or demand seen as busy) wakes the target in the
  same decision to ``max(initial_scale, min_scale, signal-desired)``
  (reason ``Activated``); nothing waits for a tick or a delay. Without either,
  a target at zero stays there: window averages at zero still remember the
  traffic before it and must not wake it.

``recheck_after_s`` is set when the scale-down delay, the grace period or the
warm-up will expire: the controller should decide again then if its next tick
is later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from scaler.policy.api import (
    Decision,
    Mode,
    Observation,
    Reason,
    ScalingConfig,
    SignalKind,
    SignalReading,
)
from scaler.policy.windows import MaxHold

__all__ = ["PolicyState", "decide", "desired_for_signal"]

# Absorbs float noise in window averages (16.0000000001 / 16 must want 1, not 2).
_EPSILON = 1e-9

_COUNT_SIGNALS = frozenset({SignalKind.CONCURRENCY, SignalKind.QUEUE_DEPTH})


@dataclass(frozen=True, slots=True)
class PolicyState:
    """What one target's policy remembers between decisions.

    ``panic_crossed_s`` is the last time the panic threshold was crossed
    (``None``: stable mode), ``panic_desired`` the highest desired count since
    panic began (Knative's ``maxPanicPods``), ``delay_hold`` the decisions of
    the last scale-down delay, ``idle_since_s`` the start of the current
    continuous idle stretch (not busy, every source fresh), ``started_s`` when
    this state was created (warm-up), ``last_desired``/``last_change_s``/
    ``last_reason`` the previous decision (for the status annotation).
    """

    started_s: float
    panic_crossed_s: float | None = None
    panic_desired: int = 0
    delay_hold: MaxHold = field(default_factory=MaxHold)
    idle_since_s: float | None = None
    last_desired: int | None = None
    last_change_s: float | None = None
    last_reason: Reason | None = None

    @classmethod
    def initial(cls, now: float) -> PolicyState:
        """The state for a target first seen at ``now``."""
        if not math.isfinite(now):
            raise ValueError(f"now must be a finite number of seconds, got {now!r}")
        return cls(started_s=now)

    @property
    def mode(self) -> Mode:
        return Mode.STABLE if self.panic_crossed_s is None else Mode.PANIC


def _ceil(x: float) -> int:
    return max(0, math.ceil(x - _EPSILON))


def desired_for_signal(
    kind: SignalKind, average: float, *, config: ScalingConfig, ready_replicas: int
) -> int:
    """Replicas that ``kind`` at ``average`` asks for (DESIGN §4).

    Counts: ``ceil(total / target)``. Utilizations (fractions 0..1):
    ``ceil(ready x average / target)``.
    """
    if kind is SignalKind.CONCURRENCY:
        return _ceil(average / config.target_concurrency)
    if kind is SignalKind.QUEUE_DEPTH:
        target = config.target_queue_depth
    elif kind is SignalKind.KV_CACHE_UTILIZATION:
        target = config.target_kv_cache_utilization
    else:
        target = config.target_gpu_utilization
    if target is None:
        raise ValueError(f"signal {kind} is not configured (its target annotation is unset)")
    if kind in _COUNT_SIGNALS:
        return _ceil(average / target)
    return _ceil(ready_replicas * average / target)


@dataclass(frozen=True, slots=True)
class _Estimates:
    stable: int  # largest stable-window desired over fresh signals (0 when none)
    panic: int  # largest panic-window desired over fresh signals (0 when none)
    per_signal_stable: dict[SignalKind, int]
    per_signal_panic: dict[SignalKind, int]
    missing: tuple[SignalKind, ...]  # configured but missing or stale


def _estimate(config: ScalingConfig, observation: Observation) -> _Estimates:
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
        s = desired_for_signal(kind, reading.stable, config=config, ready_replicas=ready)
        per_stable[kind] = s
        p: int | None = None
        if reading.panic is not None:
            p = desired_for_signal(kind, reading.panic, config=config, ready_replicas=ready)
            per_panic[kind] = p
        if not reading.fresh:
            missing.append(kind)
            continue
        stable = max(stable, s)
        if p is not None:
            panic = max(panic, p)
    return _Estimates(stable, panic, per_stable, per_panic, tuple(missing))


def _fmt_s(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds >= 1 else f"{seconds:.1f}s"


def decide(
    *, config: ScalingConfig, observation: Observation, state: PolicyState, now: float
) -> tuple[Decision, PolicyState]:
    """Decide one target's desired replica count at ``now``; see the module docstring."""
    if not math.isfinite(now):
        raise ValueError(f"now must be a finite number of seconds, got {now!r}")
    if observation.ready_replicas < 0 or observation.spec_replicas < 0:
        raise ValueError(
            "replica counts must be >= 0, got "
            f"ready={observation.ready_replicas} spec={observation.spec_replicas}"
        )
    current = observation.spec_replicas
    ready = observation.ready_replicas
    ready_for_rates = max(ready, 1)
    demand = observation.demand
    est = _estimate(config, observation)

    # Rates, as Knative (step 2 of the module docstring).
    max_up = max(current, math.ceil(config.max_scale_up_rate * ready_for_rates - _EPSILON))
    # A rate limits a step; it never forces one the other way (ready can still
    # count pods that a scale-down is removing, so cap the floor at current).
    min_down = min(
        _ceil(ready_for_rates / config.max_scale_down_rate), ready_for_rates - 1, current
    )
    stable_want = min(max(est.stable, min_down), max_up)
    panic_want = min(max(est.panic, min_down), max_up)

    # Panic, as Knative (step 3).
    panic_crossed_s = state.panic_crossed_s
    panic_desired = state.panic_desired
    over_threshold = est.panic / ready_for_rates >= config.panic_threshold_percentage / 100.0
    if over_threshold:
        panic_crossed_s = now
    elif panic_crossed_s is not None and now - panic_crossed_s > config.window_s:
        panic_crossed_s = None
        panic_desired = 0
    want = stable_want
    if panic_crossed_s is not None:
        want = max(want, panic_want, panic_desired)
        panic_desired = want
    mode = Mode.STABLE if panic_crossed_s is None else Mode.PANIC
    per_signal = {
        kind: max(value, est.per_signal_panic.get(kind, 0)) if mode is Mode.PANIC else value
        for kind, value in est.per_signal_stable.items()
    }

    # Idle tracking for scale to zero.
    idle_now = not demand.busy and demand.all_sources_fresh
    idle_since_s = (
        (state.idle_since_s if state.idle_since_s is not None else now) if idle_now else None
    )
    idle_for_s = now - idle_since_s if idle_since_s is not None else 0.0

    def finish(
        desired: int,
        reason: Reason,
        message: str,
        *,
        hold: MaxHold,
        recheck_after_s: float | None = None,
        panic: tuple[float | None, int] = (panic_crossed_s, panic_desired),
        idle_since: float | None = idle_since_s,
    ) -> tuple[Decision, PolicyState]:
        crossed, top = panic
        decision = Decision(
            desired=desired,
            reason=reason,
            mode=Mode.STABLE if crossed is None else Mode.PANIC,
            per_signal=per_signal,
            recheck_after_s=recheck_after_s,
            message=message,
            missing_signals=est.missing,
        )
        changed = state.last_desired is None or desired != state.last_desired
        new_state = replace(
            state,
            panic_crossed_s=crossed,
            panic_desired=top,
            delay_hold=hold,
            idle_since_s=idle_since,
            last_desired=desired,
            last_change_s=now if changed else state.last_change_s,
            last_reason=reason,
        )
        return decision, new_state

    delay_s = config.scale_down_delay_s

    # From zero: wake at once on an activation or visible demand; else stay.
    if current == 0:
        if observation.activation_requested or demand.busy:
            signal_desired = min(max(est.stable, est.panic), max_up)
            desired = min(
                max(config.initial_scale, config.min_scale, signal_desired), config.max_scale
            )
            hold = MaxHold().record(desired, now, window_s=delay_s) if delay_s > 0 else MaxHold()
            why = "activation" if observation.activation_requested else "demand while at zero"
            return finish(
                desired,
                Reason.ACTIVATED,
                f"woke from zero on {why} to {desired} (initial-scale {config.initial_scale}, "
                f"signals want {signal_desired})",
                hold=hold,
                panic=(
                    panic_crossed_s,
                    max(panic_desired, desired) if panic_crossed_s is not None else 0,
                ),
                # An activation is demand: the idle clock restarts, or a target
                # idle at zero for an hour could be sent back to zero at the next
                # tick, before the activator's report shows it busy.
                idle_since=None,
            )
        if config.min_scale > 0:
            desired = min(config.min_scale, config.max_scale)
            return finish(
                desired,
                Reason.SCALED_UP,
                f"raised to min-scale {desired}",
                hold=MaxHold().record(desired, now, window_s=delay_s) if delay_s > 0 else MaxHold(),
            )
        return finish(0, Reason.STEADY, "at zero, no demand", hold=MaxHold(), panic=(None, 0))

    # Scale to zero after the grace period (its own delay; see the docstring).
    all_fresh = not est.missing
    grace_s = config.scale_to_zero_grace_s
    if config.min_scale == 0 and idle_since_s is not None and all_fresh and idle_for_s >= grace_s:
        return finish(
            0,
            Reason.SCALED_TO_ZERO,
            f"idle for {_fmt_s(idle_for_s)} (grace period {_fmt_s(grace_s)})",
            hold=MaxHold(),
            panic=(None, 0),
        )

    rechecks: list[float] = []
    signal_want = want

    # No data is not zero load; nor is a freshly started policy (step 4).
    warm_up_left_s = state.started_s + config.window_s - now
    no_data_floor = False
    if (est.missing or warm_up_left_s > 0) and want < current:
        want = current
        no_data_floor = True
        if not est.missing:
            rechecks.append(warm_up_left_s)

    # Scale-down delay (step 5). It only "holds" when the held value is above
    # the non-zero floor; below that the grace period is what holds.
    floor = max(1, config.min_scale)
    delayed = False
    if delay_s > 0:
        hold = state.delay_hold.record(want, now, window_s=delay_s)
        held = hold.current(now, window_s=delay_s)
        if held is not None and held > max(want, floor):
            delayed = True
            want = held
            expiry = hold.next_change_s(now, window_s=delay_s)
            if expiry is not None:
                rechecks.append(expiry)
    else:
        hold = MaxHold()

    # Bounds (step 6).
    desired = min(max(want, floor), config.max_scale)
    grace_pending = config.min_scale == 0 and idle_since_s is not None and idle_for_s < grace_s
    if grace_pending:
        rechecks.append(grace_s - idle_for_s)

    top = est.stable if mode is Mode.STABLE else max(est.stable, est.panic)
    if desired > current:
        reason = Reason.SCALED_UP
        message = f"signals want {top} ({mode})"
        if desired < top:
            message += f", limited to {desired}"
        elif desired == floor > top:
            message = f"raised to min-scale {desired}"
    elif desired < current:
        reason = Reason.SCALED_DOWN
        message = f"signals want {signal_want} ({mode})"
        if delayed:
            message += f", scale-down delay holds {desired}"
    elif no_data_floor:
        reason = Reason.NO_DATA
        if est.missing:
            names = ", ".join(str(kind) for kind in est.missing)
            message = f"no fresh data for {names}: keeping {desired}"
        else:
            message = f"warming up ({_fmt_s(warm_up_left_s)} left): keeping {desired}"
    elif delayed or (grace_pending and signal_want < floor):
        reason = Reason.HOLDING
        if delayed:
            message = f"signals want {signal_want}; scale-down delay holds {desired}"
        else:
            message = f"idle {_fmt_s(idle_for_s)} of {_fmt_s(grace_s)} grace period"
    elif config.min_scale == 0 and signal_want < floor and not demand.busy and not idle_now:
        # Would go to zero but some demand source is stale: "not busy" is unproven.
        reason = Reason.NO_DATA
        message = f"not every demand source is fresh: keeping {desired}"
    else:
        reason = Reason.STEADY
        message = f"signals want {signal_want} ({mode})"
        if demand.busy and signal_want < floor:
            message = "busy: keeping at least one replica"

    recheck = min((r for r in rechecks if r > 0), default=None)
    return finish(desired, reason, message, hold=hold, recheck_after_s=recheck)
