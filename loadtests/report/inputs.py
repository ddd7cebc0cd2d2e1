"""The report's inputs, read and checked: locust's stats history, the request log, replica samples.

A missing file or column, or a value that does not parse, is a
:class:`ReportError` naming the file and line. Several replica files (a
Deployment and its spot companion) are combined into one fleet here.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AGGREGATED",
    "SYNTHETIC_TYPES",
    "HistoryRow",
    "ReplicaSample",
    "ReportError",
    "RequestRecord",
    "combine_replicas",
    "number",
    "open_csv",
    "read_replicas",
    "read_request_log",
    "read_stats_history",
]

# Request types the locustfile adds beside each streamed request's own entry.
SYNTHETIC_TYPES = frozenset({"TTFT", "TPOT"})
# The name of locust's row that sums every request type.
AGGREGATED = "Aggregated"


class ReportError(ValueError):
    """An input file is missing or not what the report expects; the message says which."""


@dataclass(frozen=True, slots=True)
class HistoryRow:
    timestamp: int
    users: int
    type: str
    name: str
    total_requests: int
    total_failures: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True, slots=True)
class ReplicaSample:
    timestamp: float
    desired: int | None
    ready: int | None


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One row of the locustfile's request log (``PREFIX_requests.csv``)."""

    origin_s: float  # Unix time the request was sent (or, open loop, due)
    type: str  # HTTP method, or TTFT / TPOT
    name: str
    response_time_s: float
    ok: bool


def number(text: str | None) -> float | None:
    if text is None or text.strip() in ("", "N/A"):
        return None
    return float(text)


def open_csv(path: Path, required: Sequence[str]) -> list[dict[str, str]]:
    if not path.is_file():
        raise ReportError(f"{path} does not exist")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise ReportError(f"{path}: missing column(s) {missing}; found {reader.fieldnames}")
        return list(reader)


def read_stats_history(path: Path) -> list[HistoryRow]:
    """Rows of locust's ``PREFIX_stats_history.csv`` (written with ``--csv-full-history``)."""
    required = (
        "Timestamp",
        "User Count",
        "Type",
        "Name",
        "Total Request Count",
        "Total Failure Count",
        "50%",
        "95%",
        "99%",
    )
    rows = []
    for line, raw in enumerate(open_csv(path, required), start=2):
        try:
            rows.append(
                HistoryRow(
                    timestamp=int(raw["Timestamp"]),
                    users=int(raw["User Count"]),
                    type=raw["Type"],
                    name=raw["Name"],
                    total_requests=int(raw["Total Request Count"]),
                    total_failures=int(raw["Total Failure Count"]),
                    p50_ms=number(raw["50%"]),
                    p95_ms=number(raw["95%"]),
                    p99_ms=number(raw["99%"]),
                )
            )
        except ValueError as error:
            raise ReportError(f"{path}:{line}: {error}") from error
    if not rows:
        raise ReportError(f"{path} has no rows; did locust run with --csv-full-history?")
    return rows


def read_replicas(path: Path) -> list[ReplicaSample]:
    """Rows of the CSV that :mod:`loadtests.replicas_sampler` writes, in time order."""
    samples = []
    for line, raw in enumerate(open_csv(path, ("timestamp", "desired", "ready")), start=2):
        try:
            desired = number(raw["desired"])
            ready = number(raw["ready"])
            samples.append(
                ReplicaSample(
                    timestamp=float(raw["timestamp"]),
                    desired=None if desired is None else int(desired),
                    ready=None if ready is None else int(ready),
                )
            )
        except ValueError as error:
            raise ReportError(f"{path}:{line}: {error}") from error
    samples.sort(key=lambda s: s.timestamp)
    return samples


def combine_replicas(series: Sequence[Sequence[ReplicaSample]]) -> list[ReplicaSample]:
    """Several Deployments' samples as one fleet: at each sample time, the sum of each
    Deployment's latest sample (a spot placement splits a model into ``llama`` and
    ``llama-spot``; the chart should show both halves).

    A Deployment not sampled yet counts as 0 (it did not exist); one whose
    latest poll failed makes the sum unknown (None) rather than too low.
    """
    if len(series) == 1:
        return list(series[0])
    events = sorted((s.timestamp, index, s) for index, one in enumerate(series) for s in one)
    latest: dict[int, ReplicaSample] = {}
    combined = []
    for timestamp, index, sample in events:
        latest[index] = sample
        desired = [s.desired for s in latest.values()]
        ready = [s.ready for s in latest.values()]
        combined.append(
            ReplicaSample(timestamp=timestamp, desired=_sum(desired), ready=_sum(ready))
        )
    return combined


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if len(known) == len(values) else None


def read_request_log(path: Path) -> list[RequestRecord]:
    """Rows of the locustfile's ``PREFIX_requests.csv``."""
    required = ("origin_unix_s", "type", "name", "response_time_s", "ok")
    records = []
    for line, raw in enumerate(open_csv(path, required), start=2):
        try:
            records.append(
                RequestRecord(
                    origin_s=float(raw["origin_unix_s"]),
                    type=raw["type"],
                    name=raw["name"],
                    response_time_s=float(raw["response_time_s"]),
                    ok=raw["ok"] == "1",
                )
            )
        except ValueError as error:
            raise ReportError(f"{path}:{line}: {error}") from error
    return records
