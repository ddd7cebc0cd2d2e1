"""What a trace looks like (:func:`summarize`), and whether its time unit is plausible.

:func:`unit_warnings` says when a trace's span or rate suggests its
timestamps were read in the wrong unit (milliseconds read as seconds, or
the other way): a warning naming the flag to set, not an error, since an
unusual trace can be right.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from simulator.traces.records import TraceError, TraceFormat, TraceRequest

__all__ = ["TraceSummary", "summarize", "unit_warnings"]


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """What a trace looks like, for logs and sanity checks."""

    requests: int
    duration_s: float
    requests_per_min: float
    median_prompt_tokens: int
    median_output_tokens: int
    longest_gap_s: float


def summarize(records: Sequence[TraceRequest]) -> TraceSummary:
    """Counts, rate, medians and the longest idle gap of a trace."""
    if not records:
        raise TraceError("cannot summarize an empty trace")
    duration_s = records[-1].offset_s - records[0].offset_s
    prompts = sorted(r.prompt_tokens for r in records)
    outputs = sorted(r.output_tokens for r in records)
    gaps = [b.offset_s - a.offset_s for a, b in itertools.pairwise(records)]
    return TraceSummary(
        requests=len(records),
        duration_s=duration_s,
        requests_per_min=len(records) / duration_s * 60 if duration_s > 0 else float("inf"),
        median_prompt_tokens=prompts[len(prompts) // 2],
        median_output_tokens=outputs[len(outputs) // 2],
        longest_gap_s=max(gaps, default=0.0),
    )


# A trace of one model's LLM requests longer than this, or faster than this
# on average, was almost surely read in the wrong unit: milliseconds read as
# seconds make the Azure hour 41 days; seconds read as milliseconds make it
# 3.6 s at 2,450 requests a second, which no fleet of ten GPUs serves.
_LONGEST_PLAUSIBLE_S = 7 * 86400.0
_FASTEST_PLAUSIBLE_RPS = 1_000.0


def unit_warnings(records: Sequence[TraceRequest], fmt: TraceFormat) -> list[str]:
    """Why the trace's span or rate suggests a wrong ``time_unit`` (empty: plausible)."""
    if len(records) < 2:
        return []
    span = records[-1].offset_s - records[0].offset_s
    out: list[str] = []
    if span > _LONGEST_PLAUSIBLE_S and fmt.time_unit == "s":
        out.append(
            f"the trace spans {span / 86400:.1f} days with timestamps read as seconds; if they "
            "are milliseconds, pass --time-unit ms"
        )
    rate = len(records) / span if span > 0 else math.inf
    if rate > _FASTEST_PLAUSIBLE_RPS:
        hint = (
            "if they are seconds, leave out --time-unit ms"
            if fmt.time_unit == "ms"
            else "check --time-field and --time-unit"
        )
        out.append(
            f"{len(records)} requests within {span:.3g} s ({rate:,.0f} per second) with "
            f"timestamps read as {'milliseconds' if fmt.time_unit == 'ms' else 'seconds'}; {hint}"
        )
    return out
