"""Time to first token by priority class, for a run whose trace gave classes.

``tidal simulate --class-field`` replays a trace whose requests carry a
priority class; the simulated activator holds them by class and tenant
(:mod:`groundwork.fair_hold_queue`), and this module reports what each
class got: requests, TTFT p50 and p99 of those answered, and those that
failed (shed, refused, timed out).

Main decision: classes are grouped by :func:`groundwork.rules.priority.class_label`
(critical above 0, standard at 0, sheddable below), the same three groups the
activator's metrics use, so a trace with many integers still prints three
rows at most.
"""

from __future__ import annotations

from dataclasses import dataclass

from groundwork.rules.priority import PRIORITY_LABELS, class_label
from simulator.scorecard import percentile
from simulator.world import RunResult

__all__ = ["ClassTtft", "class_table", "ttft_by_class"]


@dataclass(frozen=True, slots=True)
class ClassTtft:
    """What one class of requests got in one run."""

    requests: int
    failed: int
    ttft_p50_s: float | None  # None: none answered
    ttft_p99_s: float | None

    def as_json(self) -> dict[str, float | int | None]:
        return {
            "requests": self.requests,
            "failed": self.failed,
            "ttft_p50_s": None if self.ttft_p50_s is None else round(self.ttft_p50_s, 4),
            "ttft_p99_s": None if self.ttft_p99_s is None else round(self.ttft_p99_s, 4),
        }


def ttft_by_class(result: RunResult) -> dict[str, ClassTtft]:
    """Per class label (highest first), the run's TTFT; classes with no request are left out."""
    ttfts: dict[str, list[float]] = {label: [] for label in PRIORITY_LABELS}
    counts = dict.fromkeys(PRIORITY_LABELS, 0)
    failed = dict.fromkeys(PRIORITY_LABELS, 0)
    priorities = result.priority or (0,) * len(result.arrival_s)
    for arrival, first, priority in zip(
        result.arrival_s, result.first_token_s, priorities, strict=True
    ):
        label = class_label(priority)
        counts[label] += 1
        if first is None:
            failed[label] += 1
        else:
            ttfts[label].append(first - arrival)
    return {
        label: ClassTtft(
            requests=counts[label],
            failed=failed[label],
            ttft_p50_s=percentile(ttfts[label], 50),
            ttft_p99_s=percentile(ttfts[label], 99),
        )
        for label in PRIORITY_LABELS
        if counts[label]
    }


def class_table(results: list[RunResult]) -> str:
    """One row per policy and class: requests, failed, TTFT p50 and p99 in seconds."""

    def secs(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    lines = [
        f"{'policy':<16} {'class':<10} {'requests':>8} {'failed':>7} {'p50 s':>8} {'p99 s':>8}"
    ]
    for result in results:
        for label, got in ttft_by_class(result).items():
            lines.append(
                f"{result.name:<16} {label:<10} {got.requests:>8} {got.failed:>7} "
                f"{secs(got.ttft_p50_s):>8} {secs(got.ttft_p99_s):>8}"
            )
    return "\n".join(lines)
