"""Step 3 of the decision: panic mode, as Knative's.

Enter when panic-desired / max(ready, 1) reaches the threshold; every
crossing extends it; leave once a whole stable window has passed since the
last crossing. In panic the desired scale is the largest seen since panic
began, and never below the current scale: panic never scales down, even
while most of the current scale is still starting.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.policy.api import Mode, ScalingConfig
from scaler.policy.state import PolicyState
from scaler.policy.steps.per_signal import Estimates
from scaler.policy.steps.rates import Rates, limit

__all__ = ["Panic", "panic_mode"]


@dataclass(frozen=True, slots=True)
class Panic:
    crossed_s: float | None  # last crossing of the threshold; None: stable mode
    desired: int  # the highest desired since panic began (0 in stable mode)
    want: int  # what stable and panic together want now

    @property
    def mode(self) -> Mode:
        return Mode.STABLE if self.crossed_s is None else Mode.PANIC


def panic_mode(
    config: ScalingConfig,
    state: PolicyState,
    est: Estimates,
    rates: Rates,
    *,
    current: int,
    ready: int,
    now: float,
) -> Panic:
    """Enter when panic-desired / max(ready, 1) reaches the threshold; every crossing
    extends it; leave a whole stable window after the last. In panic the desired
    scale is the largest since panic began, and at least the current scale."""
    crossed_s, top = state.panic_crossed_s, state.panic_desired
    if est.panic / max(ready, 1) >= config.panic_threshold_percentage / 100.0:
        crossed_s = now
    elif crossed_s is not None and now - crossed_s > config.window_s:
        crossed_s, top = None, 0
    want = limit(est.stable, rates)
    if crossed_s is not None:
        # Panic never scales down (docs/architecture.md): at least the current scale, even
        # when most of it is still starting and the estimate is lower.
        want = max(want, limit(est.panic, rates), top, current)
        top = want
    return Panic(crossed_s=crossed_s, desired=top, want=want)
