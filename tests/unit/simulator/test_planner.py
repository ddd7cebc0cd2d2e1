"""The planner sizes prefill and decode as Dynamo's does (simulator.planner, simulator.profile).

Covers:
- the profiles read off the engine model: prefill throughput is a prompt
  over its lone TTFT; decode throughput is the largest batch within the
  inter-token objective, the KV cache and max_num_seqs;
- every 180 s the planner asks for ceil(predicted prompt tokens/s over
  prefill throughput + predicted output tokens/s over decode throughput),
  the two phases' shares of an aggregated replica, never below one nor over
  the ceiling; an idle interval asks for one, and below its minimum it asks
  for the minimum at once;
- its ARIMA predictor follows a trend and keeps Dynamo's guard rails
  (leading zeros skipped, short or flat history: the last value).
"""

from __future__ import annotations

import pytest

from simulator.engine import LlmParams
from simulator.planner import ArimaPredictor, Planner
from simulator.profile import decode_tokens_per_s, prefill_tokens_per_s
from simulator.world import View


def test_prefill_profile_is_a_prompt_over_its_lone_ttft() -> None:
    params = LlmParams()
    # 10,000 tokens: two chunks of at most 8,192, two step bases.
    ttft = 2 * params.step_base_s + 10_000 / params.prefill_tokens_per_s
    assert prefill_tokens_per_s(params, 10_000) == pytest.approx(10_000 / ttft)


@pytest.mark.parametrize(
    ("isl", "osl", "itl", "batch"),
    [
        # Latency binds: (50 - 6.68) ms / 0.052 ms = 833 > 256: max_num_seqs binds.
        pytest.param(1000, 100, 0.05, 256, id="max-num-seqs"),
        # (10 - 6.68) / 0.052 = 63.8: 63 sequences.
        pytest.param(1000, 100, 0.010, 63, id="latency"),
        # 400,000 / (100,000 + 50) = 3 sequences fit the KV cache.
        pytest.param(100_000, 100, 0.05, 3, id="kv-cache"),
    ],
)
def test_decode_profile_takes_the_largest_batch_within_every_limit(
    isl: int, osl: int, itl: float, batch: int
) -> None:
    params = LlmParams()
    step = params.step_base_s + params.step_per_seq_s * batch
    assert decode_tokens_per_s(params, isl, osl, itl) == pytest.approx(batch / step)


def _drive(planner: Planner, seconds: int, *, arrivals: int, isl: int, osl: int) -> list[int]:
    made = []
    for t in range(1, seconds + 1):
        seen = View(
            now=float(t),
            ready=1,
            spec=1,
            concurrency=1.0,
            busy=arrivals > 0,
            held=0,
            in_flight=1,
            arrivals=arrivals,
            arrival_prompt_tokens=arrivals * isl,
            arrival_output_tokens=arrivals * osl,
        )
        decision = planner.tick(seen, activation=False)
        if decision is not None:
            made.append(decision)
    return made


@pytest.mark.parametrize(
    ("prefill", "decode", "want", "shares"),
    [
        # 25 requests/s x 1000 tokens = 25,000 tokens/s over 10,000: 2.5
        # replicas' worth of prefill; 25 x 50 = 1,250 tokens/s over 1,000: 1.25
        # of decode; together 3.75, so 4.
        pytest.param(10_000.0, 1_000.0, 4, (2.5, 1.25), id="both"),
        pytest.param(100_000.0, 250.0, 6, (0.25, 5.0), id="decode-mostly"),
    ],
)
def test_planner_asks_for_the_sum_of_the_phases_shares_each_interval(
    prefill: float, decode: float, want: int, shares: tuple[float, float]
) -> None:
    seen: list[tuple[float, float]] = []

    def decode_profile(isl: float, osl: float) -> float:
        seen.append((isl, osl))
        return decode

    planner = Planner(prefill=lambda isl: prefill, decode=decode_profile, max_replicas=8)
    assert (planner.initial, planner.name) == (1, "planner")
    assert _drive(planner, 360, arrivals=25, isl=1000, osl=50) == [want, want]
    assert planner.last_shares == pytest.approx(shares)
    assert seen[-1] == (1000.0, 50.0)


def test_planner_keeps_its_minimum_at_once_even_between_intervals() -> None:
    planner = Planner(prefill=lambda isl: 1.0, decode=lambda isl, osl: 1.0, max_replicas=8)
    empty = View(now=5.0, ready=0, spec=0, concurrency=1.0, busy=True, held=1, in_flight=0)
    assert planner.tick(empty, activation=True) == 1
    assert planner.tick(empty, activation=False) == 1


def test_planner_asks_for_one_when_idle_and_never_over_the_ceiling() -> None:
    idle = Planner(prefill=lambda isl: 1.0, decode=lambda isl, osl: 1.0, max_replicas=8)
    assert _drive(idle, 180, arrivals=0, isl=0, osl=0) == [1]
    busy = Planner(prefill=lambda isl: 1.0, decode=lambda isl, osl: 1.0, max_replicas=8)
    assert _drive(busy, 180, arrivals=5, isl=1000, osl=50) == [8]


def test_arima_predictor_follows_a_trend_and_keeps_the_guard_rails() -> None:
    predictor = ArimaPredictor()
    predictor.add(0.0)  # leading idle: skipped
    for value in (1.0, 2.0):
        predictor.add(value)
    assert predictor.predict() == 2.0  # too short: the last value
    for value in (3.0, 4.0, 5.0, 6.0):
        predictor.add(value)
    assert predictor.predict() == pytest.approx(7.0)
    flat = ArimaPredictor()
    for _ in range(6):
        flat.add(4.0)
    assert flat.predict() == 4.0
