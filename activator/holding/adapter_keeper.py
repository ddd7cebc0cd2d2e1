"""Every few seconds, learn what each replica has loaded and unload idle LoRA adapters.

One task per activator asks the registry to have each target with adapters
refresh them (:meth:`activator.holding.adapters.AdapterSlots.refresh` says
what that does); targets without adapters are skipped at no cost. What a
target learns reaches its held requests through the target itself: one
that no replica can serve is answered, one that can go goes.

Main decision: one replica at a time, one target after another, every
``interval_s``: the calls are a few small GETs per replica, and a slow
replica delays only this task, never a request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

__all__ = ["AdapterKeeper"]

log = logging.getLogger(__name__)


class AdapterKeeper:
    def __init__(
        self, refresh: Callable[[], Awaitable[list[tuple[str, str, str]]]], *, interval_s: float
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"the adapter refresh interval must be > 0 s; got {interval_s}")
        self._refresh = refresh
        self.interval_s = interval_s

    async def once(self) -> None:
        for target, replica, name in await self._refresh():
            log.info("unloaded idle LoRA adapter %r from %s (%s)", name, replica, target)

    async def run(self) -> None:
        while True:
            await self.once()
            await asyncio.sleep(self.interval_s)
