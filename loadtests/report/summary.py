"""The whole run in a few figures: requests, failures, latency percentiles, replicas.

From the request log when there is one, else from locust's final
``PREFIX_stats.csv`` (the busiest request type's percentiles, and its TTFT
and TPOT rows). Replica figures come from the merged rows: cold starts are
the times ready went from 0 to more than 0.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtests.report.inputs import AGGREGATED, SYNTHETIC_TYPES, RequestRecord, number, open_csv
from loadtests.report.rows import MergedRow, percentile, seconds

__all__ = ["Summary", "summarize"]


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
    entries = open_csv(stats_path, required)
    main_entries = [
        e for e in entries if e["Name"] != AGGREGATED and e["Type"] not in SYNTHETIC_TYPES
    ]
    busiest = max(main_entries, key=lambda e: int(e["Request Count"]), default=None)

    def pick(kind: str, column: str) -> float | None:
        if busiest is None:
            return None
        for entry in entries:
            if entry["Name"] == busiest["Name"] and entry["Type"] == kind:
                return seconds(number(entry[column]))
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
