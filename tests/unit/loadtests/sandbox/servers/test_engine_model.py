"""The pure performance model (simulator.engine) on a simulated clock.

Covers:
- defaults reproduce the published vLLM figures they came from, within stated
  tolerances: light load (10 prompts at once, Lambda [L1]: TTFT 62.4 ms, ~7.2 ms
  per decode step) and saturation (ShareGPT lengths, 256 seqs, Lambda [L2]:
  8088 output tokens/s, median TPOT 25.6 ms);
- TTFT grows with prompt tokens, step time with batch size;
- requests past max_num_seqs wait and show as waiting; KV usage follows tokens
  held; a small KV cache forces preemption yet every request completes;
- aborting frees the request's place; GPU busy time is the sum of step times;
- the dynamic batcher: batches up to max_batch_size, pending count, queue and
  compute durations; the utilization meter;
- bad parameters get clear errors.
"""

from __future__ import annotations

import statistics

import pytest

from simulator.engine import (
    Arrival,
    BatcherParams,
    DynamicBatcher,
    LlmEngine,
    LlmParams,
    UtilizationMeter,
    simulate,
)

# [L1] input and output lengths of the 10 ShareGPT prompts in Lambda's run.
L1_PROMPTS = [13, 25, 27, 10, 329, 29, 399, 328, 4, 205]
L1_OUTPUTS = [120, 429, 233, 194, 101, 741, 9, 3, 6, 31]


def test_light_load_matches_published_ttft_and_step_time() -> None:
    result = simulate([Arrival(0.0, p, o) for p, o in zip(L1_PROMPTS, L1_OUTPUTS, strict=True)])
    ttft_ms = statistics.mean(r.ttft_s for r in result.records) * 1000
    assert ttft_ms == pytest.approx(62.4, rel=0.20)  # published mean TTFT 62.4 ms
    tpot_ms = statistics.median(r.tpot_s for r in result.records if r.output_tokens > 1) * 1000
    assert tpot_ms == pytest.approx(7.56, rel=0.15)  # published median TPOT 7.56 ms


def test_saturation_matches_published_throughput() -> None:
    # ShareGPT averages 202 in / 179 out [V1]; 2000 requests keep 256 running.
    result = simulate([Arrival(0.0, 202, 179) for _ in range(2000)])
    assert result.output_tokens_per_s == pytest.approx(8088, rel=0.15)
    median_tpot_ms = statistics.median(r.tpot_s for r in result.records) * 1000
    # Published median TPOT 25.6 ms; our fixed lengths make every request see the
    # same prefill interruptions, so we read ~16% high: tolerance 25%.
    assert median_tpot_ms == pytest.approx(25.6, rel=0.25)
    assert result.max_waiting == 2000  # all queued before the first step admits 256


@pytest.mark.parametrize(
    ("load", "expected_range_ms"),
    [
        # 200 prompt tokens at 25,000/s = 8 ms, plus the 6.7 ms step base.
        pytest.param(1, (13, 16), id="one request: its prefill plus a step base"),
        # 32 x 200 = 6400 tokens fit one 8192-token step: 256 ms + base.
        pytest.param(32, (250, 275), id="32 at once: one batched prefill"),
        # 51,200 prompt tokens need 7 steps of 8192: the median waits ~3 of them.
        pytest.param(256, (800, 1600), id="256 at once: prefill spread over steps"),
    ],
)
def test_ttft_grows_with_load(load: int, expected_range_ms: tuple[float, float]) -> None:
    result = simulate([Arrival(0.0, 200, 50) for _ in range(load)])
    p50 = statistics.median(r.ttft_s for r in result.records) * 1000
    low, high = expected_range_ms
    assert low <= p50 <= high


def test_ttft_grows_with_prompt_tokens_and_step_time_with_batch() -> None:
    short = simulate([Arrival(0.0, 100, 2)]).records[0].ttft_s
    long = simulate([Arrival(0.0, 4000, 2)]).records[0].ttft_s
    assert long - short == pytest.approx(3900 / LlmParams().prefill_tokens_per_s, rel=1e-6)
    p = LlmParams()
    assert p.step_time_s(decoding=200, prefill_tokens=0) > p.step_time_s(
        decoding=10, prefill_tokens=0
    )


def test_requests_past_max_num_seqs_wait() -> None:
    engine = LlmEngine(LlmParams(max_num_seqs=4))
    for rid in range(10):
        engine.add(rid, prompt_tokens=10, output_tokens=100, now=0.0)
    assert engine.num_waiting == 10  # nothing is admitted before a step starts
    plan = engine.begin_step(0.0)
    assert plan is not None
    assert (engine.num_running, engine.num_waiting) == (4, 6)
    outcome = engine.end_step()
    assert sorted(outcome.first) == [0, 1, 2, 3]


