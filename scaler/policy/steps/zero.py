"""Zero, outside the pipeline: the idle clock, waking from zero and going to it.

- **The idle clock**: idle is not busy with every demand source fresh; the
  stretch restarts on demand seen by any report, not only at a decision (a
  short request between two ticks counts).
- **From zero**, an activation (or demand seen as busy) wakes the target in
  the same decision to ``max(initial_scale, min_scale, signal-desired)``
  (reason ``Activated``); nothing waits for a tick or a delay. Without
  either, a target at zero stays there: window averages at zero still
  remember the traffic before it and must not wake it.
- **To zero** only when ``min_scale == 0``, idle, every signal fresh, and
  that has held for ``scale_to_zero_grace_s``. The grace period is the
  delay for this step: it bypasses the scale-down delay and rate, because
  with nothing running anywhere for the whole grace period no request can
  be cut. Never while busy.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.policy.api import Demand, Observation, Reason, ScalingConfig
from scaler.policy.state import PolicyState
from scaler.policy.steps.holds import hold_from
from scaler.policy.steps.outcome import Outcome, seconds_text
from scaler.policy.steps.panic import Panic
from scaler.policy.steps.per_signal import Estimates
from scaler.policy.steps.rates import Rates
from scaler.policy.windows import MaxHold

__all__ = ["Idle", "at_zero", "grace_over", "idle_stretch", "to_zero"]


@dataclass(frozen=True, slots=True)
class Idle:
    now_idle: bool  # not busy, and every source fresh
    since_s: float | None  # start of the current idle stretch
    for_s: float  # how long it has lasted (0 when not idle)


def idle_stretch(state: PolicyState, demand: Demand, seen_at_s: float | None, now: float) -> Idle:
    """The current idle stretch. Demand seen by any report restarts it, not only
    demand at a decision: a short request between two ticks counts."""
    now_idle = not demand.busy and demand.all_sources_fresh
    since = (state.idle_since_s if state.idle_since_s is not None else now) if now_idle else None
    if since is not None and seen_at_s is not None and seen_at_s > since:
        since = min(seen_at_s, now)
    return Idle(now_idle=now_idle, since_s=since, for_s=now - since if since is not None else 0.0)


def at_zero(
    config: ScalingConfig,
    observation: Observation,
    est: Estimates,
    rates: Rates,
    panic: Panic,
    idle: Idle,
    now: float,
) -> Outcome:
    """From zero: wake at once on an activation or visible demand; else stay (or rise
    to min-scale)."""
    if observation.activation_requested or observation.demand.busy:
        signal_desired = min(max(est.stable, est.panic), rates.max_up)
        desired = min(max(config.initial_scale, config.min_scale, signal_desired), config.max_scale)
        why = "activation" if observation.activation_requested else "demand while at zero"
        return Outcome(
            desired=desired,
            reason=Reason.ACTIVATED,
            message=(
                f"woke from zero on {why} to {desired} (initial-scale {config.initial_scale}, "
                f"signals want {signal_desired})"
            ),
            hold=hold_from(desired, config, now),
            panic_crossed_s=panic.crossed_s,
            panic_desired=max(panic.desired, desired) if panic.crossed_s is not None else 0,
            # An activation is demand: the idle clock restarts, or a target idle at
            # zero for an hour could be sent back to zero at the next tick, before
            # the activator's report shows it busy.
            idle_since_s=None,
        )
    if config.min_scale > 0:
        desired = min(config.min_scale, config.max_scale)
        return Outcome(
            desired=desired,
            reason=Reason.SCALED_UP,
            message=f"raised to min-scale {desired}",
            hold=hold_from(desired, config, now),
            panic_crossed_s=panic.crossed_s,
            panic_desired=panic.desired,
            idle_since_s=idle.since_s,
        )
    return Outcome(
        desired=0,
        reason=Reason.STEADY,
        message="at zero, no demand",
        hold=MaxHold(),
        panic_crossed_s=None,
        panic_desired=0,
        idle_since_s=idle.since_s,
    )


def grace_over(config: ScalingConfig, est: Estimates, idle: Idle) -> bool:
    """To zero: min-scale 0, idle (nothing busy, every source fresh) for the whole grace
    period, and every signal fresh. The grace period is this step's delay: it bypasses
    the scale-down delay and rate."""
    return (
        config.min_scale == 0
        and idle.since_s is not None
        and not est.missing
        and idle.for_s >= config.scale_to_zero_grace_s
    )


def to_zero(config: ScalingConfig, idle: Idle) -> Outcome:
    """The decision to zero, once :func:`grace_over`: no hold, out of panic."""
    grace_s = config.scale_to_zero_grace_s
    return Outcome(
        desired=0,
        reason=Reason.SCALED_TO_ZERO,
        message=f"idle for {seconds_text(idle.for_s)} (grace period {seconds_text(grace_s)})",
        hold=MaxHold(),
        panic_crossed_s=None,
        panic_desired=0,
        idle_since_s=idle.since_s,
    )
