"""The two production shapes (simulator.production_shapes) have the statistics they claim.

Covers: steady long-prompt traffic at its mean rate, steady within a fifth
either side over ten-minute stretches, prompts median about 7k and p99 about
85k tokens, some over 100k; a reasoning evening whose outputs have a median
about 520 and a p99 about 10k tokens over short prompts, and whose rate
swings about fivefold from its ends to its middle; both reachable as
synthetic kinds and reproducible by seed.
"""

from __future__ import annotations

import statistics
from collections import Counter

from simulator.production_shapes import long_prompt, reasoning
from simulator.synthetic import KINDS, SyntheticSpec, generate


def _quantile(values: list[int], share: float) -> float:
    ordered = sorted(values)
    return ordered[int(share * (len(ordered) - 1))]


def test_long_prompts_are_steady_and_heavy_tailed() -> None:
    records = long_prompt(duration_s=3600, mean_per_min=200, seed=2)
    assert 200 * 60 * 0.9 <= len(records) <= 200 * 60 * 1.1
    stretches = Counter(int(r.offset_s // 600) for r in records)
    assert all(0.75 * 2000 <= stretches[i] <= 1.25 * 2000 for i in range(6))
    prompts = [r.prompt_tokens for r in records]
    assert 6_000 <= statistics.median(prompts) <= 8_000
    assert 65_000 <= _quantile(prompts, 0.99) <= 110_000
    assert min(prompts) < 1_000 and sum(p > 100_000 for p in prompts) >= 5
    assert 280 <= statistics.median(r.output_tokens for r in records) <= 400


def test_a_reasoning_evening_swings_fivefold_over_long_answers() -> None:
    records = reasoning(duration_s=6 * 3600, mean_per_min=60, seed=3)
    outputs = [r.output_tokens for r in records]
    assert 450 <= statistics.median(outputs) <= 600
    assert 7_000 <= _quantile(outputs, 0.99) <= 14_000
    assert 220 <= statistics.median(r.prompt_tokens for r in records) <= 320
    hours = Counter(int(r.offset_s // 1800) for r in records)
    middle = (hours[5] + hours[6]) / 2
    ends = (hours[0] + hours[11]) / 2
    assert 3.0 <= middle / ends <= 5.5  # the half-hours at the ends sit a little off the trough


def test_both_are_synthetic_kinds_reproducible_by_seed() -> None:
    for kind in ("long-prompt", "reasoning"):
        assert kind in KINDS
        spec = SyntheticSpec(kind=kind, duration_s=600, requests_per_min=120, seed=7)
        assert generate(spec) == generate(spec)
        assert generate(spec) != generate(SyntheticSpec(kind=kind, duration_s=600, seed=8))
