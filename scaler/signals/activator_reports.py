"""Activator reports: the activator view of demand (docs/architecture.md, "The scaler").

Every activator posts its per-target counts every ``period_s`` (1 s), in the
shape :mod:`groundwork.rules.stats_report` defines; the scaler's HTTP API
records each report here and tells the hub it arrived. The store keeps only
each activator's latest report, stamped with the time it *arrived* (the
sender's clock is never trusted), and sums over activators when read: three
activators each holding 2 requests for a target is 6. What the latest
report counted in its own period (arrivals, tokens, refused adapter loads)
is what that arrival brought (:class:`~scaler.signals.base.Brought`).

Main decision, silence: an activator that has not reported for three of its
periods is dropped (it crashed or was scaled away; what it held died with
it). While it is not yet dropped its last report still counts, but the view
is only *fresh* when every counted activator reported within two periods.
Once activators have been seen, their all going silent is not "zero load": the
view stays expected (stale, zeros) for ``expect_for_s`` so that it blocks any
scale-down instead of vanishing. If no activator has reported for that long,
the view is absent (``None``), as in a deployment without activators.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from groundwork.rules.priority import PRIORITY_LABELS
from groundwork.rules.stats_report import ActivatorReport, ReportError, TargetStats
from scaler.policy.api import SignalKind
from scaler.signals.base import COUNTS, Brought, Levels, SourceReading

__all__ = ["ACTIVATOR", "ActivatorReports", "ReportSettings"]

#: This source's name.
ACTIVATOR = "activator"

# TargetStats' counts summed over the activators into the reading's observed values.
_HOLD_FIELDS = (*(f"held_{label}" for label in PRIORITY_LABELS), "shed")


class ReportSettings(BaseModel):
    drop_after_periods: float = Field(
        3.0, gt=0, description="drop an activator silent for this many report periods"
    )
    fresh_within_periods: float = Field(
        2.0, gt=0, description="reports older than this many periods make the view stale"
    )
    expect_for_s: float = Field(
        300.0,
        ge=0,
        description=(
            "after the last report, how long silence counts as unknown demand "
            "rather than as no activators, seconds"
        ),
    )

    def build(self) -> ActivatorReports:
        return ActivatorReports(
            drop_after_periods=self.drop_after_periods,
            fresh_within_periods=self.fresh_within_periods,
            expect_for_s=self.expect_for_s,
        )


@dataclass(frozen=True, slots=True)
class _Received:
    report: ActivatorReport
    arrived_at: float


def _brought(stats: TargetStats) -> Brought:
    """What one report counted for one target in its own period."""
    return Brought(
        arrivals=float(stats.arrivals),
        prompt_tokens=float(stats.prompt_tokens),
        output_tokens=float(stats.output_tokens),
        first_tokens=float(stats.first_tokens),
        prefilled_tokens=float(stats.prefilled_tokens),
        best_prefill_tokens_per_s=stats.best_prefill_tokens_per_s,
        prompts_over=tuple(float(n) for n in stats.prompts_over),
        adapter_refusals=stats.adapter_refusals,
    )


class ActivatorReports:
    """Latest report per activator; summed per target when read."""

    def __init__(
        self,
        *,
        drop_after_periods: float = 3.0,
        fresh_within_periods: float = 2.0,
        expect_for_s: float = 300.0,
        max_activators: int = 1000,
    ) -> None:
        if not 0 < fresh_within_periods <= drop_after_periods:
            raise ValueError(
                "fresh_within_periods must be > 0 and <= drop_after_periods, got "
                f"{fresh_within_periods} and {drop_after_periods}"
            )
        self._drop_after_periods = drop_after_periods
        self._fresh_within_periods = fresh_within_periods
        self._expect_for_s = expect_for_s
        self._max_activators = max_activators
        self._latest: dict[str, _Received] = {}
        # What the latest report (of any activator) counted, per target: the same
        # values until the next report, so the hub adds each once.
        self._brought: dict[str, Brought] = {}
        self._last_arrival: float | None = None

    @property
    def name(self) -> str:
        return ACTIVATOR

    @property
    def feeds(self) -> frozenset[SignalKind]:
        """Requests held and in flight: the counts, nothing of the servers' state."""
        return COUNTS

    def record(self, report: ActivatorReport, *, now: float) -> int:
        """Keep ``report`` as its activator's latest; the number of activators reporting."""
        self._expire(now)
        if report.activator not in self._latest and len(self._latest) >= self._max_activators:
            raise ReportError(f"too many activators reporting (limit {self._max_activators})")
        self._latest[report.activator] = _Received(report, now)
        self._brought = {key: _brought(stats) for key, stats in report.targets.items()}
        self._last_arrival = now
        return len(self._latest)

    def reporting(self, *, now: float) -> int:
        """How many activators count at ``now`` (not silent for three periods)."""
        self._expire(now)
        return len(self._latest)

    def _expire(self, now: float) -> None:
        dead = [
            name
            for name, got in self._latest.items()
            if now - got.arrived_at > self._drop_after_periods * got.report.period_s
        ]
        for name in dead:
            del self._latest[name]

    def read(self, key: str, *, now: float) -> SourceReading | None:
        self._expire(now)
        if not self._latest:
            if self._last_arrival is None or now - self._last_arrival > self._expect_for_s:
                return None
            # Activators were here and went silent: unknown, not zero.
            return SourceReading(fresh=False, reporters=0)
        concurrency = 0.0
        in_flight = buffered = arrivals = awaiting = 0
        pods: dict[str, float] = {}
        hold = dict.fromkeys(_HOLD_FIELDS, 0)
        fresh = True
        for got in self._latest.values():
            if now - got.arrived_at > self._fresh_within_periods * got.report.period_s:
                fresh = False
            stats = got.report.targets.get(key)
            if stats is None:  # this activator saw nothing of the target: zero
                continue
            concurrency += stats.concurrency
            in_flight += stats.in_flight
            buffered += stats.buffered
            arrivals += stats.arrivals
            awaiting += stats.awaiting_first_token
            for name in _HOLD_FIELDS:
                hold[name] += getattr(stats, name)
            for pod, n in stats.pods.items():
                pods[pod] = pods.get(pod, 0.0) + n
        return SourceReading(
            fresh=fresh,
            reporters=len(self._latest),
            activators=len(self._latest),
            signals={SignalKind.CONCURRENCY: concurrency, SignalKind.QUEUE_DEPTH: float(buffered)},
            busy=concurrency > 0 or in_flight > 0 or buffered > 0,
            pod_load=pods,
            levels=Levels(awaiting_first_token=float(awaiting)),
            brought=self._brought.get(key),
            observed={
                "activator_concurrency": concurrency,
                "activator_in_flight": float(in_flight),
                "activator_buffered": float(buffered),
                "activator_arrivals": float(arrivals),
                "activator_awaiting_first_token": float(awaiting),
                **{f"activator_{name}": float(n) for name, n in hold.items()},
            },
        )
