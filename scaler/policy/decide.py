"""One target's scaling decision: ``decide(config, observation, state, now) -> (Decision, state)``.

Pure: no clock, no I/O; the state goes in and comes out as a frozen
:class:`PolicyState`, so a test steps a simulated clock through a scenario.

The pipeline, in order (docs/architecture.md, "The scaler"; Knative's KPA ``autoscaler.go`` where it
says "as Knative"):

1. **Per signal**, from its stable and panic averages: counts (concurrency,
   queue depth) want ``ceil(total / target)``; utilizations want
   ``ceil(ready x average / target)``. Only *fresh* signals count.
2. **Rates** (as Knative, on ``max(ready, 1)``): at most
   ``ceil(up_rate x max(ready, 1))`` (the ceiling guarantees a step of at
   least one replica when the rate is close to 1), but never forcing a
   decrease below the current scale while pods are still starting; at least
   ``ceil(max(ready, 1) / down_rate)`` (desired >= ready / rate: a scale-down
   step is bounded by the rate; Knative rounds this one down), capped at ``ready - 1`` so that a
   rate close to 1 still lets the scale step down, and at the current scale
   so that pods still terminating (counted ready) never push it back up.
3. **Panic** (as Knative): enter when panic-desired / max(ready, 1) reaches
   the threshold; every crossing extends it; leave once a whole stable window
   has passed since the last crossing. In panic the desired scale is the
   largest seen since panic began, and never below the current scale (panic
   never scales down, even while most of the current scale is still starting).
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
settling time will end: the controller should decide again then if its next tick
is later.

In the code, :func:`decide` reads as this list: ``_estimate`` (1),
``_rates`` (2), ``_panic`` (3), ``_idle`` (the idle clock), then
``_at_zero`` or ``_grace_over`` for zero, else ``_no_data_floor`` (4),
``_scale_down_delay`` (5), ``_bounds`` (6), and ``_explain`` for the reason
and message; each a small pure function of its inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from scaler.policy.api import (
    Decision,
    Demand,
    Mode,
    Observation,
    Reason,
    ScalingConfig,
    SignalKind,
    SignalReading,
)
from scaler.policy.idle.adaptive import AdaptiveGrace
from scaler.policy.wake_backlog import WakeBacklog, capped, count_demand
from scaler.policy.windows import MaxHold

if TYPE_CHECKING:
    from scaler.policy.slo.state import SloState

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
    this state was created (its settling time), ``last_desired``/``last_change_s``/
    ``last_reason`` the previous decision (for the status annotation),
    ``adaptive`` the learned grace period's state (only with
    ``scale-to-zero-grace-period: adaptive``; :mod:`scaler.policy.idle.grace`
    keeps it, ``decide`` passes it through), ``slo`` what SLO-first scaling
    learns of the target (only with ``slo-ttft``; :mod:`scaler.policy.slo.decide`),
    ``wake`` the wake in progress, whose backlog the count signals do not take
    for demand (:mod:`scaler.policy.wake_backlog`).
    """

    started_s: float
    panic_crossed_s: float | None = None
    panic_desired: int = 0
    delay_hold: MaxHold = field(default_factory=MaxHold)
    idle_since_s: float | None = None
    last_desired: int | None = None
    last_change_s: float | None = None
    last_reason: Reason | None = None
    adaptive: AdaptiveGrace | None = None
    slo: SloState | None = None
    wake: WakeBacklog | None = None

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
    """Replicas that ``kind`` at ``average`` asks for (docs/architecture.md, "The scaler").

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


def _estimate(
    config: ScalingConfig, observation: Observation, wake: WakeBacklog | None, now: float
) -> _Estimates:
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
    return _Estimates(stable, panic, per_stable, per_panic, tuple(missing))


def _fmt_s(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds >= 1 else f"{seconds:.1f}s"


# --- step 2: rates ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rates:
    max_up: int  # the most replicas this decision may ask for
    min_down: int  # the fewest (above zero) it may ask for


def _rates(config: ScalingConfig, current: int, ready: int) -> _Rates:
    """Knative's rate limits on ``max(ready, 1)``; a rate never forces a step the other
    way (ready can still count pods a scale-down is removing, so the floor is capped at
    the current scale)."""
    base = max(ready, 1)
    max_up = max(current, math.ceil(config.max_scale_up_rate * base - _EPSILON))
    min_down = min(_ceil(base / config.max_scale_down_rate), base - 1, current)
    return _Rates(max_up=max_up, min_down=min_down)


def _limit(want: int, rates: _Rates) -> int:
    return min(max(want, rates.min_down), rates.max_up)


# --- step 3: panic ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Panic:
    crossed_s: float | None  # last crossing of the threshold; None: stable mode
    desired: int  # the highest desired since panic began (0 in stable mode)
    want: int  # what stable and panic together want now

    @property
    def mode(self) -> Mode:
        return Mode.STABLE if self.crossed_s is None else Mode.PANIC


def _panic(
    config: ScalingConfig,
    state: PolicyState,
    est: _Estimates,
    rates: _Rates,
    *,
    current: int,
    ready: int,
    now: float,
) -> _Panic:
    """Enter when panic-desired / max(ready, 1) reaches the threshold; every crossing
    extends it; leave a whole stable window after the last. In panic the desired
    scale is the largest since panic began, and at least the current scale."""
    crossed_s, top = state.panic_crossed_s, state.panic_desired
    if est.panic / max(ready, 1) >= config.panic_threshold_percentage / 100.0:
        crossed_s = now
    elif crossed_s is not None and now - crossed_s > config.window_s:
        crossed_s, top = None, 0
    want = _limit(est.stable, rates)
    if crossed_s is not None:
        # Panic never scales down (docs/architecture.md): at least the current scale, even
        # when most of it is still starting and the estimate is lower.
        want = max(want, _limit(est.panic, rates), top, current)
        top = want
    return _Panic(crossed_s=crossed_s, desired=top, want=want)


def _per_signal(est: _Estimates, mode: Mode) -> dict[SignalKind, int]:
    """What each signal asks for, for the decision's record (panic: the larger view)."""
    if mode is Mode.STABLE:
        return dict(est.per_signal_stable)
    return {k: max(v, est.per_signal_panic.get(k, 0)) for k, v in est.per_signal_stable.items()}


