"""The run bucket by bucket: the rows of the merged CSV, from the request log or locust's history.

Main decision (the package's): with a request log every rate and percentile
is exact, and each latency counts in the bucket where its request *began*,
so a request held through a cold start shows up when the load arrived, not
minutes later when it was answered. Without one, rates come from the change
of locust's running totals and percentiles from its sliding window, which
misses the first requests of a run. Users, desired and ready are the last
values seen by the end of each bucket.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from loadtests.report.inputs import (
    AGGREGATED,
    SYNTHETIC_TYPES,
    HistoryRow,
    ReplicaSample,
    ReportError,
    RequestRecord,
)

__all__ = ["MergedRow", "auto_bucket_s", "merge", "percentile", "seconds", "write_csv"]


@dataclass(frozen=True, slots=True)
class MergedRow:
    """One bucket of the run. ``None`` where no source has anything for it."""

    time_s: float
    timestamp: float
    users: int | None
    sent_per_s: float | None
    requests_per_s: float | None
    failures_per_s: float | None
    total_requests: int | None
    total_failures: int | None
    e2e_p50_s: float | None
    e2e_p95_s: float | None
    e2e_p99_s: float | None
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    tpot_p99_s: float | None
    desired: int | None
    ready: int | None


def _is_request(row: HistoryRow) -> bool:
    return row.name != AGGREGATED and row.type not in SYNTHETIC_TYPES and row.type != ""


def _busiest(rows: list[HistoryRow]) -> HistoryRow | None:
    return max(rows, key=lambda r: r.total_requests, default=None)


def seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile (``fraction`` in 0..1) of unsorted ``values``; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass
class _Bucket:
    users: int | None = None
    history_requests: int | None = None
    history_failures: int | None = None
    history_e2e: HistoryRow | None = None
    history_ttft: HistoryRow | None = None
    history_tpot: HistoryRow | None = None
    sent: int = 0
    completed: int = 0
    failed: int = 0
    e2e: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)


class _Timeline:
    """The run's buckets, ``bucket_s`` wide from ``first``, each filled from every source."""

    def __init__(self, first: float, count: int, bucket_s: float) -> None:
        self.first = first
        self.bucket_s = bucket_s
        self.buckets = [_Bucket() for _ in range(count)]

    def at(self, t: float) -> _Bucket:
        """The bucket of moment ``t`` (clamped to the run)."""
        index = int((t - self.first) // self.bucket_s)
        return self.buckets[min(len(self.buckets) - 1, max(0, index))]

    def add_history(self, history: Sequence[HistoryRow]) -> None:
        """Locust's users, running totals and window percentiles, by the second they were taken."""
        by_second: dict[int, list[HistoryRow]] = {}
        for row in history:
            by_second.setdefault(row.timestamp, []).append(row)
        for second in sorted(by_second):
            rows = by_second[second]
            bucket = self.at(second)
            aggregated = next((r for r in rows if r.name == AGGREGATED), rows[0])
            bucket.users = aggregated.users
            request_rows = [r for r in rows if _is_request(r)]
            bucket.history_requests = sum(r.total_requests for r in request_rows)
            bucket.history_failures = sum(r.total_failures for r in request_rows)
            e2e = _busiest(request_rows)
            if e2e is not None:
                bucket.history_e2e = e2e
                # TTFT/TPOT carry the name of the streamed request they belong to.
                bucket.history_ttft = next(
                    (r for r in rows if r.type == "TTFT" and r.name == e2e.name), None
                )
                bucket.history_tpot = next(
                    (r for r in rows if r.type == "TPOT" and r.name == e2e.name), None
                )

    def add_requests(self, requests: Sequence[RequestRecord]) -> None:
        """Each logged request: sent and its latency where it began, done where it ended."""
        for record in requests:
            if record.type == "TTFT":
                self.at(record.origin_s).ttft.append(record.response_time_s)
            elif record.type == "TPOT":
                self.at(record.origin_s).tpot.append(record.response_time_s)
            else:
                self.at(record.origin_s).sent += 1
                done = self.at(record.origin_s + record.response_time_s)
                done.completed += 1
                if record.ok:
                    self.at(record.origin_s).e2e.append(record.response_time_s)
                else:
                    done.failed += 1

    def rows(self, replicas: Sequence[ReplicaSample], *, logged: bool) -> list[MergedRow]:
        """One row per bucket; ``logged``: the rates and percentiles come from the request log."""
        merged: list[MergedRow] = []
        sample_index = -1
        previous: tuple[float, int, int] | None = None  # history (time, requests, failures)
        total_requests = total_failures = 0
        for index, bucket in enumerate(self.buckets):
            start = self.first + index * self.bucket_s
            end = start + self.bucket_s
            while sample_index + 1 < len(replicas) and replicas[sample_index + 1].timestamp < end:
                sample_index += 1
            sample = replicas[sample_index] if sample_index >= 0 else None
            if logged:
                total_requests += bucket.completed
                total_failures += bucket.failed
                row_values = _from_log(bucket, self.bucket_s, total_requests, total_failures)
            else:
                row_values = _from_history(bucket, start, previous)
                if bucket.history_requests is not None and bucket.history_failures is not None:
                    previous = (start, bucket.history_requests, bucket.history_failures)
            merged.append(
                MergedRow(
                    time_s=start - self.first,
                    timestamp=start,
                    users=bucket.users,
                    desired=sample.desired if sample else None,
                    ready=sample.ready if sample else None,
                    **row_values,
                )
            )
        return merged


def merge(
    history: Sequence[HistoryRow],
    replicas: Sequence[ReplicaSample] = (),
    requests: Sequence[RequestRecord] = (),
    *,
    bucket_s: float = 1.0,
) -> list[MergedRow]:
    """One row per ``bucket_s`` from the first to the last moment any source covers.

    With a request log (``requests``), rates and percentiles are exact and
    each latency counts in the bucket where its request *began*: a request
    held through a cold start shows up when the load arrived, not minutes
    later when it was answered. Without one, they come from locust's
    history (see the module docstring). Users, desired and ready are the
    last values seen by the end of each bucket.
    """
    if bucket_s <= 0:
        raise ReportError(f"bucket must be > 0 s, got {bucket_s}")
    if not history and not requests:
        raise ReportError("nothing to report: no stats history and no request log")
    moments = [float(r.timestamp) for r in history] + [s.timestamp for s in replicas[:1]]
    moments += [replicas[-1].timestamp] if replicas else []
    moments += [r.origin_s for r in requests] + [r.origin_s + r.response_time_s for r in requests]
    first = math.floor(min(moments))
    timeline = _Timeline(first, int((max(moments) - first) // bucket_s) + 1, bucket_s)
    timeline.add_history(history)
    timeline.add_requests(requests)
    return timeline.rows(replicas, logged=bool(requests))


def _from_log(
    bucket: _Bucket, bucket_s: float, total_requests: int, total_failures: int
) -> dict[str, Any]:
    return {
        "sent_per_s": bucket.sent / bucket_s,
        "requests_per_s": bucket.completed / bucket_s,
        "failures_per_s": bucket.failed / bucket_s,
        "total_requests": total_requests,
        "total_failures": total_failures,
        "e2e_p50_s": percentile(bucket.e2e, 0.50),
        "e2e_p95_s": percentile(bucket.e2e, 0.95),
        "e2e_p99_s": percentile(bucket.e2e, 0.99),
        "ttft_p50_s": percentile(bucket.ttft, 0.50),
        "ttft_p95_s": percentile(bucket.ttft, 0.95),
        "ttft_p99_s": percentile(bucket.ttft, 0.99),
        "tpot_p50_s": percentile(bucket.tpot, 0.50),
        "tpot_p99_s": percentile(bucket.tpot, 0.99),
    }


def _from_history(
    bucket: _Bucket, start: float, previous: tuple[float, int, int] | None
) -> dict[str, Any]:
    rate = failure_rate = None
    if previous is not None and bucket.history_requests is not None:
        dt = start - previous[0]
        rate = (bucket.history_requests - previous[1]) / dt
        failure_rate = ((bucket.history_failures or 0) - previous[2]) / dt
    e2e, ttft, tpot = bucket.history_e2e, bucket.history_ttft, bucket.history_tpot
    return {
        "sent_per_s": None,
        "requests_per_s": rate,
        "failures_per_s": failure_rate,
        "total_requests": bucket.history_requests,
        "total_failures": bucket.history_failures,
        "e2e_p50_s": seconds(e2e.p50_ms) if e2e else None,
        "e2e_p95_s": seconds(e2e.p95_ms) if e2e else None,
        "e2e_p99_s": seconds(e2e.p99_ms) if e2e else None,
        "ttft_p50_s": seconds(ttft.p50_ms) if ttft else None,
        "ttft_p95_s": seconds(ttft.p95_ms) if ttft else None,
        "ttft_p99_s": seconds(ttft.p99_ms) if ttft else None,
        "tpot_p50_s": seconds(tpot.p50_ms) if tpot else None,
        "tpot_p99_s": seconds(tpot.p99_ms) if tpot else None,
    }


def write_csv(rows: Sequence[MergedRow], path: Path) -> None:
    names = [f.name for f in fields(MergedRow)]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        for row in rows:
            values = asdict(row)
            writer.writerow(["" if values[n] is None else values[n] for n in names])


def auto_bucket_s(span_s: float) -> float:
    """A round bucket width giving at most about 300 points over ``span_s``."""
    for width in (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0):
        if span_s / width <= 300:
            return width
    return 3600.0
