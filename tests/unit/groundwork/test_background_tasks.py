"""The one set of background tasks (groundwork.background_tasks).

Covers: a task is kept while it runs and forgotten when it ends; a failure
is logged with the starter's words, a cancellation is not; ``cancel`` hands
back the tasks it cancelled; ``stop`` cancels and waits, and the set then
starts nothing (the coroutine is closed unstarted), as a set that was never
running does not.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from groundwork.background_tasks import BackgroundTasks

pytestmark = pytest.mark.looptime


async def test_a_task_is_kept_while_it_runs() -> None:
    tasks = BackgroundTasks()
    release = asyncio.Event()
    task = tasks.spawn(release.wait(), name="waits")
    assert task is not None and task.get_name() == "waits"
    assert len(tasks) == 1
    release.set()
    await task
    await asyncio.sleep(0)  # the done callbacks run
    assert len(tasks) == 0


async def test_a_failure_is_logged_a_cancellation_is_not(caplog: pytest.LogCaptureFixture) -> None:
    tasks = BackgroundTasks()

    async def fail() -> None:
        raise RuntimeError("boom")

    failing = tasks.spawn(fail(), name="fails", failure="ml/llama: recheck failed")
    waiting = tasks.spawn(asyncio.Event().wait(), name="waits")
    assert failing is not None and waiting is not None
    with caplog.at_level(logging.ERROR, logger="groundwork.background_tasks"):
        await asyncio.gather(failing, return_exceptions=True)
        assert tasks.cancel() == [waiting]
        await asyncio.gather(waiting, return_exceptions=True)
        await asyncio.sleep(0)
    (record,) = caplog.records
    assert record.getMessage() == "ml/llama: recheck failed"
    assert record.exc_info is not None and "boom" in str(record.exc_info[1])


async def test_a_stopped_set_starts_nothing() -> None:
    tasks = BackgroundTasks()
    task = tasks.spawn(asyncio.sleep(3600), name="long")
    await tasks.stop()
    assert task is not None and task.cancelled()
    started = []

    async def mark() -> None:
        started.append(1)

    later = mark()
    assert tasks.spawn(later, name="late") is None
    assert later.cr_frame is None  # closed, never run: no "never awaited" warning
    assert BackgroundTasks(running=False).spawn(mark(), name="never") is None
    await asyncio.sleep(0)
    assert started == [] and len(tasks) == 0
