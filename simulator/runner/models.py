"""A trace of several models: split by model, and each model's runs merged into one.

A trace whose requests name models (a pool of many small deployments) runs
each model in its own world with its own autoscaler; the runs are merged
into one scorecard per policy (GPU-seconds add up; the timeline sums
replicas and load per second). A trace of one model is not copied: a
stream stays a stream.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

from simulator.trace_stream import StreamedTrace
from simulator.traces import TraceRequest
from simulator.world import RunResult, Second

__all__ = ["by_model", "merge_runs"]


def by_model(requests: Sequence[TraceRequest]) -> list[Sequence[TraceRequest]]:
    """The trace split by model; one model's trace is itself (a stream stays a stream)."""
    if isinstance(requests, StreamedTrace):
        if requests.models == 1:
            return [requests]
    elif len({r.model for r in requests}) == 1:
        return [requests]
    groups: dict[str, list[TraceRequest]] = {}
    for r in requests:
        groups.setdefault(r.model, []).append(r)
    return list(groups.values())


def merge_runs(name: str, results: Sequence[RunResult]) -> RunResult:
    if len(results) == 1:
        return replace(results[0], name=name)
    length = max(len(r.timeline) for r in results)
    timeline = []
    for index in range(length):
        seconds = [r.timeline[index] for r in results if index < len(r.timeline)]
        timeline.append(
            Second(
                at_s=float(index),
                arrivals=sum(s.arrivals for s in seconds),
                concurrency=sum(s.concurrency for s in seconds),
                ready=sum(s.ready for s in seconds),
                spec=sum(s.spec for s in seconds),
            )
        )
    return RunResult(
        name=name,
        arrival_s=tuple(itertools.chain.from_iterable(r.arrival_s for r in results)),
        first_token_s=tuple(itertools.chain.from_iterable(r.first_token_s for r in results)),
        finished_s=tuple(itertools.chain.from_iterable(r.finished_s for r in results)),
        output_tokens=tuple(itertools.chain.from_iterable(r.output_tokens for r in results)),
        failed_reason=tuple(itertools.chain.from_iterable(r.failed_reason for r in results)),
        cold_start_wait_s=tuple(
            itertools.chain.from_iterable(r.cold_start_wait_s for r in results)
        ),
        cold_starts=sum(r.cold_starts for r in results),
        replicas=tuple(itertools.chain.from_iterable(r.replicas for r in results)),
        timeline=tuple(timeline),
        end_s=max(r.end_s for r in results),
        preemptions=sum(r.preemptions for r in results),
        priority=tuple(itertools.chain.from_iterable(r.priority for r in results)),
        tenant=tuple(itertools.chain.from_iterable(r.tenant for r in results)),
    )
