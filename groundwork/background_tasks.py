"""Tasks started and not awaited by their starter, kept until they end and stopped together.

asyncio keeps only a weak reference to a running task: a task nobody holds
may be collected before it ends, and one nobody awaits hides its failure
until the loop closes. Each part that starts work it does not wait for (an
Event written in the background, a wake that outlives the request that
asked for it, a decision outside the tick) holds its tasks in one
:class:`BackgroundTasks`, which forgets a task when it ends and, when its
owner stops, cancels what still runs and waits for it.

Main decision: a failure is logged where the task ran, with the name its
starter gave it, never raised into whoever happens to stop the set; a
cancelled task is not a failure. A set that is not :attr:`running` starts
nothing (its owner is stopping, or never started: a controller stepped tick
by tick in a test leaves no task behind).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["BackgroundTasks"]

log = logging.getLogger(__name__)


class BackgroundTasks:
    """The tasks one owner started and did not await."""

    def __init__(self, *, running: bool = True) -> None:
        self.running = running
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str, failure: str = ""
    ) -> asyncio.Task[Any] | None:
        """Run ``coro`` as a task named ``name``, kept until it ends; ``None`` (and
        ``coro`` closed unstarted) when the set is not running. A failure is logged
        with ``failure``, or the task's name."""
        if not self.running:
            coro.close()
            return None
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        task.add_done_callback(lambda t: _log_failure(t, failure or f"task {name} failed"))
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)

    def cancel(self) -> list[asyncio.Task[Any]]:
        """Cancel every task still running; the tasks, for the caller to wait on."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        return tasks

    async def stop(self) -> None:
        """Start nothing more; cancel what runs and wait for it to end."""
        self.running = False
        await asyncio.gather(*self.cancel(), return_exceptions=True)


def _log_failure(task: asyncio.Task[Any], message: str) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        log.error("%s", message, exc_info=error)