# --- idle clock (for zero) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Idle:
    now_idle: bool  # not busy, and every source fresh
    since_s: float | None  # start of the current idle stretch
    for_s: float  # how long it has lasted (0 when not idle)


def _idle(state: PolicyState, demand: Demand, seen_at_s: float | None, now: float) -> _Idle:
    """The current idle stretch. Demand seen by any report restarts it, not only
    demand at a decision: a short request between two ticks counts."""
    now_idle = not demand.busy and demand.all_sources_fresh
    since = (state.idle_since_s if state.idle_since_s is not None else now) if now_idle else None
    if since is not None and seen_at_s is not None and seen_at_s > since:
        since = min(seen_at_s, now)
    return _Idle(now_idle=now_idle, since_s=since, for_s=now - since if since is not None else 0.0)


# --- the result ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Outcome:
    """Everything the decision and the next state need, whichever step ended it."""

    desired: int
    reason: Reason
    message: str
    hold: MaxHold
    panic_crossed_s: float | None
    panic_desired: int
    idle_since_s: float | None
    recheck_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class _Context:
    """What every outcome's decision records, whichever step ended it."""

    per_signal: dict[SignalKind, int]
    missing: tuple[SignalKind, ...]
    now: float


def _finish(
    state: PolicyState, outcome: _Outcome, context: _Context
) -> tuple[Decision, PolicyState]:
    per_signal, missing, now = context.per_signal, context.missing, context.now
    decision = Decision(
        desired=outcome.desired,
        reason=outcome.reason,
        mode=Mode.STABLE if outcome.panic_crossed_s is None else Mode.PANIC,
        per_signal=per_signal,
        recheck_after_s=outcome.recheck_after_s,
        message=outcome.message,
        missing_signals=missing,
    )
    changed = state.last_desired is None or outcome.desired != state.last_desired
    new_state = replace(
        state,
        panic_crossed_s=outcome.panic_crossed_s,
        panic_desired=outcome.panic_desired,
        delay_hold=outcome.hold,
        idle_since_s=outcome.idle_since_s,
        last_desired=outcome.desired,
        last_change_s=now if changed else state.last_change_s,
        last_reason=outcome.reason,
    )
    return decision, new_state


def _hold_from(desired: int, config: ScalingConfig, now: float) -> MaxHold:
    """A fresh scale-down hold that starts at ``desired`` (none without a delay)."""
    delay_s = config.scale_down_delay_s
    return MaxHold().record(desired, now, window_s=delay_s) if delay_s > 0 else MaxHold()


# --- zero: waking from it, and going to it -------------------------------------------


