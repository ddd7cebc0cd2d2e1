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

In the code, :func:`decide` reads as this list, each step a small pure
function of its inputs in :mod:`scaler.policy.steps`: ``estimate`` (1,
:mod:`~scaler.policy.steps.per_signal`), ``rates`` (2), ``panic`` (3),
``idle_stretch`` (the idle clock), then ``at_zero`` or ``grace_over`` for
zero (:mod:`~scaler.policy.steps.zero`), else ``no_data_floor`` (4),
``scale_down_delay`` (5), ``bounds`` (6) (:mod:`~scaler.policy.steps.holds`),
and ``explain`` for the reason and message; ``finish``
(:mod:`~scaler.policy.steps.outcome`) makes the decision and the next
:class:`~scaler.policy.state.PolicyState` from whichever step ended it.
"""

from __future__ import annotations

import math
from dataclasses import replace

from scaler.policy.api import Decision, Observation, ScalingConfig
from scaler.policy.state import PolicyState
from scaler.policy.steps.explain import explain
from scaler.policy.steps.holds import bounds, no_data_floor, scale_down_delay
from scaler.policy.steps.outcome import Context, Outcome, finish
from scaler.policy.steps.panic import panic_mode
from scaler.policy.steps.per_signal import desired_for_signal, estimate, per_signal
from scaler.policy.steps.rates import rate_limits
from scaler.policy.steps.zero import at_zero, grace_over, idle_stretch, to_zero
from scaler.policy.wake_backlog import WakeBacklog

__all__ = ["PolicyState", "decide", "desired_for_signal"]


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
    est = estimate(config, observation, wake, now)  # 1. per signal
    rates = rate_limits(config, current, ready)  # 2. rates
    panic = panic_mode(config, state, est, rates, current=current, ready=ready, now=now)  # 3. panic
    idle = idle_stretch(state, observation.demand, observation.demand_seen_at_s, now)
    context = Context(per_signal=per_signal(est, panic.mode), missing=est.missing, now=now)

    if current == 0:
        outcome = at_zero(config, observation, est, rates, panic, idle, now)
        decision, new_state = finish(state, outcome, context)
        # A wake begins: its held requests are a backlog (scaler.policy.wake_backlog).
        began = WakeBacklog.start(now) if outcome.desired > 0 else None
        return decision, replace(new_state, wake=began)
    if grace_over(config, est, idle):
        decision, new_state = finish(state, to_zero(config, idle), context)
        return decision, replace(new_state, wake=None)

    floor = no_data_floor(config, state, est, panic.want, current, now)  # 4. no data
    delay = scale_down_delay(config, state, floor.want, now)  # 5. scale-down delay
    desired = bounds(config, delay.want)  # 6. bounds
    grace_s = config.scale_to_zero_grace_s
    grace_pending = config.min_scale == 0 and idle.since_s is not None and idle.for_s < grace_s
    reason, message = explain(
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
    decision, new_state = finish(
        state,
        Outcome(
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
