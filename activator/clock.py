"""The activator's one clock: the running event loop's.

Every duration the activator acts on (hold deadlines, the gates' concurrency
integral, report periods, backoffs, probe rechecks, DNS refreshes) is read
from ``loop.time()``, the same clock ``asyncio.timeout`` and
``asyncio.sleep`` use. A deadline and the timer that enforces it then never
disagree, and a test that fakes the loop's time (looptime, or a clock passed
in) moves all of them together.

Components take a ``Clock`` argument defaulting to :func:`loop_time`, which
reads the loop only when called, so they can be built before a loop runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["Clock", "loop_time"]

Clock = Callable[[], float]


def loop_time() -> float:
    """Seconds on the running event loop's monotonic clock."""
    return asyncio.get_running_loop().time()
