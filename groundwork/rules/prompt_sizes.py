"""The prompt sizes at which arrivals are counted, as the activator counts and the scaler reads.

The activator counts, per period, the arrivals whose estimated prompt is
longer than each bound, and reports the counts (``prompts_over`` in
``POST /v1/stats``, :mod:`groundwork.rules.stats_report`); the scaler reads
them against the same bounds to tell the share of requests whose prefill
alone cannot meet a TTFT objective (:mod:`scaler.policy.slo.sizing`). A
report whose counts do not have one entry per bound is refused, so the two
sides cannot drift: both import this tuple.

The bounds are vLLM's ``request_prompt_tokens`` histogram bounds, the part
of them that matters at objectives of seconds (a thousand tokens prefill in
tens of milliseconds; two hundred thousand take seconds).
"""

from __future__ import annotations

__all__ = ["PROMPT_SIZE_BOUNDS"]

#: Prompt sizes in tokens, rising.
PROMPT_SIZE_BOUNDS: tuple[int, ...] = (
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
)
