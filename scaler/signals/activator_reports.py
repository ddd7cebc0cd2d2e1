"""Activator reports: the activator view of demand (docs/architecture.md, "The scaler").

Every activator posts its per-target counts every ``period_s`` (1 s). The
store keeps only each activator's latest report, stamped with the time it
*arrived* (the sender's clock is never trusted), and sums over activators
when read: three activators each holding 2 requests for a target is 6.

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

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from scaler.policy.api import PROMPT_SIZE_BOUNDS, SignalKind
from scaler.signals.base import COUNTS, SourceReading
from scaler.signals.names import ACTIVATOR

__all__ = ["ActivatorReport", "ActivatorReports", "ReportError", "TargetStats", "parse_report"]


class ReportError(ValueError):
    """A report body that does not have the shape of a report (see :func:`parse_report`)."""


@dataclass(frozen=True, slots=True)
class TargetStats:
    """One activator's counts for one target over one period."""

    concurrency: float  # time-weighted mean of in_flight + buffered
    in_flight: int
    buffered: int
    arrivals: int
    pods: Mapping[str, int] = field(default_factory=dict)  # in-flight per replica
    # Tokens, for SLO-first scaling (all optional in a report, 0 when absent):
    # prompt tokens and max_tokens of the requests that arrived in the period,
    # the requests whose first token came back in it and their prompt tokens,
    # and the requests held or sent with no first token yet at its end.
    prompt_tokens: int = 0
    output_tokens: int = 0
    first_tokens: int = 0
    prefilled_tokens: int = 0
    awaiting_first_token: int = 0
    # The fastest prefill among those first tokens: prompt tokens over the time
    # from reaching a replica to the first token (0: none).
    best_prefill_tokens_per_s: float = 0.0
    # Held requests by priority class at the period's end, and those shed in
    # it (optional in a report; shown by `tidal status`, never acted on).
    held_critical: int = 0
    held_standard: int = 0
    held_sheddable: int = 0
    shed: int = 0
    # LoRA adapter loads replicas refused in the period (each names the replica,
    # the adapter and its answer), for an AdapterLoadRefused Event.
    adapter_refusals: tuple[str, ...] = ()
    # Arrivals in the period with prompts longer than each of the policy's
    # PROMPT_SIZE_BOUNDS (empty: not counted).
    prompts_over: tuple[int, ...] = ()


# A report's refusals per target beyond this are dropped, each cut to this length.
MAX_ADAPTER_REFUSALS = 10
MAX_REFUSAL_CHARS = 500


def _refusals(raw: object, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(r, str) for r in raw):
        raise ReportError(f"{where}: expected a list of strings, got {raw!r}")
    return tuple(r[:MAX_REFUSAL_CHARS] for r in raw[:MAX_ADAPTER_REFUSALS])


# TargetStats' optional count fields, as named in a report.
_TOKEN_FIELDS = (
    "prompt_tokens",
    "output_tokens",
    "first_tokens",
    "prefilled_tokens",
    "awaiting_first_token",
    "held_critical",
    "held_standard",
    "held_sheddable",
    "shed",
)
# Summed over the activators into the reading's observed values, as named there.
_HOLD_FIELDS = ("held_critical", "held_standard", "held_sheddable", "shed")


@dataclass(frozen=True, slots=True)
class ActivatorReport:
    activator: str
    period_s: float
    targets: Mapping[str, TargetStats]


def _number(value: object, where: str, *, integer: bool = False) -> float:
    # bool is an int in Python; a JSON true is not a count.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReportError(f"{where}: expected a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ReportError(f"{where}: expected a finite number >= 0, got {value!r}")
    if integer and value != int(value):
        raise ReportError(f"{where}: expected a whole number, got {value!r}")
    return float(value)


def _target_key(key: object) -> str:
    if not isinstance(key, str) or key.count("/") != 1 or "" in key.split("/"):
        raise ReportError(f"targets: keys must be 'namespace/name', got {key!r}")
    return key


