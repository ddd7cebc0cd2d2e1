"""A trace read afresh each time it is replayed, so that its length costs no memory.

Every row of ``tidal simulate`` replays the whole trace; a day of a
production service is millions of requests, a week tens of millions. A
:class:`StreamedTrace` holds none of them: it holds how to *open* the trace
(a file read row by row, a synthetic generator from its seed), with the
window and load factor the flags ask for applied on the way, and each
replay opens it again. Opening twice gives the same requests, in time
order. What the callers ask of a whole trace besides replaying it (how
many requests, the first, the last, whether any names a model) is counted
in one pass when it is made.

Main decision: **it is a** :class:`~collections.abc.Sequence`, so every
yardstick and row reads it as it reads a list: by iterating. Random access
is possible but walks the stream (no caller does it on a long trace). A
short trace (at most :data:`KEEP` requests, some tens of megabytes) is kept
from the first reading, so that an hour's trace is not parsed once per row.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import overload

from simulator.traces import TraceError, TraceRequest

__all__ = ["KEEP", "StreamedTrace", "scaled", "windowed"]

#: Traces up to this many requests are kept in memory after the first reading.
KEEP = 200_000


class StreamedTrace(Sequence[TraceRequest]):
    """The requests ``opener()`` yields, read again on each iteration (module docstring)."""

    def __init__(self, opener: Callable[[], Iterator[TraceRequest]]) -> None:
        self._opener = opener
        count = 0
        first: TraceRequest | None = None
        last: TraceRequest | None = None
        models: set[str] = set()
        kept: list[TraceRequest] | None = []
        for request in opener():
            if first is None:
                first = request
            last = request
            count += 1
            if len(models) < 2:
                models.add(request.model)
            if kept is not None:
                kept.append(request)
                if len(kept) > KEEP:
                    kept = None
        self._kept = kept
        self._count = count
        self._ends = (first, last)
        self.models = len(models)  # 1, or 2 for "more than one"

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[TraceRequest]:
        return iter(self._kept) if self._kept is not None else self._opener()

    @overload
    def __getitem__(self, index: int) -> TraceRequest: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[TraceRequest]: ...
    def __getitem__(self, index: int | slice) -> TraceRequest | Sequence[TraceRequest]:
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(f"request {index} of a trace of {self._count}")
        first, last = self._ends
        if index == 0 and first is not None:
            return first
        if index == self._count - 1 and last is not None:
            return last
        return next(itertools.islice(iter(self), index, None))


def windowed(
    requests: Iterable[TraceRequest], *, start_s: float, duration_s: float | None
) -> Iterator[TraceRequest]:
    """:func:`simulator.traces.window` on a stream in time order."""
    if start_s < 0:
        raise TraceError(f"window start must be >= 0 s, got {start_s}")
    if duration_s is not None and duration_s <= 0:
        raise TraceError(
            f"window duration must be > 0 s (or unset for 'to the end'), got {duration_s}"
        )
    end = None if duration_s is None else start_s + duration_s
    for r in requests:
        if end is not None and r.offset_s >= end:
            return
        if r.offset_s >= start_s:
            yield r if start_s == 0 else replace(r, offset_s=r.offset_s - start_s)


def scaled(requests: Iterable[TraceRequest], factor: float, *, seed: int) -> Iterator[TraceRequest]:
    """``tidal simulate --load-factor`` on a stream in time order (``simulator.cli.scale_load``).

    Copies fall within the second after their original, so a request is
    released once no later original can come before it; ties keep the order
    a stable sort of the whole trace would give.
    """
    if not factor > 0:
        raise TraceError(f"--load-factor must be > 0, got {factor}")
    if factor == 1:
        yield from requests
        return
    whole, part = int(factor), factor - int(factor)
    rng = random.Random(seed)
    waiting: list[tuple[float, int, TraceRequest]] = []
    order = 0
    for r in requests:
        while waiting and waiting[0][0] <= r.offset_s:
            yield heapq.heappop(waiting)[2]
        copies = whole + (1 if part > 0 and rng.random() < part else 0)
        for j in range(copies):
            order += 1
            heapq.heappush(
                waiting,
                (r.offset_s + j / copies, order, replace(r, offset_s=r.offset_s + j / copies)),
            )
    while waiting:
        yield heapq.heappop(waiting)[2]
