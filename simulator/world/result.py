"""What a world's run leaves: each request's fate, each replica's life, each second.

:class:`RunResult` is everything the scorecard (:mod:`simulator.scorecard`)
reads of one run: per request its arrival, first token, end and failure
(packed columns, :mod:`simulator.columns`, so a trace of millions keeps
flat memory), the held requests' cold-start waits, each replica's life
(:class:`ReplicaLife`) and the timeline (:class:`Second`).

Main decision: **GPU-seconds run from a replica's creation to its removal**
(the cold start holds the GPU too); *busy* seconds are the engine's step
time, *idle* the rest, and the seconds before its cold start ended count as
*starting*.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ReplicaLife", "RunResult", "Second"]


@dataclass(frozen=True, slots=True)
class ReplicaLife:
    """One replica's life: capacity and shape, when it was created, ready and
    ended, its busy seconds, and the prompt tokens its prefix cache saw."""

    capacity: str
    created_s: float
    ended_s: float
    busy_s: float
    cached_tokens: int = 0  # prompt tokens its prefix cache served
    queried_tokens: int = 0  # prompt tokens of the requests it took (vLLM's cache queries)
    shape: str = ""  # its GPU shape ("": the world has none)
    # When its cold start ended (None: not known, all of its life counts as
    # serving); until then its device-seconds are *starting* on the scorecard.
    ready_s: float | None = None


@dataclass(frozen=True, slots=True)
class Second:
    """The timeline, one entry per simulated second (for charts and checks)."""

    at_s: float
    arrivals: int
    concurrency: float
    ready: int
    spec: int


@dataclass(frozen=True, slots=True)
class RunResult:
    """Everything the scorecard needs from one run.

    The per-request sequences are tuples or, from :func:`run_world`, packed
    columns that read the same (:mod:`simulator.columns`).
    """

    name: str
    arrival_s: Sequence[float]
    first_token_s: Sequence[float | None]  # None: failed
    finished_s: Sequence[float | None]
    output_tokens: Sequence[int]
    failed_reason: Sequence[str | None]
    cold_start_wait_s: tuple[float, ...]  # per request held because nothing was ready
    cold_starts: int  # transitions from zero ready replicas to one or more
    replicas: tuple[ReplicaLife, ...]
    timeline: tuple[Second, ...]
    end_s: float
    preemptions: int
    # Each request's priority class and tenant, as the trace gave them (empty:
    # the trace has none, every request standard and of one tenant).
    priority: Sequence[int] = ()
    tenant: Sequence[str] = ()
