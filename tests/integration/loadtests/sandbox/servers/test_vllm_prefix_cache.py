"""The fake vLLM's prefix cache: a chat's next turn skips the prefill of its history.

Covers: the second turn of a conversation is answered far faster than the
first (its history's prefill is served from the cache) and
``vllm:prefix_cache_hits`` counts about the history's tokens, while
``vllm:prefix_cache_queries`` counts every prompt token; an unrelated prompt
of the same length hits nothing; a cache smaller than the history keeps
nothing of it; asked, the server serves its cache events (stored, then
evicted) in vLLM's layout.
"""

from __future__ import annotations

import time

import aiohttp

from loadtests.sandbox.servers.server import ModelServer
from tests.integration.loadtests.sandbox.servers.conftest import scrape, vllm_config

LABEL = '{model_name="m"}'
HISTORY = [
    {"role": "system", "content": "s" * 8_000},
    {"role": "user", "content": "u" * 16_000},
]


async def _chat(session: aiohttp.ClientSession, url: str, messages: object) -> tuple[float, int]:
    """Wall seconds for a one-token answer, and the prompt tokens the server counted."""
    started = time.perf_counter()
    body = {"model": "m", "messages": messages, "max_tokens": 1, "ignore_eos": True}
    async with session.post(f"{url}/v1/chat/completions", json=body) as resp:
        assert resp.status == 200
        usage = (await resp.json())["usage"]
    return time.perf_counter() - started, int(usage["prompt_tokens"])


async def test_the_next_turn_hits_the_cache_and_an_unrelated_prompt_does_not() -> None:
    # Speedup 1: the first turn's 6,000-token prefill takes ~0.25 s of wall time.
    async with ModelServer(vllm_config(speedup=1.0)) as server, aiohttp.ClientSession() as s:
        first_s, first_tokens = await _chat(s, server.url, HISTORY)
        turn = [*HISTORY, {"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]
        second_s, second_tokens = await _chat(s, server.url, turn)
        samples = await scrape(s, server.url)
        assert second_s < first_s / 3
        queries = samples[f"vllm:prefix_cache_queries_total{LABEL}"]
        hits = samples[f"vllm:prefix_cache_hits_total{LABEL}"]
        assert queries == first_tokens + second_tokens
        # The history's full 16-token blocks, within a block of the first prompt.
        assert first_tokens - 2 * 16 <= hits < first_tokens
        other = [{"role": "system", "content": "t" * 8_000}, HISTORY[1]]
        await _chat(s, server.url, other)
        after = await scrape(s, server.url)
        assert after[f"vllm:prefix_cache_hits_total{LABEL}"] == hits


async def test_a_cache_smaller_than_the_history_keeps_none_of_it() -> None:
    config = vllm_config(speedup=100.0, llm={"kv_cache_tokens": 6_100})
    async with ModelServer(config) as server, aiohttp.ClientSession() as s:
        await _chat(s, server.url, HISTORY)
        await _chat(s, server.url, [{"role": "user", "content": "v" * 24_000}])
        await _chat(s, server.url, HISTORY)
        samples = await scrape(s, server.url)
        assert samples[f"vllm:prefix_cache_hits_total{LABEL}"] == 0


async def test_asked_to_the_server_publishes_its_cache_events_in_vllms_layout() -> None:
    # Room for the history (~6,000 tokens) twice over, not beside a 12,000-token prompt.
    config = vllm_config(speedup=100.0, kv_events=True, llm={"kv_cache_tokens": 20_000})
    async with ModelServer(config) as server, aiohttp.ClientSession() as s:
        await _chat(s, server.url, HISTORY)
        async with s.get(f"{server.url}/kv_events", params={"after": "0"}) as resp:
            feed = await resp.json()
        events = [e for _, b in feed["batches"] for e in b[1]]
        # [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]
        assert [e[0] for e in events] == ["AllBlocksCleared", "BlockStored"]
        stored = events[1]
        assert len(stored) == 7 and stored[4] == 16 and stored[2] is None
        hashes = stored[1]
        assert len(hashes) == 6_000 // 16 and all(isinstance(h, int) for h in hashes)
        # A prompt that does not fit beside the history evicts all of it, oldest first.
        await _chat(s, server.url, [{"role": "user", "content": "v" * 48_000}])
        async with s.get(f"{server.url}/kv_events", params={"after": feed["next"]}) as resp:
            later = await resp.json()
        removed = [
            h for _, b in later["batches"] for e in b[1] if e[0] == "BlockRemoved" for h in e[1]
        ]
        assert removed[: len(hashes)] == hashes and not later["missed"]
        async with s.get(f"{server.url}/kv_events", params={"after": "x"}) as resp:
            assert resp.status == 400