def test_kv_usage_follows_tokens_held() -> None:
    engine = LlmEngine(LlmParams(kv_cache_tokens=1000, max_num_batched_tokens=512))
    engine.add(1, prompt_tokens=100, output_tokens=3, now=0.0)
    engine.begin_step(0.0)
    engine.end_step()  # prefill + first token
    assert engine.kv.used == 101
    assert engine.kv.usage == pytest.approx(0.101)
    plan = engine.begin_step(1.0)
    assert plan is not None
    engine.end_step()
    assert engine.kv.used == 102
    engine.begin_step(2.0)
    outcome = engine.end_step()
    assert outcome.finished == (1,)
    assert engine.kv.used == 0


def test_small_kv_cache_preempts_and_still_completes_everything() -> None:
    params = LlmParams(kv_cache_tokens=600, max_num_seqs=8, max_num_batched_tokens=600)
    result = simulate([Arrival(0.0, 100, 150) for _ in range(8)], params)
    assert len(result.records) == 8
    engine = LlmEngine(params)
    for rid in range(8):
        engine.add(rid, prompt_tokens=100, output_tokens=150, now=0.0)
    now = 0.0
    while engine.has_work:
        plan = engine.begin_step(now)
        assert plan is not None
        assert engine.kv.used <= params.kv_cache_tokens
        now = engine.end_step().end_s
    assert engine.preemptions > 0


def test_abort_frees_the_place() -> None:
    engine = LlmEngine(LlmParams(max_num_seqs=1))
    engine.add(1, prompt_tokens=10, output_tokens=1000, now=0.0)
    engine.add(2, prompt_tokens=10, output_tokens=5, now=0.0)
    engine.begin_step(0.0)
    engine.abort(1)  # mid-step: removed when the step ends
    outcome = engine.end_step()
    assert outcome.emitted == ()
    assert engine.kv.used == 0
    engine.begin_step(outcome.end_s)
    assert engine.end_step().first == (2,)


def test_busy_time_is_the_sum_of_steps() -> None:
    engine = LlmEngine()
    engine.add(1, prompt_tokens=50, output_tokens=3, now=0.0)
    total = 0.0
    now = 0.0
    while engine.has_work:
        plan = engine.begin_step(now)
        assert plan is not None
        assert engine.busy_time_s(plan.start_s + plan.duration_s / 2) == pytest.approx(
            total + plan.duration_s / 2
        )
        total += plan.duration_s
        now = engine.end_step().end_s + 1.0  # idle gap: not busy
    assert engine.busy_time_s(now + 5) == pytest.approx(total)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"max_num_seqs": 0}, "max_num_seqs", id="no sequences"),
        pytest.param({"max_num_batched_tokens": 8}, "max_num_batched_tokens", id="budget"),
        pytest.param({"prefill_tokens_per_s": 0.0}, "prefill_tokens_per_s", id="prefill"),
        pytest.param({"step_base_s": float("nan")}, "step_base_s", id="nan"),
    ],
)
def test_bad_params_are_named(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LlmParams(**kwargs)  # type: ignore[arg-type]


def test_request_larger_than_the_cache_is_refused() -> None:
    engine = LlmEngine(LlmParams(kv_cache_tokens=1000, max_num_batched_tokens=512))
    with pytest.raises(ValueError, match="cache holds 1000"):
        engine.add(1, prompt_tokens=900, output_tokens=200, now=0.0)


def test_dynamic_batcher_batches_and_reports_queue_and_compute() -> None:
    batcher = DynamicBatcher(
        BatcherParams(max_batch_size=4, exec_base_s=0.01, exec_per_item_s=0.001)
    )
    for rid, items in enumerate([2, 2, 1, 4]):
        batcher.add(rid, items=items, now=0.0)
    assert batcher.pending == 4
    plan = batcher.begin_batch(0.0)
    assert plan is not None
    assert (plan.requests, plan.items) == (2, 4)
    assert batcher.pending == 2
    first = batcher.end_batch()
    assert first.done == {0: (0.0, pytest.approx(0.014)), 1: (0.0, pytest.approx(0.014))}
    plan = batcher.begin_batch(first.end_s)
    assert plan is not None
    assert plan.items == 1
    second = batcher.end_batch()
    assert second.done[2][0] == pytest.approx(0.014)  # queued while the first batch ran
    assert batcher.busy_time_s(10.0) == pytest.approx(0.014 + 0.011)


def test_utilization_meter_reads_busy_share_of_each_period() -> None:
    meter = UtilizationMeter(min_period_s=1.0)
    assert meter.read(now=0.0, busy_s=0.0) == 0.0
    assert meter.read(now=2.0, busy_s=1.5) == pytest.approx(0.75)
    assert meter.read(now=2.5, busy_s=2.0) == pytest.approx(0.75)  # too soon: repeats
    assert meter.read(now=4.0, busy_s=2.0) == pytest.approx(0.25)