def _at_zero(
    config: ScalingConfig,
    observation: Observation,
    est: _Estimates,
    rates: _Rates,
    panic: _Panic,
    idle: _Idle,
    now: float,
) -> _Outcome:
    """From zero: wake at once on an activation or visible demand; else stay (or rise
    to min-scale)."""
    if observation.activation_requested or observation.demand.busy:
        signal_desired = min(max(est.stable, est.panic), rates.max_up)
        desired = min(max(config.initial_scale, config.min_scale, signal_desired), config.max_scale)
        why = "activation" if observation.activation_requested else "demand while at zero"
        return _Outcome(
            desired=desired,
            reason=Reason.ACTIVATED,
            message=(
                f"woke from zero on {why} to {desired} (initial-scale {config.initial_scale}, "
                f"signals want {signal_desired})"
            ),
            hold=_hold_from(desired, config, now),
            panic_crossed_s=panic.crossed_s,
            panic_desired=max(panic.desired, desired) if panic.crossed_s is not None else 0,
            # An activation is demand: the idle clock restarts, or a target idle at
            # zero for an hour could be sent back to zero at the next tick, before
            # the activator's report shows it busy.
            idle_since_s=None,
        )
    if config.min_scale > 0:
        desired = min(config.min_scale, config.max_scale)
        return _Outcome(
            desired=desired,
            reason=Reason.SCALED_UP,
            message=f"raised to min-scale {desired}",
            hold=_hold_from(desired, config, now),
            panic_crossed_s=panic.crossed_s,
            panic_desired=panic.desired,
            idle_since_s=idle.since_s,
        )
    return _Outcome(
        desired=0,
        reason=Reason.STEADY,
        message="at zero, no demand",
        hold=MaxHold(),
        panic_crossed_s=None,
        panic_desired=0,
        idle_since_s=idle.since_s,
    )


def _grace_over(config: ScalingConfig, est: _Estimates, idle: _Idle) -> bool:
    """To zero: min-scale 0, idle (nothing busy, every source fresh) for the whole grace
    period, and every signal fresh. The grace period is this step's delay: it bypasses
    the scale-down delay and rate."""
    return (
        config.min_scale == 0
        and idle.since_s is not None
        and not est.missing
        and idle.for_s >= config.scale_to_zero_grace_s
    )


# --- steps 4-6: no-data floor, scale-down delay, bounds ------------------------------


@dataclass(frozen=True, slots=True)
class _Floor:
    want: int
    applied: bool  # the no-data or settling floor raised ``want`` to the current scale
    settle_left_s: float
    recheck_s: float | None  # when the settling ends (only if that is what holds)


def _no_data_floor(
    config: ScalingConfig, state: PolicyState, est: _Estimates, want: int, current: int, now: float
) -> _Floor:
    """No data is not zero load; nor is a freshly started policy: either keeps the
    scale from falling below the current one."""
    settle_left_s = state.started_s + config.window_s - now
    if (est.missing or settle_left_s > 0) and want < current:
        recheck = settle_left_s if not est.missing else None
        return _Floor(want=current, applied=True, settle_left_s=settle_left_s, recheck_s=recheck)
    return _Floor(want=want, applied=False, settle_left_s=settle_left_s, recheck_s=None)


@dataclass(frozen=True, slots=True)
class _Delay:
    want: int
    hold: MaxHold
    delayed: bool  # the hold raised ``want``
    recheck_s: float | None  # when the held value next changes


def _scale_down_delay(config: ScalingConfig, state: PolicyState, want: int, now: float) -> _Delay:
    """The highest decision within the delay is held. It only "holds" above the
    non-zero floor; below that the grace period is what holds."""
    delay_s = config.scale_down_delay_s
    if delay_s <= 0:
        return _Delay(want=want, hold=MaxHold(), delayed=False, recheck_s=None)
    hold = state.delay_hold.record(want, now, window_s=delay_s)
    held = hold.current(now, window_s=delay_s)
    if held is not None and held > max(want, _floor(config)):
        expiry = hold.next_change_s(now, window_s=delay_s)
        return _Delay(want=held, hold=hold, delayed=True, recheck_s=expiry)
    return _Delay(want=want, hold=hold, delayed=False, recheck_s=None)


def _floor(config: ScalingConfig) -> int:
    return max(1, config.min_scale)


def _bounds(config: ScalingConfig, want: int) -> int:
    """``[max(1, min_scale), max_scale]`` above zero."""
    return min(max(want, _floor(config)), config.max_scale)


# --- the explanation ---------------------------------------------------------------


