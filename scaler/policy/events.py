"""What the scaler says about a change: the Event reason and message (DESIGN §4).

Every change of a target's scale is recorded as a Kubernetes Event on its
Deployment whose reason is one of ``Activated``, ``ScaledUp``,
``ScaledDown``, ``ScaledToZero``; a rejected configuration as an
``InvalidAnnotation`` Warning.

Main decision: the reason names what actually happened, not what the policy
hoped for. A decision whose own reason is a change (``ScaledUp``...) keeps
it; any other (``Steady``, ``NoData``, ``Holding``) that still moved the
scale, because the scale was changed under us, is named by the direction of
the move, and a move to zero is always ``ScaledToZero``.
"""

from __future__ import annotations

from scaler.policy.api import Decision, Reason

__all__ = ["CHANGE_REASONS", "INVALID_ANNOTATION", "change_message", "change_reason"]

CHANGE_REASONS = frozenset(
    {Reason.ACTIVATED, Reason.SCALED_UP, Reason.SCALED_DOWN, Reason.SCALED_TO_ZERO}
)
INVALID_ANNOTATION = "InvalidAnnotation"


def change_reason(decision: Decision, before: int) -> Reason:
    """The Event reason for moving from ``before`` replicas to ``decision.desired``."""
    if decision.reason in CHANGE_REASONS:
        return decision.reason
    if decision.desired == 0:
        return Reason.SCALED_TO_ZERO
    return Reason.SCALED_UP if decision.desired > before else Reason.SCALED_DOWN


def change_message(decision: Decision, before: int) -> str:
    """The Event message: from -> to, then the policy's own explanation."""
    message = f"scaled from {before} to {decision.desired}"
    if decision.message:
        message += f": {decision.message}"
    return message
