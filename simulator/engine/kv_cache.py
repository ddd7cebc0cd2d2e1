"""An engine's KV cache: the slots its sequences hold, and the prefix blocks kept in the rest.

Both engine models (:class:`~simulator.engine.llm.LlmEngine`, the step
engine the fake vLLM serves from, and
:class:`~simulator.engine.jump.JumpEngine`) keep one :class:`KvCache` as
``engine.kv``, as vLLM's scheduler keeps its KV cache manager: what is
used and free (``usage`` is vLLM's ``kv_cache_usage_perc``), the prompt
tokens looked up in the prefix cache and found there (its
``prefix_cache_queries`` and ``prefix_cache_hits``), and the recorder of
its KV-cache events. The schedulers decide who runs; every slot taken or
freed goes through here, so the two engines cannot count memory apart.

Main decision: **a prefill chunk is as long as the budget, the prompt's
remainder and the free slots allow** (:meth:`KvCache.prefill`); a
sequence's first chunk first takes its leading cached blocks as already
prefilled, at least one prompt token always computed, as vLLM recomputes
the last one; its blocks enter the cache once its prefill is scheduled.
The cache keeps blocks in least-recently-used order and evicts the oldest
whenever the cached blocks and the running sequences' KV together exceed
the KV cache (a conservative reading: vLLM shares a running sequence's
cached blocks instead of counting them twice). A request without a prefix
never touches the cache.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from simulator.engine.params import LlmParams
from simulator.engine.prefix_cache import KvEventRecorder, PrefixCache

__all__ = ["KvCache", "Prefilling"]


class Prefilling(Protocol):
    """A sequence as the KV cache sees it while prefilling: its prompt blocks,
    its progress toward the tokens it must prefill, and the slots it holds."""

    prefix: tuple[Hashable, ...]
    prefilled: int
    prefill_target: int
    kv: int
    cached: int


class KvCache:
    """Slots used and free, the prefix cache, and its counts (module docstring)."""

    def __init__(self, params: LlmParams) -> None:
        self._capacity = params.kv_cache_tokens
        self._block_tokens = params.prefix_block_tokens
        self._prefix = PrefixCache(params.prefix_block_tokens)
        self.used = 0  # slots held by the sequences
        self.cached_tokens = 0  # prompt tokens served from the cache, all requests
        self.queried_tokens = 0  # prompt tokens of every request added (vLLM's cache queries)

    @property
    def free(self) -> int:
        return self._capacity - self.used

    @property
    def usage(self) -> float:
        """Share of the KV cache held, 0..1 (vLLM's ``kv_cache_usage_perc``)."""
        return self.used / self._capacity

    @property
    def events(self) -> KvEventRecorder | None:
        """The recorder of the prefix cache's changes (None: not asked for)."""
        return self._prefix.events

    @events.setter
    def events(self, recorder: KvEventRecorder | None) -> None:
        self._prefix.events = recorder

    def query(self, prompt_tokens: int) -> None:
        """A request was added: its prompt will be looked up in the prefix cache."""
        self.queried_tokens += prompt_tokens

    def hold(self, slots: int) -> None:
        """Sequences take ``slots`` more (tokens decoded or sampled)."""
        self.used += slots

    def release(self, slots: int) -> None:
        """Sequences give ``slots`` back (finished, preempted, aborted)."""
        self.used -= slots

    def prefill(self, seq: Prefilling, budget: int) -> int:
        """Schedule up to ``budget`` prompt tokens of ``seq`` where the cache has room;
        the chunk (0: no room)."""
        if seq.prefix and seq.prefilled == 0:
            self._reuse_prefix(seq)
        chunk = min(seq.prefill_target - seq.prefilled, budget, self._capacity - self.used)
        if chunk <= 0:
            return 0
        seq.prefilled += chunk
        seq.kv += chunk
        self.used += chunk
        if seq.prefix and seq.prefilled >= seq.prefill_target:
            self._prefix.store(seq.prefix, self._capacity - self.used)
        return chunk

    def _reuse_prefix(self, seq: Prefilling) -> None:
        """Take the cached leading blocks of ``seq``'s prompt as prefilled."""
        hits = self._prefix.touch_leading(seq.prefix)
        free = self._capacity - self.used
        cached = min(hits * self._block_tokens, seq.prefill_target - 1, free)
        if cached <= 0:
            return
        seq.prefilled = cached
        seq.kv += cached
        self.used += cached
        seq.cached += cached
        self.cached_tokens += cached
        self._prefix.evict(self._capacity - self.used)

    def reset_prefix_cache(self) -> None:
        """Drop every cached block (vLLM's ``/reset_prefix_cache``)."""
        self._prefix.clear()