def _explain(
    *,
    config: ScalingConfig,
    est: _Estimates,
    mode: Mode,
    desired: int,
    current: int,
    signal_want: int,
    floor: _Floor,
    delay: _Delay,
    idle: _Idle,
    grace_pending: bool,
    busy: bool,
) -> tuple[Reason, str]:
    """The decision's reason and message, from what each step did."""
    low = _floor(config)
    top = est.stable if mode is Mode.STABLE else max(est.stable, est.panic)
    if desired > current:
        message = f"signals want {top} ({mode})"
        if desired < top:
            message += f", limited to {desired}"
        elif desired == low > top:
            message = f"raised to min-scale {desired}"
        return Reason.SCALED_UP, message
    if desired < current:
        message = f"signals want {signal_want} ({mode})"
        if delay.delayed:
            message += f", scale-down delay holds {desired}"
        return Reason.SCALED_DOWN, message
    if floor.applied:
        if est.missing:
            names = ", ".join(str(kind) for kind in est.missing)
            return Reason.NO_DATA, f"no fresh data for {names}: keeping {desired}"
        return (
            Reason.NO_DATA,
            f"settling ({_fmt_s(floor.settle_left_s)} left): keeping {desired}",
        )
    if delay.delayed or (grace_pending and signal_want < low):
        if delay.delayed:
            return Reason.HOLDING, f"signals want {signal_want}; scale-down delay holds {desired}"
        grace = _fmt_s(config.scale_to_zero_grace_s)
        return Reason.HOLDING, f"idle {_fmt_s(idle.for_s)} of {grace} grace period"
    if config.min_scale == 0 and signal_want < low and not busy and not idle.now_idle:
        # Would go to zero but some demand source is stale: "not busy" is unproven.
        return Reason.NO_DATA, f"not every demand source is fresh: keeping {desired}"
    if busy and signal_want < low:
        return Reason.STEADY, "busy: keeping at least one replica"
    return Reason.STEADY, f"signals want {signal_want} ({mode})"


# --- decide ---------------------------------------------------------------------------


def _check(observation: Observation, now: float) -> None:
    if not math.isfinite(now):
        raise ValueError(f"now must be a finite number of seconds, got {now!r}")
    if observation.ready_replicas < 0 or observation.spec_replicas < 0:
        raise ValueError(
            "replica counts must be >= 0, got "
            f"ready={observation.ready_replicas} spec={observation.spec_replicas}"
        )


def decide(
    *, config: ScalingConfig, observation: Observation, state: PolicyState, now: float
) -> tuple[Decision, PolicyState]:
    """Decide one target's desired replica count at ``now``; see the module docstring."""
    _check(observation, now)
    current, ready = observation.spec_replicas, observation.ready_replicas
    wake = state.wake.follow(observation, config, now) if state.wake is not None else None
    est = _estimate(config, observation, wake, now)  # 1. per signal
    rates = _rates(config, current, ready)  # 2. rates
    panic = _panic(config, state, est, rates, current=current, ready=ready, now=now)  # 3. panic
    idle = _idle(state, observation.demand, observation.demand_seen_at_s, now)
    context = _Context(per_signal=_per_signal(est, panic.mode), missing=est.missing, now=now)

    if current == 0:
        outcome = _at_zero(config, observation, est, rates, panic, idle, now)
        decision, new_state = _finish(state, outcome, context)
        # A wake begins: its held requests are a backlog (scaler.policy.wake_backlog).
        began = WakeBacklog.start(now) if outcome.desired > 0 else None
        return decision, replace(new_state, wake=began)
    if _grace_over(config, est, idle):
        grace_s = config.scale_to_zero_grace_s
        decision, new_state = _finish(
            state,
            _Outcome(
                desired=0,
                reason=Reason.SCALED_TO_ZERO,
                message=f"idle for {_fmt_s(idle.for_s)} (grace period {_fmt_s(grace_s)})",
                hold=MaxHold(),
                panic_crossed_s=None,
                panic_desired=0,
                idle_since_s=idle.since_s,
            ),
            context,
        )
        return decision, replace(new_state, wake=None)

    floor = _no_data_floor(config, state, est, panic.want, current, now)  # 4. no data
    delay = _scale_down_delay(config, state, floor.want, now)  # 5. scale-down delay
    desired = _bounds(config, delay.want)  # 6. bounds
    grace_s = config.scale_to_zero_grace_s
    grace_pending = config.min_scale == 0 and idle.since_s is not None and idle.for_s < grace_s
    reason, message = _explain(
        config=config,
        est=est,
        mode=panic.mode,
        desired=desired,
        current=current,
        signal_want=panic.want,
        floor=floor,
        delay=delay,
        idle=idle,
        grace_pending=grace_pending,
        busy=observation.demand.busy,
    )
    if wake is not None:
        message += f"; {wake.why(config, now)}"
    rechecks = [floor.recheck_s, delay.recheck_s, grace_s - idle.for_s if grace_pending else None]
    decision, new_state = _finish(
        state,
        _Outcome(
            desired=desired,
            reason=reason,
            message=message,
            hold=delay.hold,
            panic_crossed_s=panic.crossed_s,
            panic_desired=panic.desired,
            idle_since_s=idle.since_s,
            recheck_after_s=min((r for r in rechecks if r is not None and r > 0), default=None),
        ),
        context,
    )
    return decision, replace(new_state, wake=wake)
