"""The decision's reason and message, from what each step did.

One function reads the steps' results and picks the reason a maintainer
sees on the status annotation and in Events: a change says which way and
why (the signals, a limit, min-scale, the delay); no change says what held
it (no data, settling, the delay, the grace period, busy) before "steady".
"""

from __future__ import annotations

from scaler.policy.api import Mode, Reason, ScalingConfig
from scaler.policy.steps.holds import Delay, Floor, lowest_above_zero
from scaler.policy.steps.outcome import seconds_text
from scaler.policy.steps.per_signal import Estimates
from scaler.policy.steps.zero import Idle

__all__ = ["explain"]


def explain(
    *,
    config: ScalingConfig,
    est: Estimates,
    mode: Mode,
    desired: int,
    current: int,
    signal_want: int,
    floor: Floor,
    delay: Delay,
    idle: Idle,
    grace_pending: bool,
    busy: bool,
) -> tuple[Reason, str]:
    """The decision's reason and message, from what each step did."""
    low = lowest_above_zero(config)
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
            f"settling ({seconds_text(floor.settle_left_s)} left): keeping {desired}",
        )
    if delay.delayed or (grace_pending and signal_want < low):
        if delay.delayed:
            return Reason.HOLDING, f"signals want {signal_want}; scale-down delay holds {desired}"
        grace = seconds_text(config.scale_to_zero_grace_s)
        return Reason.HOLDING, f"idle {seconds_text(idle.for_s)} of {grace} grace period"
    if config.min_scale == 0 and signal_want < low and not busy and not idle.now_idle:
        # Would go to zero but some demand source is stale: "not busy" is unproven.
        return Reason.NO_DATA, f"not every demand source is fresh: keeping {desired}"
    if busy and signal_want < low:
        return Reason.STEADY, "busy: keeping at least one replica"
    return Reason.STEADY, f"signals want {signal_want} ({mode})"
