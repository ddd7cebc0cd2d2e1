"""The order in which held requests get capacity: one FIFO for the Gate and the simulator.

The activator's :class:`~activator.holding.gate.Gate` holds requests for a
target while no replica has room, and the policy simulator
(:mod:`scaler.sim.world`) must hold them exactly as the Gate does, or its
scorecard would measure a different product. Both hold with this queue, so
the rules live once:

1. **Those held go first**: a new request takes capacity at once only when
   the queue is empty (``not queue``); otherwise it joins the back.
2. **Capacity goes out in arrival order** (:meth:`HoldQueue.hand_out`): the
   head gets the first free slot, and a burst of 2,000 held requests is
   released in order without waking every one of them for every slot.
3. **A request that left is skipped**: a held request whose caller went away
   or whose deadline passed is not searched for and removed; it is dropped
   when it reaches the head (``alive`` says which are still waiting), and
   :meth:`HoldQueue.compact` drops them all when they pile up.
4. **Deadlines in arrival order** (:meth:`HoldQueue.expire`): when every
   request is held for the same time, those past it are at the head.

What is held (an asyncio future in the Gate, a request index in the
simulator), how capacity is found (``take``) and how many may be held are
the caller's. Main decision: no clock, no futures and no event loop here;
times are passed in, so the simulator runs the same code in simulated time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["HoldQueue"]

T = TypeVar("T")
R = TypeVar("R")


class HoldQueue(Generic[T]):
    """Held requests in arrival order, each with the time it was held since."""

    __slots__ = ("_alive", "_entries")

    def __init__(self, alive: Callable[[T], bool] | None = None) -> None:
        # None: every entry waits until handed out or expired (nothing leaves early).
        self._alive = alive
        self._entries: deque[tuple[T, float]] = deque()

    def __len__(self) -> int:
        """Entries, including those that left and have not been dropped yet."""
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def hold(self, item: T, since: float) -> None:
        """Hold ``item`` at the back, held since ``since``."""
        self._entries.append((item, since))

    def hand_out(self, take: Callable[[T], R | None]) -> Iterator[tuple[T, float, R]]:
        """Give capacity to the held in arrival order: ``(item, held since, capacity)``
        for as long as ``take(head)`` finds some for the head.

        ``take`` gets the head because where a request may go can depend on
        the request (prefix-aware routing prefers the replica that holds its
        prompt's prefix). It is called again only after the caller has used
        the previous capacity (the loop body runs in between), so it sees that
        capacity counted."""
        entries, alive = self._entries, self._alive
        while entries:
            item, since = entries[0]
            if alive is not None and not alive(item):
                entries.popleft()
                continue
            got = take(item)
            if got is None:
                return
            entries.popleft()
            yield item, since, got

    def expire(self, held_for_s: float, now: float) -> list[T]:
        """Remove and return, from the head, those held for ``held_for_s`` or more at
        ``now`` (the requests still waiting; those that left are dropped)."""
        entries, alive = self._entries, self._alive
        out: list[T] = []
        while entries and entries[0][1] + held_for_s <= now:
            item, _ = entries.popleft()
            if alive is None or alive(item):
                out.append(item)
        return out

    def drain(self) -> list[T]:
        """Remove and return every request still waiting (its target went away, or a
        wake was refused)."""
        alive = self._alive
        out = [item for item, _ in self._entries if alive is None or alive(item)]
        self._entries.clear()
        return out

    def compact(self) -> None:
        """Drop every entry that left, wherever it is in the queue."""
        alive = self._alive
        if alive is not None:
            self._entries = deque(e for e in self._entries if alive(e[0]))
