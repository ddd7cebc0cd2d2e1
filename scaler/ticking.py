"""When the controller decides: the tick source and the timer for early rechecks.

The controller decides at every tick (default 2 s) from a :class:`Ticker`, and
schedules a decision of its own through a :data:`CallLater` when a decision
asks to be rechecked before the next tick. Both are seams: the service uses
:class:`IntervalTicker` and ``loop.call_later``; tests push ticks and fire
timers themselves, so no test waits for real time.

Main decisions: a slow tick does not cause a burst of catch-up ticks; the next
one is due one interval after the later of its schedule and now. A poke
(winning the Lease, an interruption notice) is a tick now, through the same
loop, so two ticks never run at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Protocol

__all__ = ["CallLater", "IntervalTicker", "RecheckTimers", "Ticker", "Timer"]

log = logging.getLogger(__name__)


class Timer(Protocol):
    """A scheduled callback that can be called off (``asyncio.TimerHandle``)."""

    def cancel(self) -> None: ...


#: Schedules ``callback`` after ``delay_s`` seconds (``loop.call_later``; tests step one).
CallLater = Callable[[float, Callable[[], None]], Timer]


class Ticker(Protocol):
    """Yields the time of each tick; tests push ticks themselves."""

    def __aiter__(self) -> AsyncIterator[float]: ...


class IntervalTicker:
    """A tick every ``interval_s`` on the event loop's monotonic clock, and one at
    once when poked (:meth:`poke`)."""

    def __init__(self, interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError(f"tick interval must be > 0 seconds, got {interval_s}")
        self._interval_s = interval_s
        self._poked = asyncio.Event()

    def poke(self) -> None:
        """Tick now, not at the next interval (this replica just won the Lease, or a
        node got an interruption notice); the interval starts again from that tick.
        A poke during a tick brings another tick right after it."""
        self._poked.set()

    async def __aiter__(self) -> AsyncIterator[float]:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            self._poked.clear()
            yield loop.time()
            next_at += self._interval_s
            next_at = max(next_at, loop.time())
            try:
                async with asyncio.timeout(next_at - loop.time()):
                    await self._poked.wait()
            except TimeoutError:
                continue
            next_at = loop.time()


class RecheckTimers:
    """At most one early-decision timer per target; an earlier one replaces a later.

    ``fire(key)`` runs when a timer is due; :meth:`cancel_all` calls every timer off
    (the controller stopped).
    """

    def __init__(self, fire: Callable[[str], None], call_later: CallLater | None = None) -> None:
        self._fire = fire
        self._call_later = call_later
        self._timers: dict[str, tuple[float, Timer]] = {}

    def at(self, key: str, due: float, *, now: float) -> None:
        """Fire for ``key`` at ``due`` unless a timer at or before it is already set."""
        scheduled = self._timers.get(key)
        if scheduled is not None:
            if scheduled[0] <= due:
                return
            scheduled[1].cancel()
        call_later = self._call_later or asyncio.get_running_loop().call_later
        handle = call_later(max(0.0, due - now), lambda: self._due(key))
        self._timers[key] = (due, handle)

    def _due(self, key: str) -> None:
        self._timers.pop(key, None)
        self._fire(key)

    def cancel_all(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
