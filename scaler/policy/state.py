"""What one target's policy remembers between decisions: :class:`PolicyState`.

:func:`scaler.policy.decide.decide` takes it in and hands the next one back,
so a test steps a simulated clock through a scenario with no setup. Its own
module because the decision's steps (:mod:`scaler.policy.steps`) read it as
much as ``decide`` does; the SLO decision's part of it
(:class:`~scaler.policy.slo.state.SloState`) is kept apart for the same
reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scaler.policy.api import Mode, Reason
from scaler.policy.idle.adaptive import AdaptiveGrace
from scaler.policy.wake_backlog import WakeBacklog
from scaler.policy.windows import MaxHold

if TYPE_CHECKING:
    from scaler.policy.slo.state import SloState

__all__ = ["PolicyState"]


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
