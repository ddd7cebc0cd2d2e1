"""What the demo (and the end-to-end tests) saw, turned into the figures they report.

Everything here is pure: samples go in with the time they were taken, and the
summary is computed from them, so every figure the demo prints is observed,
never assumed (README.md, "Watch it once"):

- ``peak_replicas`` is the highest ``readyReplicas`` seen;
- ``cold_starts`` counts transitions from zero ready replicas to some;
- ``final_replicas`` is the last sample's replica count *and* pod count (the
  larger, so a pod left terminating is not hidden);
- TTFT percentiles come from the client's own clock;
- ``max_buffered`` is the most requests seen held at the activator at once;
- ``slo_attainment`` is the share of requests whose first token came within
  the objective (``slo_ttft_s``) on the client's clock, a failed request
  counting as a miss: what a user of the model would have seen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["ClusterSample", "DemoTracker", "RequestResult", "Summary", "percentile"]


@dataclass(frozen=True, slots=True)
class ClusterSample:
    at_s: float
    desired: int  # spec.replicas
    ready: int  # status.readyReplicas
    pods: int  # pods of the Deployment that exist, terminating ones included
    buffered: int = 0  # held at the activator
    in_flight: int = 0  # sent to a replica, not finished


@dataclass(frozen=True, slots=True)
class RequestResult:
    started_s: float
    status: int  # HTTP status; 0 when the connection failed outright
    ttft_s: float | None  # time to the first streamed token, client-measured
    total_s: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200 and not self.error


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True, slots=True)
class Summary:
    requests: int
    succeeded: int
    failed: int
    cold_starts: int
    peak_replicas: int
    final_replicas: int
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    max_buffered: int
    # The time-to-first-token objective and the share of requests that met it.
    slo_ttft_s: float | None = None
    slo_attainment: float | None = None

    def as_json(self) -> dict[str, float | int | None]:
        return {
            "requests": self.requests,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "cold_starts": self.cold_starts,
            "peak_replicas": self.peak_replicas,
            "final_replicas": self.final_replicas,
            "ttft_p50_s": None if self.ttft_p50_s is None else round(self.ttft_p50_s, 4),
            "ttft_p99_s": None if self.ttft_p99_s is None else round(self.ttft_p99_s, 4),
            "max_buffered": self.max_buffered,
            "slo_ttft_s": self.slo_ttft_s,
            "slo_attainment": (
                None if self.slo_attainment is None else round(self.slo_attainment, 4)
            ),
        }

    def problems(self) -> list[str]:
        """Why the demo did not show what it should (empty when it did)."""
        found = []
        if self.requests == 0:
            found.append("no request was sent")
        if self.failed:
            found.append(f"{self.failed} request(s) failed")
        if self.cold_starts < 1:
            found.append("no cold start was observed")
        if self.peak_replicas <= 1:
            found.append(f"peak ready replicas was {self.peak_replicas}, expected more than 1")
        if self.final_replicas != 0:
            found.append(f"{self.final_replicas} replica(s) left at the end, expected 0")
        return found


@dataclass
class DemoTracker:
    samples: list[ClusterSample] = field(default_factory=list)
    results: list[RequestResult] = field(default_factory=list)

    def sample(self, sample: ClusterSample) -> None:
        self.samples.append(sample)

    def result(self, result: RequestResult) -> None:
        self.results.append(result)

    @property
    def cold_starts(self) -> int:
        # Only transitions actually seen count: a first sample that is already
        # ready says nothing about how it got there.
        count = 0
        previous_ready: int | None = None
        for s in self.samples:
            if previous_ready == 0 and s.ready > 0:
                count += 1
            previous_ready = s.ready
        return count

    def attainment(self, slo_ttft_s: float) -> float | None:
        """The share of requests with a first token within ``slo_ttft_s`` (None: no request)."""
        if not self.results:
            return None
        met = sum(
            1 for r in self.results if r.ok and r.ttft_s is not None and r.ttft_s <= slo_ttft_s
        )
        return met / len(self.results)

    def summary(self, *, slo_ttft_s: float | None = None) -> Summary:
        ttfts = [r.ttft_s for r in self.results if r.ok and r.ttft_s is not None]
        last = self.samples[-1] if self.samples else None
        succeeded = sum(1 for r in self.results if r.ok)
        return Summary(
            requests=len(self.results),
            succeeded=succeeded,
            failed=len(self.results) - succeeded,
            cold_starts=self.cold_starts,
            peak_replicas=max((s.ready for s in self.samples), default=0),
            final_replicas=max(last.desired, last.ready, last.pods) if last else 0,
            ttft_p50_s=percentile(ttfts, 50),
            ttft_p99_s=percentile(ttfts, 99),
            max_buffered=max((s.buffered for s in self.samples), default=0),
            slo_ttft_s=slo_ttft_s,
            slo_attainment=None if slo_ttft_s is None else self.attainment(slo_ttft_s),
        )
