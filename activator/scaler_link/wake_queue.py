"""Targets to wake: a request is held and no replica of its target is ready.

The gate decides *that* a target needs waking (:meth:`Gate.acquire` holds a
request while no endpoint is ready); the reporter decides *how* (it posts
``/v1/activate`` to every scaler replica, with backoff). This queue is the
event between the two: :meth:`WakeQueue.put` is a plain, synchronous call
that does no I/O, so the gate's hot path never runs network code, and the
reporter consumes the events in its own task (:meth:`WakeQueue.get`).

A target already waiting in the queue is not queued again, so a burst of
2,000 held requests costs one event; the reporter's own de-duplication (one
activation task per target) covers events that arrive while it works.
"""

from __future__ import annotations

import asyncio

__all__ = ["WakeQueue"]


class WakeQueue:
    """Names of targets that need waking, each at most once in the queue."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()

    def put(self, target: str) -> None:
        """A request is held for ``target`` and no replica is ready (never blocks)."""
        if target in self._queued:
            return
        self._queued.add(target)
        self._queue.put_nowait(target)

    async def get(self) -> str:
        """The next target to wake; waits until there is one."""
        target = await self._queue.get()
        self._queued.discard(target)
        return target

    def __len__(self) -> int:
        return self._queue.qsize()
