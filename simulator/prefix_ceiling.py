"""The ceilings a prefix router's hit rate is measured against.

A router can only send a prompt where its prefix is cached if some cache
still holds it. Two ceilings, both over the trace in arrival order:

- **infinite** (:func:`simulator.oracle.cacheable_tokens`): every block
  any earlier request carried is cached. No fleet reaches it: caches are
  finite, and what a replica evicts is gone.
- **finite** (:func:`fleet_cache_hit_rate`): one cache with the fleet's
  total KV capacity (replicas x each one's KV cache, in blocks), least
  recently used evicted first, as vLLM's own cache evicts. This is what a
  perfect router could reach with no duplication at all: n replicas each
  holding a different part of the working set are at best one cache n
  times as large; a prefix cached on two replicas takes room twice. It is
  the yardstick for "how much of what the fleet could hold did routing
  find".

Both count prompt tokens as vLLM's ``prefix_cache_hits /
prefix_cache_queries`` does, at most ``prompt - 1`` tokens a request (vLLM
always computes the last token), matching the engine model.

Main decision: the finite ceiling gives the whole KV capacity to cached
blocks, where a real replica also holds its running sequences' KV; so the
ceiling is a little high, never low (a router reaching 0.8x of it reaches
at least that of the true one).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from simulator.oracle import cacheable_tokens
from simulator.traces import TraceRequest

__all__ = ["fleet_cache_hit_rate", "infinite_cache_hit_rate"]


def _capped(hits_tokens: int, prompt: int) -> int:
    return max(0, min(hits_tokens, prompt - 1))


def infinite_cache_hit_rate(requests: Sequence[TraceRequest], block_tokens: int) -> float:
    """Prompt tokens an infinitely large cache serves over all prompt tokens."""
    prompt = sum(r.prompt_tokens for r in requests)
    found = cacheable_tokens(requests, block_tokens)
    hits = sum(_capped(h, r.prompt_tokens) for h, r in zip(found, requests, strict=True))
    return hits / prompt if prompt else 0.0


def fleet_cache_hit_rate(
    requests: Sequence[TraceRequest], block_tokens: int, capacity_blocks: int
) -> float:
    """Prompt tokens one LRU cache of ``capacity_blocks`` serves over all prompt tokens."""
    if capacity_blocks < 1:
        raise ValueError(f"capacity_blocks must be at least 1, got {capacity_blocks}")
    cache: OrderedDict[int | str, None] = OrderedDict()
    hits = prompt = 0
    for r in requests:
        prompt += r.prompt_tokens
        matched = 0
        for block in r.prefix:
            if block not in cache:
                break
            matched += 1
        hits += _capped(matched * block_tokens, r.prompt_tokens)
        for block in r.prefix:
            cache[block] = None
            cache.move_to_end(block)
        while len(cache) > capacity_blocks:
            cache.popitem(last=False)
    return hits / prompt if prompt else 0.0
