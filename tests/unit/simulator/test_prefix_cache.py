"""Prefix caching and the context length in the engine model and the world.

Covers: a request whose leading blocks an earlier one brought prefills only
the rest (TTFT drops), the cache forgets the least recently used blocks
when the KV cache needs the room, a request without a prefix never touches
the cache; in the world, a trace that shares prefixes gets lower TTFT when
it carries them (and exactly the old TTFT without), and a prompt at or over
the context length is refused and counted as failed.
"""

from __future__ import annotations

from dataclasses import replace

from simulator.baselines import AlwaysOn
from simulator.engine import LlmEngine, LlmParams
from simulator.scorecard import score
from simulator.traces import TraceRequest
from simulator.world import ColdStart, WorldConfig, run_world

PARAMS = LlmParams(prefix_block_tokens=512)


def first_token_s(engine: LlmEngine, request_id: int, now: float) -> float:
    """Step ``engine`` from ``now`` until ``request_id`` has its first token."""
    while True:
        plan = engine.begin_step(now)
        assert plan is not None
        outcome = engine.end_step()
        now = outcome.end_s
        if request_id in outcome.first:
            return now


def test_a_shared_prefix_is_prefilled_once() -> None:
    engine = LlmEngine(PARAMS)
    engine.add(1, prompt_tokens=4096, output_tokens=1, now=0.0, prefix=tuple(range(8)))
    cold = first_token_s(engine, 1, 0.0)
    engine.add(2, prompt_tokens=4096, output_tokens=1, now=cold, prefix=tuple(range(8)))
    warm = first_token_s(engine, 2, cold) - cold
    assert engine.kv.cached_tokens == 4095  # all but the last token, recomputed as vLLM does
    assert warm < cold / 10
    # Another prompt starting with the same 4 blocks reuses exactly those.
    engine.add(3, prompt_tokens=4096, output_tokens=1, now=1.0, prefix=(0, 1, 2, 3, 90, 91, 92, 93))
    first_token_s(engine, 3, 1.0)
    assert engine.kv.cached_tokens == 4095 + 4 * 512


def test_the_least_recently_used_blocks_go_when_the_kv_cache_needs_room() -> None:
    engine = LlmEngine(replace(PARAMS, kv_cache_tokens=4096, max_num_batched_tokens=4096))
    engine.add(1, prompt_tokens=2048, output_tokens=1, now=0.0, prefix=(1, 2, 3, 4))
    first_token_s(engine, 1, 0.0)
    engine.add(2, prompt_tokens=2048, output_tokens=1, now=1.0, prefix=(5, 6, 7, 8))
    first_token_s(engine, 2, 1.0)
    # Blocks 1..4 were used least recently: the cache (4096 tokens) dropped them.
    engine.add(3, prompt_tokens=2048, output_tokens=1, now=2.0, prefix=(1, 2, 3, 4))
    first_token_s(engine, 3, 2.0)
    assert engine.kv.cached_tokens == 0


def test_no_prefix_no_cache() -> None:
    engine = LlmEngine(PARAMS)
    for i in range(3):
        engine.add(i, prompt_tokens=1024, output_tokens=1, now=float(i))
        first_token_s(engine, i, float(i))
    assert engine.kv.cached_tokens == 0


def shared_prefix_trace(*, with_prefix: bool) -> list[TraceRequest]:
    # A 6,000-token system prompt (12 blocks) shared by every request, 200 own tokens.
    return [
        TraceRequest(
            i * 0.25,
            6200,
            10,
            prefix=(*range(12), 1000 + i) if with_prefix else (),
        )
        for i in range(200)
    ]


def test_a_trace_sharing_prefixes_gets_lower_ttft_when_it_says_so() -> None:
    config = WorldConfig(cold_start=ColdStart(5.0))
    plain = score(run_world(shared_prefix_trace(with_prefix=False), AlwaysOn(1), config))
    cached = score(run_world(shared_prefix_trace(with_prefix=True), AlwaysOn(1), config))
    assert plain.ttft_p50_s is not None and cached.ttft_p50_s is not None
    assert cached.ttft_p50_s < plain.ttft_p50_s / 5
    assert cached.gpu_seconds_busy < plain.gpu_seconds_busy


def test_a_prompt_over_the_context_length_is_refused_and_counted() -> None:
    config = WorldConfig(engine=LlmParams(max_model_len=8192))
    requests = [
        TraceRequest(0.0, 1000, 5),
        TraceRequest(1.0, 9000, 5),
        TraceRequest(2.0, 8000, 500),
    ]
    card = score(run_world(requests, AlwaysOn(1), config))
    assert card.failed_by_reason == {"context-length": 1}
    assert card.completed == 2  # the 8,000-token prompt stops at the context length
    assert card.slo_attainment < 1
