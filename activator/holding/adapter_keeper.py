"""Every few seconds, learn what each replica has loaded and unload idle LoRA adapters.

One task per activator walks the targets that declare adapters and calls
:meth:`activator.holding.adapters.AdapterSlots.refresh` with each one's ready
replicas (what it does is said there). Targets without adapters are skipped
at the cost of one attribute read each.

Main decision: one replica at a time, one target after another, every
``interval_s``: the calls are a few small GETs per replica, and a slow
replica delays only this task, never a request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from activator.holding.target import Target

__all__ = ["AdapterKeeper"]

log = logging.getLogger(__name__)


class AdapterKeeper:
    def __init__(self, targets: Callable[[], Iterable[Target]], *, interval_s: float) -> None:
        if not interval_s > 0:
            raise ValueError(f"the adapter refresh interval must be > 0 s; got {interval_s}")
        self._targets = targets
        self.interval_s = interval_s

    async def once(self) -> None:
        for target in list(self._targets()):
            slots = target.adapters
            if slots is None:
                continue
            endpoints = target.gate.endpoints
            # What it learns goes to the gate (slots.on_change): held requests are looked
            # at again, answered at once if no replica there can serve them.
            for replica, name in await slots.refresh(endpoints.ready, endpoints.trackers.keys()):
                log.info("unloaded idle LoRA adapter %r from %s (%s)", name, replica, target.name)

    async def run(self) -> None:
        while True:
            await self.once()
            await asyncio.sleep(self.interval_s)
