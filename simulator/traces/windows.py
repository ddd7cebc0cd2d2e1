"""What part of a trace is replayed, and how fast: a window, then compression.

A window is re-based to start at 0 at its start, not at its first request,
so a replay of "minutes 10 to 15" starts sending at once and an idle
stretch at the window's start is replayed too. Compression divides offsets
only; token counts stay as recorded, because a compressed trace is meant to
stress the same engine with the same requests, sooner.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import replace

from simulator.traces.records import TraceError, TraceRequest

__all__ = ["compress", "prepare", "window"]


def window(
    records: Sequence[TraceRequest], *, start_s: float = 0.0, duration_s: float | None = None
) -> list[TraceRequest]:
    """The requests with ``start_s <= offset < start_s + duration_s``, re-based to start at 0.

    Offsets are kept relative to ``start_s`` (not to the first request in the
    window), so an idle stretch at the start of the window is replayed too.
    """
    if start_s < 0:
        raise TraceError(f"window start must be >= 0 s, got {start_s}")
    if duration_s is not None and duration_s <= 0:
        raise TraceError(
            f"window duration must be > 0 s (or unset for 'to the end'), got {duration_s}"
        )
    offsets = [r.offset_s for r in records]
    lo = bisect.bisect_left(offsets, start_s)
    hi = len(records) if duration_s is None else bisect.bisect_left(offsets, start_s + duration_s)
    return [replace(r, offset_s=r.offset_s - start_s) for r in records[lo:hi]]


def compress(records: Sequence[TraceRequest], factor: float) -> list[TraceRequest]:
    """Divide every offset by ``factor`` (> 0): 10 plays ten trace seconds per second."""
    if not factor > 0:
        raise TraceError(f"time compression factor must be > 0, got {factor}")
    return [replace(r, offset_s=r.offset_s / factor) for r in records]


def prepare(
    records: Sequence[TraceRequest],
    *,
    start_s: float = 0.0,
    duration_s: float | None = None,
    compression: float = 1.0,
) -> list[TraceRequest]:
    """Window (in trace seconds), then compress: what a replay sends."""
    return compress(window(records, start_s=start_s, duration_s=duration_s), compression)
