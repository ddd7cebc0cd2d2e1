"""How long a target takes to wake, and so when a client refused meanwhile should retry.

A request refused while its model has no ready replica (a sheddable one
with ``shed-at-zero``, or any at ``max-buffered``) is told ``Retry-After``.
One second, the activator's default, sends it back dozens of times during a
GPU cold start of a minute; the expected time left to ready sends it back
once, when a replica is likely there.

:class:`WakeClock` measures each wake of its target as this activator sees
it: from the first moment a request needed a replica and none was ready,
to the moment one was. The expected length of the next wake is the last one
measured; before any was, :data:`FIRST_WAKE_ESTIMATE_S` (a GPU model's cold
start is tens of seconds to minutes; the scaler's own first estimate of a
cold start is the same minute). The time left is that expectation less the
time the wake has run, at least one second; a wake already past its
expectation is expected to end within one more second each time it is asked.

Main decision: measured here, not asked of the scaler: the activator sees
both ends of the wake (its own first held request, the replica turning ready
in its endpoint view), and the answer must come with the refusal, at once.
Pure: the caller passes ``now``.
"""

from __future__ import annotations

import math

__all__ = ["FIRST_WAKE_ESTIMATE_S", "WakeClock"]

FIRST_WAKE_ESTIMATE_S = 60.0


class WakeClock:
    """One target's wakes: when the current one began and how long the last one took."""

    __slots__ = ("began_at", "last_s")

    def __init__(self) -> None:
        self.began_at: float | None = None
        self.last_s: float | None = None

    def waking(self, now: float) -> None:
        """A request needs a replica and none is ready: a wake is under way from ``now``
        (a later call during the same wake changes nothing)."""
        if self.began_at is None:
            self.began_at = now

    def woke(self, now: float) -> None:
        """A replica is ready: the wake, if one was under way, ended at ``now``."""
        if self.began_at is not None:
            self.last_s = max(0.0, now - self.began_at)
            self.began_at = None

    def left_s(self, now: float) -> int:
        """Whole seconds (at least 1) until a replica is expected to be ready."""
        expected = self.last_s if self.last_s is not None else FIRST_WAKE_ESTIMATE_S
        ran = now - self.began_at if self.began_at is not None else 0.0
        return max(1, math.ceil(expected - ran))
