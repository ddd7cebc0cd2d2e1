"""The Events the actuator raises about its own writes: a scale that changed, writes that fail.

A change of scale is announced once it took: an Event on the Deployment
(its reason from :func:`~scaler.policy.events.change_reason`, its message
from :func:`~scaler.policy.events.change_message`), an INFO log line with
the target, from -> to, the reason, the mode and each signal's stable and
panic values, and the ``scaled`` counter. A streak of failed writes gets
one ``WritesFailing`` Warning (:mod:`scaler.writes.failures` says when).

Main decision: both are best effort and fenced like every write. A lost
Event does not undo a scale, and a replica that lost the Lease raises none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from groundwork.kube.errors import KubeError
from scaler.kube.types import DeploymentInfo, EventSink
from scaler.metrics import Metrics
from scaler.policy.api import Decision
from scaler.policy.events import WRITES_FAILING, change_message, change_reason
from scaler.writes.plan import WritePlan

__all__ = ["Announcements", "Fence", "LeaseLost"]

# The actuator's log: these lines are its own, as they were before they moved here.
log = logging.getLogger("scaler.actuator")

# Checks that this replica still holds the Lease, right before a write.
Fence = Callable[[], None]


class LeaseLost(Exception):
    """This replica no longer holds the Lease: no more writes."""


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.3g}"


class Announcements:
    """The change Events and the failure Warnings, through the scaler's Event sink."""

    def __init__(self, events: EventSink, metrics: Metrics) -> None:
        self._events = events
        self._metrics = metrics

    async def changed(
        self, plan: WritePlan, decision: Decision, before: int, *, fence: Fence
    ) -> None:
        """``plan``'s Deployment was scaled from ``before`` to ``decision.desired``."""
        d = plan.deployment
        reason = change_reason(decision, before).value
        self._metrics.scaled(d.key, direction="up" if decision.desired > before else "down")
        signals = ", ".join(
            f"{kind.value} stable={_fmt(r.stable)} panic={_fmt(r.panic)}"
            + ("" if r.fresh else " (stale)")
            for kind, r in plan.decided.readings.items()
        )
        log.info(
            "%s: scaled %d -> %d, reason %s, mode %s; signals: %s; %s",
            d.key,
            before,
            decision.desired,
            reason,
            decision.mode.value,
            signals or "none",
            decision.message or "-",
        )
        try:
            fence()
            await self._events.emit(d, reason=reason, message=change_message(decision, before))
        except KubeError as exc:  # the scale changed; a lost Event must not undo that
            log.warning("%s: could not record event %s: %s", d.key, reason, exc)

    async def writes_failing(
        self, d: DeploymentInfo, failures: int, exc: KubeError, *, fence: Fence
    ) -> None:
        """``failures`` writes in a row failed for ``d``, the last with ``exc``."""
        message = (
            f"{failures} writes in a row failed; the last: {exc}. "
            "Retrying with backoff; the scale is left as it is meanwhile"
        )
        try:
            fence()
            await self._events.emit(d, reason=WRITES_FAILING, message=message, warning=True)
        except (KubeError, LeaseLost) as warn_exc:
            log.warning("%s: could not record event %s: %s", d.key, WRITES_FAILING, warn_exc)
