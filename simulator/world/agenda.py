"""Simulated time in a world: its events in the order they happen, and the instant being handled.

A discrete-event simulation: the events (request arrivals, engine steps
ending, replicas becoming ready, spot interruption notices and removals,
spot capacity changing in a zone, and a control tick every simulated
second) wait in one heap, and the world handles them one by one. Nothing
sleeps; a one-hour trace runs in seconds.

Main decision: **within one instant, events are handled by kind, then in
the order they were scheduled.** The kinds are numbered in that order: a
replica that turns ready at t serves a request that arrives at t, and a
step that ends at t frees its sequences before a request arriving at t
is admitted; the tick comes after the arrivals, steps and replica events
of its instant, so the autoscaler sees its second whole.
"""

from __future__ import annotations

import heapq

__all__ = ["ARRIVAL", "KILL", "MARKET", "NOTICE", "READY", "STEP_END", "TICK", "Agenda"]

# Event kinds, in the order they are handled within the same instant.
READY = 0
STEP_END = 1
KILL = 2
NOTICE = 3
ARRIVAL = 4
TICK = 5
MARKET = 6


class Agenda:
    """The events to come, and the time and kind of the one being handled.

    ``now`` and ``kind`` are the agenda's: every part of the world reads
    them, and only :meth:`pop` moves them.
    """

    __slots__ = ("_events", "_order", "kind", "now")

    def __init__(self) -> None:
        self._events: list[tuple[float, int, int, int, object]] = []
        self._order = 0
        self.now = 0.0
        self.kind = TICK

    def __bool__(self) -> bool:
        return bool(self._events)

    def push(self, at_s: float, kind: int, key: int, payload: object = None) -> None:
        """Schedule an event of ``kind`` at ``at_s``: ``key`` and ``payload`` are its handler's."""
        self._order += 1
        heapq.heappush(self._events, (at_s, kind, self._order, key, payload))

    def pop(self) -> tuple[float, int, int, object]:
        """The next event, ``(at_s, kind, key, payload)``; time moves to it (never back)."""
        at_s, kind, _, key, payload = heapq.heappop(self._events)
        self.kind = kind
        if at_s > self.now:
            self.now = at_s
        return at_s, kind, key, payload
