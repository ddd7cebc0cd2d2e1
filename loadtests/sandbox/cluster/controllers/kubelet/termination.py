"""A pod's deletion as its worker sees it: whether it was asked for, and the grace period.

On deletion (``deletionTimestamp``) the kubelet sends SIGTERM, waits the
pod's grace period (``deletionGracePeriodSeconds``) and SIGKILLs the group.
A delete repeated with a shorter grace shortens the wait already under way;
a longer one changes nothing, as in the real kubelet.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["Termination"]


class Termination:
    """Asked for once, its grace period only ever shrinking."""

    def __init__(self, grace_s: float = 30.0) -> None:
        self._asked = asyncio.Event()
        self._grace_changed = asyncio.Event()
        self._grace_s = grace_s

    @property
    def requested(self) -> bool:
        return self._asked.is_set()

    @property
    def grace_s(self) -> float:
        return self._grace_s

    def request(self, grace_s: float) -> None:
        if not self._asked.is_set() or grace_s < self._grace_s:
            self._grace_s = grace_s
            self._grace_changed.set()
        self._asked.set()

    async def wait(self) -> None:
        await self._asked.wait()

    async def wait_at_most(self, timeout_s: float) -> bool:
        """Wait for a request, ``timeout_s`` at most; whether one came."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._asked.wait(), timeout_s)
        return self._asked.is_set()

    async def grace_over(self, exited: asyncio.Future[int]) -> None:
        """Return once ``exited`` is done or the grace period (which may shrink meanwhile)
        has passed since the call."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        while not exited.done():
            self._grace_changed.clear()
            remaining = self._grace_s - (loop.time() - start)
            if remaining <= 0:
                return
            changed = asyncio.create_task(self._grace_changed.wait())
            waiters: set[asyncio.Future[Any]] = {exited, changed}
            try:
                await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
