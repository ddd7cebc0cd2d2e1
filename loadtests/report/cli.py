"""``python -m loadtests.report``: read a run's files, write the CSV and PNGs, print a summary.

The files a run leaves and what comes out are in :mod:`loadtests.report`;
a bad input ends the command with status 2 and a line naming it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from loadtests.report.charts import plot
from loadtests.report.inputs import (
    ReportError,
    combine_replicas,
    read_replicas,
    read_request_log,
    read_stats_history,
)
from loadtests.report.rows import auto_bucket_s, merge, write_csv
from loadtests.report.summary import Summary, summarize

__all__ = ["main", "write_report"]


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
