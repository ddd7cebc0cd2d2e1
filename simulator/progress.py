"""The progress bar of a long ``tidal simulate`` run, on stderr.

A day of traffic through a dozen rows takes minutes; the bar says how far
it is: rows done out of all (the bar's fill), the simulated hours done
(every world's, the frontier's fleets too), and the requests simulated per
second of wall time. It appears only once a run has
taken a few seconds (:data:`SHOW_AFTER_S`), is redrawn at most twice a
second, and is erased when the run ends, so that short runs and their
output look as they always did.

Main decision: **the counts live in shared memory**, so that worker
processes (``--jobs``) add to the same bar the parent draws. A world adds
what it simulated every few simulated minutes (:func:`advance`), a cost
too small to measure; nothing is counted unless a bar was started
(:func:`start`), so library callers and tests pay nothing.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import sys
import time
from dataclasses import dataclass
from multiprocessing.synchronize import Lock
from typing import TextIO

__all__ = ["SHOW_AFTER_S", "Bar", "advance", "draw", "finish", "row_done", "start"]

#: A run shorter than this shows no bar.
SHOW_AFTER_S = 3.0
_REDRAW_S = 0.5


@dataclass(slots=True)
class Bar:
    rows: int  # rows in the whole run
    stream: TextIO
    started: float
    counts: ctypes.Array[ctypes.c_double]  # shared: simulated seconds, requests, rows done
    lock: Lock
    drawn_at: float = 0.0
    shown: bool = False


_BAR: Bar | None = None


def start(*, rows: int, stream: TextIO | None = None) -> None:
    """Count from now on, for a run of ``rows`` rows in all."""
    global _BAR
    context = multiprocessing.get_context()
    _BAR = Bar(
        rows=max(rows, 1),
        stream=stream or sys.stderr,
        started=time.monotonic(),
        counts=context.RawArray("d", 3),
        lock=context.Lock(),
    )


def advance(simulated_s: float, requests: int) -> None:
    """A world simulated this much more time and this many more requests."""
    bar = _BAR
    if bar is None:
        return
    with bar.lock:
        counts = bar.counts
        counts[0] += simulated_s
        counts[1] += requests


def row_done() -> None:
    bar = _BAR
    if bar is None:
        return
    with bar.lock:
        bar.counts[2] += 1
    draw()


def draw() -> None:
    """Redraw the bar if it is due (the parent's job)."""
    bar = _BAR
    if bar is None:
        return
    now = time.monotonic()
    if now - bar.started < SHOW_AFTER_S or now - bar.drawn_at < _REDRAW_S:
        return
    bar.drawn_at = now
    simulated, requests, rows = bar.counts[0], bar.counts[1], bar.counts[2]
    filled = int(min(1.0, rows / bar.rows) * 20)
    line = (
        f"\r[{'#' * filled}{'.' * (20 - filled)}] rows {int(rows)}/{bar.rows}, "
        f"{simulated / 3600:,.1f} simulated h, "
        f"{requests / max(now - bar.started, 1e-9):,.0f} requests/s"
    )
    bar.stream.write(line)
    bar.stream.flush()
    bar.shown = True


def finish() -> None:
    """Erase the bar (if it was drawn) and stop counting."""
    global _BAR
    bar = _BAR
    _BAR = None
    if bar is not None and bar.shown:
        bar.stream.write("\r\033[K")
        bar.stream.flush()
