"""The report's charts: load, time to first token, end-to-end latency, errors, replicas.

Every chart shares one time axis (seconds since the start of the run) and
shades the stretches with no ready replica: scale to zero, and the cold
start that follows, where requests wait. Latency lines break over a bucket
with no request rather than draw a latency nobody saw; p50, p95 and p99 are
drawn so that each shows where they coincide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loadtests.report.rows import MergedRow

__all__ = ["CHARTS", "draw_chart", "plot"]

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
