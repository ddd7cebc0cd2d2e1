"""Turn a headless locust run (plus sampled replicas) into a CSV and charts over time.

Inputs, from one run::

    locust -f loadtests/locustfile.py --headless --csv out/run --csv-full-history ...
    python -m loadtests.replicas_sampler ... --out out/replicas.csv   (alongside)

which leave ``out/run_stats.csv``, ``out/run_stats_history.csv`` (locust's),
``out/run_requests.csv`` (the locustfile's request log) and
``out/replicas.csv`` (with spot placement, one more sampler for the
``-spot`` companion: give ``--replicas`` once per file and the charts show
their sum). Output: ``out/run_report.csv`` (one row per bucket,
1 s unless the run is long), ``out/run_report.png`` (every chart, stacked on
one time axis), one PNG per chart (``out/run_<chart>.png``) and a summary
on stdout (``--json``: one JSON line)::

    python -m loadtests.report out/run --replicas out/replicas.csv

Main decision: latency percentiles come from the request log, not from
locust's stats history. Locust's history holds "current" percentiles over a
sliding window of about 10 s that is built from snapshots taken only when a
request completes: the first requests of a run, exactly those held through a
cold start, fall outside every window and never show. From the log, every
percentile is exact, and each latency is placed in the bucket where its
request *began*, so a cold start shows up where the load arrived rather than
minutes later when the answers came. Without a request log (a locustfile
of your own) the report falls back to locust's history and says less.

Columns:

- ``sent_per_s``, ``requests_per_s`` (completed), ``failures_per_s``:
  requests that began, ended, or failed in each bucket; ``TTFT``/``TPOT``
  rows, which the locustfile adds for each streamed request, are not
  requests and are left out;
- ``e2e_*_s``, ``ttft_*_s``, ``tpot_*_s``: percentiles of the requests that
  began in the bucket (successful ones);
- ``users``: locust's user count; ``desired``, ``ready``: the last replica
  sample by the end of the bucket.

The shaded bands on every chart are the stretches with no ready replica:
scale to zero, and the cold start that follows, where requests wait.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = [
    "MergedRow",
    "ReplicaSample",
    "ReportError",
    "Summary",
    "combine_replicas",
    "draw_chart",
    "main",
    "merge",
    "plot",
    "read_replicas",
    "read_stats_history",
    "summarize",
    "write_csv",
    "write_report",
]

# Request types the locustfile adds beside each streamed request's own entry.
SYNTHETIC_TYPES = frozenset({"TTFT", "TPOT"})
_AGGREGATED = "Aggregated"


class ReportError(ValueError):
    """An input file is missing or not what the report expects; the message says which."""


@dataclass(frozen=True, slots=True)
class _HistoryRow:
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


@dataclass(frozen=True, slots=True)
class Summary:
    """Whole-run figures; latencies from locust's final ``_stats.csv``."""

    duration_s: float
    requests: int
    failures: int
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    e2e_p50_s: float | None
    e2e_p99_s: float | None
    tpot_p50_s: float | None
    peak_ready: int | None
    cold_starts: int
    final_ready: int | None


def _number(text: str | None) -> float | None:
    if text is None or text.strip() in ("", "N/A"):
        return None
    return float(text)


def _open_csv(path: Path, required: Sequence[str]) -> list[dict[str, str]]:
    if not path.is_file():
        raise ReportError(f"{path} does not exist")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise ReportError(f"{path}: missing column(s) {missing}; found {reader.fieldnames}")
        return list(reader)


