"""The end of a decision: what the step that ended it hands back, made a decision and a state.

Three places end a decision (waking from or staying at zero, going to zero,
and the pipeline's last step); each says what it wants as an
:class:`Outcome`, and :func:`finish` turns that, with what every decision
records (:class:`Context`), into the :class:`~scaler.policy.api.Decision`
and the next :class:`~scaler.policy.state.PolicyState`, so that the state
is written in one place. The messages' durations are written one way,
:func:`seconds_text`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scaler.policy.api import Decision, Mode, Reason, SignalKind
from scaler.policy.state import PolicyState
from scaler.policy.windows import MaxHold

__all__ = ["Context", "Outcome", "finish", "seconds_text"]


def seconds_text(seconds: float) -> str:
    """A duration as a decision's message writes it: whole seconds, or tenths below one."""
    return f"{seconds:.0f}s" if seconds >= 1 else f"{seconds:.1f}s"


@dataclass(frozen=True, slots=True)
class Outcome:
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
class Context:
    """What every outcome's decision records, whichever step ended it."""

    per_signal: dict[SignalKind, int]
    missing: tuple[SignalKind, ...]
    now: float


def finish(state: PolicyState, outcome: Outcome, context: Context) -> tuple[Decision, PolicyState]:
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
