"""Steps 4-6 of the decision: what keeps the scale from falling, and the bounds.

4. **No data is not zero load**: if any configured signal is missing or
   stale, the scale may rise but not fall below the current one (reason
   ``NoData``). Likewise during the first stable window after the policy
   state was created (a restarted scaler has empty windows; Knative starts
   in panic for the same reason).
5. **Scale-down delay**: the highest decision within the delay is held. It
   only "holds" above the non-zero floor; below that the grace period is
   what holds (:mod:`scaler.policy.steps.zero`).
6. **Bounds**: ``[max(1, min_scale), max_scale]`` above zero.

Each says when what it holds will end (``recheck_s``), so the controller
decides again then.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.policy.api import ScalingConfig
from scaler.policy.state import PolicyState
from scaler.policy.steps.per_signal import Estimates
from scaler.policy.windows import MaxHold

__all__ = [
    "Delay",
    "Floor",
    "bounds",
    "hold_from",
    "lowest_above_zero",
    "no_data_floor",
    "scale_down_delay",
]


@dataclass(frozen=True, slots=True)
class Floor:
    want: int
    applied: bool  # the no-data or settling floor raised ``want`` to the current scale
    settle_left_s: float
    recheck_s: float | None  # when the settling ends (only if that is what holds)


def no_data_floor(
    config: ScalingConfig, state: PolicyState, est: Estimates, want: int, current: int, now: float
) -> Floor:
    """No data is not zero load; nor is a freshly started policy: either keeps the
    scale from falling below the current one."""
    settle_left_s = state.started_s + config.window_s - now
    if (est.missing or settle_left_s > 0) and want < current:
        recheck = settle_left_s if not est.missing else None
        return Floor(want=current, applied=True, settle_left_s=settle_left_s, recheck_s=recheck)
    return Floor(want=want, applied=False, settle_left_s=settle_left_s, recheck_s=None)


@dataclass(frozen=True, slots=True)
class Delay:
    want: int
    hold: MaxHold
    delayed: bool  # the hold raised ``want``
    recheck_s: float | None  # when the held value next changes


def scale_down_delay(config: ScalingConfig, state: PolicyState, want: int, now: float) -> Delay:
    """The highest decision within the delay is held. It only "holds" above the
    non-zero floor; below that the grace period is what holds."""
    delay_s = config.scale_down_delay_s
    if delay_s <= 0:
        return Delay(want=want, hold=MaxHold(), delayed=False, recheck_s=None)
    hold = state.delay_hold.record(want, now, window_s=delay_s)
    held = hold.current(now, window_s=delay_s)
    if held is not None and held > max(want, lowest_above_zero(config)):
        expiry = hold.next_change_s(now, window_s=delay_s)
        return Delay(want=held, hold=hold, delayed=True, recheck_s=expiry)
    return Delay(want=want, hold=hold, delayed=False, recheck_s=None)


def hold_from(desired: int, config: ScalingConfig, now: float) -> MaxHold:
    """A fresh scale-down hold that starts at ``desired`` (none without a delay)."""
    delay_s = config.scale_down_delay_s
    return MaxHold().record(desired, now, window_s=delay_s) if delay_s > 0 else MaxHold()


def lowest_above_zero(config: ScalingConfig) -> int:
    """The fewest replicas above zero: ``max(1, min_scale)``."""
    return max(1, config.min_scale)


def bounds(config: ScalingConfig, want: int) -> int:
    """``[max(1, min_scale), max_scale]`` above zero."""
    return min(max(want, lowest_above_zero(config)), config.max_scale)