def read_stats_history(path: Path) -> list[_HistoryRow]:
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
    for line, raw in enumerate(_open_csv(path, required), start=2):
        try:
            rows.append(
                _HistoryRow(
                    timestamp=int(raw["Timestamp"]),
                    users=int(raw["User Count"]),
                    type=raw["Type"],
                    name=raw["Name"],
                    total_requests=int(raw["Total Request Count"]),
                    total_failures=int(raw["Total Failure Count"]),
                    p50_ms=_number(raw["50%"]),
                    p95_ms=_number(raw["95%"]),
                    p99_ms=_number(raw["99%"]),
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
    for line, raw in enumerate(_open_csv(path, ("timestamp", "desired", "ready")), start=2):
        try:
            desired = _number(raw["desired"])
            ready = _number(raw["ready"])
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


def _is_request(row: _HistoryRow) -> bool:
    return row.name != _AGGREGATED and row.type not in SYNTHETIC_TYPES and row.type != ""


def _busiest(rows: list[_HistoryRow]) -> _HistoryRow | None:
    return max(rows, key=lambda r: r.total_requests, default=None)


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def read_request_log(path: Path) -> list[RequestRecord]:
    """Rows of the locustfile's ``PREFIX_requests.csv``."""
    required = ("origin_unix_s", "type", "name", "response_time_s", "ok")
    records = []
    for line, raw in enumerate(_open_csv(path, required), start=2):
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
    history_e2e: _HistoryRow | None = None
    history_ttft: _HistoryRow | None = None
    history_tpot: _HistoryRow | None = None
    sent: int = 0
    completed: int = 0
    failed: int = 0
    e2e: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)


def merge(
    history: Sequence[_HistoryRow],
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
    count = int((max(moments) - first) // bucket_s) + 1
    buckets = [_Bucket() for _ in range(count)]

    def at(t: float) -> _Bucket:
        return buckets[min(count - 1, max(0, int((t - first) // bucket_s)))]

    by_second: dict[int, list[_HistoryRow]] = {}
    for row in history:
        by_second.setdefault(row.timestamp, []).append(row)
    for second in sorted(by_second):
        rows = by_second[second]
        bucket = at(second)
        aggregated = next((r for r in rows if r.name == _AGGREGATED), rows[0])
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
    for record in requests:
        if record.type == "TTFT":
            at(record.origin_s).ttft.append(record.response_time_s)
        elif record.type == "TPOT":
            at(record.origin_s).tpot.append(record.response_time_s)
        else:
            at(record.origin_s).sent += 1
            done = at(record.origin_s + record.response_time_s)
            done.completed += 1
            if record.ok:
                at(record.origin_s).e2e.append(record.response_time_s)
            else:
                done.failed += 1

    merged: list[MergedRow] = []
    sample_index = -1
    previous: tuple[float, int, int] | None = None  # history (time, requests, failures)
    total_requests = total_failures = 0
    for index, bucket in enumerate(buckets):
        start = first + index * bucket_s
        end = start + bucket_s
        while sample_index + 1 < len(replicas) and replicas[sample_index + 1].timestamp < end:
            sample_index += 1
        sample = replicas[sample_index] if sample_index >= 0 else None
        if requests:
            total_requests += bucket.completed
            total_failures += bucket.failed
            row_values: dict[str, Any] = {
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
        else:
            row_values = _from_history(bucket, start, previous)
            if bucket.history_requests is not None and bucket.history_failures is not None:
                previous = (start, bucket.history_requests, bucket.history_failures)
        merged.append(
            MergedRow(
                time_s=start - first,
                timestamp=start,
                users=bucket.users,
                desired=sample.desired if sample else None,
                ready=sample.ready if sample else None,
                **row_values,
            )
        )
    return merged


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
        "e2e_p50_s": _seconds(e2e.p50_ms) if e2e else None,
        "e2e_p95_s": _seconds(e2e.p95_ms) if e2e else None,
        "e2e_p99_s": _seconds(e2e.p99_ms) if e2e else None,
        "ttft_p50_s": _seconds(ttft.p50_ms) if ttft else None,
        "ttft_p95_s": _seconds(ttft.p95_ms) if ttft else None,
        "ttft_p99_s": _seconds(ttft.p99_ms) if ttft else None,
        "tpot_p50_s": _seconds(tpot.p50_ms) if tpot else None,
        "tpot_p99_s": _seconds(tpot.p99_ms) if tpot else None,
    }


def write_csv(rows: Sequence[MergedRow], path: Path) -> None:
    names = [f.name for f in fields(MergedRow)]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        for row in rows:
            values = asdict(row)
            writer.writerow(["" if values[n] is None else values[n] for n in names])


def summarize(
    stats_path: Path, rows: Sequence[MergedRow], requests: Sequence[RequestRecord] = ()
) -> Summary:
    """Whole-run figures: from the request log when there is one, else ``PREFIX_stats.csv``.

    Replica figures come from ``rows``: cold starts are the times ready
    went from 0 to more than 0.
    """
    ready = [r.ready for r in rows if r.ready is not None]
    replica_figures: dict[str, Any] = {
        "peak_ready": max(ready) if ready else None,
        "cold_starts": sum(1 for a, b in itertools.pairwise(ready) if a == 0 and b > 0),
        "final_ready": ready[-1] if ready else None,
    }
    duration_s = rows[-1].time_s if rows else 0.0
    if requests:
        main = [r for r in requests if r.type not in SYNTHETIC_TYPES]
        e2e = [r.response_time_s for r in main if r.ok]
        ttft = [r.response_time_s for r in requests if r.type == "TTFT"]
        tpot = [r.response_time_s for r in requests if r.type == "TPOT"]
        return Summary(
            duration_s=duration_s,
            requests=len(main),
            failures=sum(1 for r in main if not r.ok),
            ttft_p50_s=percentile(ttft, 0.5),
            ttft_p99_s=percentile(ttft, 0.99),
            e2e_p50_s=percentile(e2e, 0.5),
            e2e_p99_s=percentile(e2e, 0.99),
            tpot_p50_s=percentile(tpot, 0.5),
            **replica_figures,
        )
    required = ("Type", "Name", "Request Count", "Failure Count", "50%", "99%")
    entries = _open_csv(stats_path, required)
    main_entries = [
        e for e in entries if e["Name"] != _AGGREGATED and e["Type"] not in SYNTHETIC_TYPES
    ]
    busiest = max(main_entries, key=lambda e: int(e["Request Count"]), default=None)

    def pick(kind: str, column: str) -> float | None:
        if busiest is None:
            return None
        for entry in entries:
            if entry["Name"] == busiest["Name"] and entry["Type"] == kind:
                return _seconds(_number(entry[column]))
        return None

    return Summary(
        duration_s=duration_s,
        requests=sum(int(e["Request Count"]) for e in main_entries),
        failures=sum(int(e["Failure Count"]) for e in main_entries),
        ttft_p50_s=pick("TTFT", "50%"),
        ttft_p99_s=pick("TTFT", "99%"),
        e2e_p50_s=pick(busiest["Type"], "50%") if busiest else None,
        e2e_p99_s=pick(busiest["Type"], "99%") if busiest else None,
        tpot_p50_s=pick("TPOT", "50%"),
        **replica_figures,
    )


# --- charts --------------------------------------------------------------------

CHARTS = ("load", "ttft", "e2e", "errors", "replicas")
_TITLES = {
    "load": "Load: requests sent and completed per second, and users",
    "ttft": "Time to first token, by when the request was sent",
    "e2e": "End-to-end latency, by when the request was sent",
    "errors": "Failed requests per second",
    "replicas": "Replicas",
}


# Legends sit right of the plot, so they never cover a curve.
_LEGEND: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.06, 1.0), "fontsize": 8}


def _series(rows: Sequence[MergedRow], attribute: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for row in rows:
        value = getattr(row, attribute)
        if value is not None:
            xs.append(row.time_s)
            ys.append(float(value))
    return xs, ys


def _gapped_series(rows: Sequence[MergedRow], attribute: str) -> tuple[list[float], list[float]]:
    """Every bucket, NaN where it has no value: the line breaks over a bucket
    with no request instead of drawing a latency across it that nobody saw."""
    xs = [row.time_s for row in rows]
    ys = []
    for row in rows:
        value = getattr(row, attribute)
        ys.append(math.nan if value is None else float(value))
    return xs, ys


# Drawn in this order (later on top); the legend lists p50, p95, p99.
_PERCENTILES = ("p50", "p95", "p99")
_PERCENTILE_STYLES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("p99", {"color": "tab:red", "lw": 3.0, "alpha": 0.45, "zorder": 2}),
    ("p95", {"color": "tab:orange", "lw": 1.6, "ls": "--", "zorder": 3}),
    ("p50", {"color": "tab:green", "lw": 1.2, "zorder": 4}),
)


def _zero_ready_spans(rows: Sequence[MergedRow]) -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []
    start: float | None = None
    for row in rows:
        if row.ready == 0 and start is None:
            start = row.time_s
        elif row.ready is not None and row.ready > 0 and start is not None:
            spans.append((start, row.time_s))
            start = None
    if start is not None:
        spans.append((start, rows[-1].time_s + 1))
    return spans


def draw_chart(ax: Any, chart: str, rows: Sequence[MergedRow]) -> None:
    """Draw one panel (a name of :data:`CHARTS`) on ``ax``, the no-replica stretches shaded."""
    for i, (a, b) in enumerate(_zero_ready_spans(rows)):
        ax.axvspan(a, b, color="0.9", zorder=0, label="no ready replica" if i == 0 else None)
    ax.set_title(_TITLES[chart], fontsize=10, loc="left")
    ax.grid(True, alpha=0.3)
    if chart == "load":
        ax.plot(*_series(rows, "sent_per_s"), color="tab:purple", lw=1, alpha=0.7, label="sent/s")
        ax.plot(*_series(rows, "requests_per_s"), color="tab:blue", lw=1.2, label="completed/s")
        ax.set_ylabel("requests/s")
        ax.set_ylim(bottom=0)
        twin = ax.twinx()
        twin.plot(*_series(rows, "users"), color="0.4", lw=1, ls="--", label="users")
        twin.set_ylabel("users")
        twin.set_ylim(bottom=0)
        handles, labels = ax.get_legend_handles_labels()
        more_handles, more_labels = twin.get_legend_handles_labels()
        ax.legend(handles + more_handles, labels + more_labels, **_LEGEND)
        return
    if chart in ("ttft", "e2e"):
        values: list[float] = []
        # p99 first and widest, p95 dashed over it, p50 on top: with a few
        # requests a second the percentiles often coincide, and each must
        # still show where it lies under the others.
        for pct, style in _PERCENTILE_STYLES:
            xs, ys = _gapped_series(rows, f"{chart}_{pct}_s")
            values += [v for v in ys if not math.isnan(v)]
            ax.plot(xs, ys, label=pct, marker=".", markersize=3, **style)
        handles, labels = ax.get_legend_handles_labels()
        order = sorted(range(len(labels)), key=lambda i: (labels[i] not in _PERCENTILES, labels[i]))
        ax.legend([handles[i] for i in order], [labels[i] for i in order], **_LEGEND)
        positive = [v for v in values if v > 0]
        # Held requests wait seconds to minutes, warm ones milliseconds: a log
        # axis keeps both readable when they differ that much.
        if positive and max(positive) / min(positive) > 50:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_ylabel("seconds")
        return
    if chart == "errors":
        xs, ys = _series(rows, "failures_per_s")
        ax.bar(xs, ys, width=1.0, color="tab:red", label="failures/s")
        total = next((r.total_failures for r in reversed(rows) if r.total_failures is not None), 0)
        ax.set_title(f"{_TITLES[chart]} (total {total})", fontsize=10, loc="left")
        ax.set_ylabel("failures/s")
        ax.set_ylim(bottom=0, top=max([*ys, 1.0]) * 1.15)
    elif chart == "replicas":
        xs, ys = _series(rows, "desired")
        ax.step(xs, ys, where="post", color="tab:orange", lw=1.5, ls="--", label="desired")
        xs, ys = _series(rows, "ready")
        ax.step(xs, ys, where="post", color="tab:green", lw=1.8, label="ready")
        ax.fill_between(xs, ys, step="post", color="tab:green", alpha=0.2)
        ax.set_ylabel("replicas")
        top = max([*ys, *_series(rows, "desired")[1], 1.0])
        ax.set_ylim(bottom=0, top=top + 1)
        ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(**_LEGEND)


def _xlabel(rows: Sequence[MergedRow]) -> str:
    width = rows[1].time_s - rows[0].time_s if len(rows) > 1 else 1.0
    return f"seconds since the start of the run (one point per {width:g} s)"


def plot(rows: Sequence[MergedRow], prefix: Path, *, title: str = "") -> list[Path]:
    """Write ``PREFIX_report.png`` (all charts) and ``PREFIX_<chart>.png``; their paths."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never a display
    import matplotlib.pyplot as plt

    has_replicas = any(r.ready is not None or r.desired is not None for r in rows)
    charts = [c for c in CHARTS if c != "replicas" or has_replicas]
    written = []
    figure, axes = plt.subplots(
        len(charts), 1, figsize=(11, 2.4 * len(charts)), sharex=True, layout="constrained"
    )
    for ax, chart in zip(axes, charts, strict=True):
        draw_chart(ax, chart, rows)
    axes[-1].set_xlabel(_xlabel(rows))
    if title:
        figure.suptitle(title)
    overview = Path(f"{prefix}_report.png")
    figure.savefig(overview, dpi=110)
    plt.close(figure)
    written.append(overview)
    for chart in charts:
        figure, ax = plt.subplots(figsize=(11, 3.2), layout="constrained")
        draw_chart(ax, chart, rows)
        ax.set_xlabel(_xlabel(rows))
        path = Path(f"{prefix}_{chart}.png")
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written


def auto_bucket_s(span_s: float) -> float:
    """A round bucket width giving at most about 300 points over ``span_s``."""
    for width in (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0):
        if span_s / width <= 300:
            return width
    return 3600.0


def write_report(
    prefix: Path,
    *,
    replicas: Path | Sequence[Path] | None = None,
    out_prefix: Path | None = None,
    title: str = "",
    bucket_s: float | None = None,
) -> tuple[Summary, list[Path]]:
    """Read the run's CSVs (see the module docstring); write the merged CSV and the PNGs."""
    history = read_stats_history(Path(f"{prefix}_stats_history.csv"))
    log_path = Path(f"{prefix}_requests.csv")
    requests = read_request_log(log_path) if log_path.is_file() else []
    paths = [replicas] if isinstance(replicas, Path) else list(replicas or ())
    samples = combine_replicas([read_replicas(p) for p in paths]) if paths else []
    if bucket_s is None:
        span_s = history[-1].timestamp - history[0].timestamp
        bucket_s = auto_bucket_s(span_s)
    rows = merge(history, samples, requests, bucket_s=bucket_s)
    out = out_prefix or prefix
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    csv_path = Path(f"{out}_report.csv")
    write_csv(rows, csv_path)
    pngs = plot(rows, out, title=title)
    return summarize(Path(f"{prefix}_stats.csv"), rows, requests), [csv_path, *pngs]


def _format(value: float | int | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}{unit}"
    return f"{value}{unit}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtests.report",
        description="CSV and PNG charts over time from a headless locust run "
        "(--csv PREFIX --csv-full-history) and a replicas CSV.",
    )
    parser.add_argument("prefix", type=Path, help="the --csv PREFIX locust was given")
    parser.add_argument(
        "--replicas",
        type=Path,
        action="append",
        default=None,
        help="CSV from python -m loadtests.replicas_sampler; give one per Deployment of the "
        "model (llama and llama-spot) to chart their sum",
    )
    parser.add_argument("--out", type=Path, default=None, help="output prefix (default: PREFIX)")
    parser.add_argument("--title", default="", help="title on the overview chart")
    parser.add_argument(
        "--bucket-s",
        type=float,
        default=None,
        help="seconds per row and chart point (default 1, wider for long runs)",
    )
    parser.add_argument("--json", action="store_true", help="end with the summary as one JSON line")
    args = parser.parse_args(argv)
    try:
        summary, written = write_report(
            args.prefix,
            replicas=args.replicas,
            out_prefix=args.out,
            title=args.title,
            bucket_s=args.bucket_s,
        )
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    print(
        f"{summary.requests} requests, {summary.failures} failed, over {summary.duration_s:.0f} s; "
        f"TTFT p50 {_format(summary.ttft_p50_s, ' s')}, p99 {_format(summary.ttft_p99_s, ' s')}; "
        f"end-to-end p50 {_format(summary.e2e_p50_s, ' s')}, "
        f"p99 {_format(summary.e2e_p99_s, ' s')}; "
        f"replicas: peak ready {_format(summary.peak_ready)}, cold starts {summary.cold_starts}, "
        f"ready at the end {_format(summary.final_ready)}"
    )
    if args.json:
        print(json.dumps(asdict(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