def parse_report(payload: object, *, max_targets: int = 100_000) -> ActivatorReport:
    """Validate a ``POST /v1/stats`` body; :class:`ReportError` says what is wrong."""
    if not isinstance(payload, dict):
        raise ReportError("body: expected a JSON object")
    activator = payload.get("activator")
    if not isinstance(activator, str) or not activator or len(activator) > 253:
        raise ReportError(f"activator: expected a non-empty name (<= 253 chars), got {activator!r}")
    period_s = _number(payload.get("period_s", 1.0), "period_s")
    if not 0.05 <= period_s <= 60:
        raise ReportError(f"period_s: expected 0.05..60 seconds, got {period_s!r}")
    raw_targets = payload.get("targets", {})
    if not isinstance(raw_targets, dict):
        raise ReportError("targets: expected an object keyed by 'namespace/name'")
    if len(raw_targets) > max_targets:
        raise ReportError(f"targets: at most {max_targets} per report, got {len(raw_targets)}")
    targets: dict[str, TargetStats] = {}
    for raw_key, raw in raw_targets.items():
        key = _target_key(raw_key)
        if not isinstance(raw, dict):
            raise ReportError(f"targets[{key}]: expected an object")
        pods_raw = raw.get("pods", {})
        if not isinstance(pods_raw, dict):
            raise ReportError(f"targets[{key}].pods: expected an object of pod -> in-flight")
        pods = {
            str(pod): int(_number(n, f"targets[{key}].pods[{pod}]", integer=True))
            for pod, n in pods_raw.items()
        }
        targets[key] = TargetStats(
            concurrency=_number(raw.get("concurrency", 0), f"targets[{key}].concurrency"),
            in_flight=int(
                _number(raw.get("in_flight", 0), f"targets[{key}].in_flight", integer=True)
            ),
            buffered=int(_number(raw.get("buffered", 0), f"targets[{key}].buffered", integer=True)),
            arrivals=int(_number(raw.get("arrivals", 0), f"targets[{key}].arrivals", integer=True)),
            pods=pods,
            **{
                name: int(_number(raw.get(name, 0), f"targets[{key}].{name}", integer=True))
                for name in _TOKEN_FIELDS
            },
            best_prefill_tokens_per_s=_number(
                raw.get("best_prefill_tokens_per_s", 0), f"targets[{key}].best_prefill_tokens_per_s"
            ),
            adapter_refusals=_refusals(
                raw.get("adapter_refusals"), f"targets[{key}].adapter_refusals"
            ),
            prompts_over=_prompts_over(raw.get("prompts_over", []), key),
        )
    return ActivatorReport(activator=activator, period_s=period_s, targets=targets)


def _prompts_over(raw: object, key: str) -> tuple[int, ...]:
    where = f"targets[{key}].prompts_over"
    if not isinstance(raw, list) or len(raw) not in (0, len(PROMPT_SIZE_BOUNDS)):
        raise ReportError(
            f"{where}: expected a list of {len(PROMPT_SIZE_BOUNDS)} counts, one per prompt "
            f"size bound {[int(b) for b in PROMPT_SIZE_BOUNDS]}, got {raw!r}"
        )
    return tuple(int(_number(n, f"{where}[{i}]", integer=True)) for i, n in enumerate(raw))


@dataclass(frozen=True, slots=True)
class _Received:
    report: ActivatorReport
    arrived_at: float


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
            return SourceReading(source=ACTIVATOR, fresh=False, reporters=0)
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
            source=ACTIVATOR,
            fresh=fresh,
            reporters=len(self._latest),
            activators=len(self._latest),
            concurrency=concurrency,
            queue_depth=float(buffered),
            busy=concurrency > 0 or in_flight > 0 or buffered > 0,
            pod_load=pods,
            observed={
                "activator_concurrency": concurrency,
                "activator_in_flight": float(in_flight),
                "activator_buffered": float(buffered),
                "activator_arrivals": float(arrivals),
                "activator_awaiting_first_token": float(awaiting),
                **{f"activator_{name}": float(n) for name, n in hold.items()},
            },
        )
