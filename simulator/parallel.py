"""Rows of a simulation side by side in processes (``tidal simulate --jobs N``).

Each row of a scorecard (and the frontier) is a run of its own over the
same trace, so rows can run at once on separate cores. :func:`run_tasks`
hands a list of task names to ``jobs`` worker processes and returns their
answers in the order the tasks were given, which is what makes ``--jobs``
change the time a run takes and nothing else.

Main decision: **workers are forked**, so they start with the trace and the
options already in memory (a day of traffic is millions of requests:
pickling it to every worker would cost more than some rows). Only the
task's name goes out and its answer (a scorecard and its run) comes back.
Where ``fork`` is not available (not on Linux or macOS), or with one job or
one task, the tasks run here, one after another. The parent draws the
progress bar (:mod:`simulator.progress`) while it waits.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import TypeVar, cast

from simulator import progress

__all__ = ["run_tasks"]

T = TypeVar("T")

# The job the forked workers run; set in the parent just before they fork.
_JOB: Callable[[str], object] | None = None


def _run(task: str) -> object:
    assert _JOB is not None  # set before the pool forked this worker
    return _JOB(task)


def run_tasks(job: Callable[[str], T], tasks: Sequence[str], jobs: int) -> list[T]:
    """``job(task)`` for every task, in ``jobs`` processes; answers in task order."""
    global _JOB
    if jobs <= 1 or len(tasks) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        out = []
        for task in tasks:
            out.append(job(task))
            progress.row_done()
        return out
    _JOB = job
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context) as pool:
            futures: list[Future[object]] = [pool.submit(_run, task) for task in tasks]
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for _ in finished:
                    progress.row_done()
                progress.draw()
            return [cast(T, f.result()) for f in futures]
    finally:
        _JOB = None
