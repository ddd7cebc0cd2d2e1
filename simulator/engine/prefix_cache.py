"""The prefix cache of :class:`~simulator.engine.jump.JumpEngine`, block by block in bulk.

The same cache as :class:`~simulator.engine.llm.LlmEngine`'s (vLLM's
automatic prefix caching as modelled there): blocks in least-recently-used
order, a request's leading cached blocks touched when it is admitted, all
its blocks stored (and touched) once its prefill is scheduled, the oldest
evicted while the cached blocks and the running sequences' KV together
exceed the KV cache, each change recorded as vLLM's KV-cache events when a
recorder is attached.

Main decision: a chat prompt is a hundred blocks and the step engine walks
them one by one in Python; here each operation is one pass of the C
built-ins over the whole prefix (``takewhile`` over the membership test,
``move_to_end`` mapped over the blocks, ``popitem`` repeated), which leaves
the blocks in exactly the order the one-by-one walk does.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Hashable
from itertools import repeat, starmap, takewhile

from simulator.engine.llm import KvEventRecorder

__all__ = ["PrefixCache"]


class PrefixCache:
    """Cached prompt blocks, least recently used first."""

    def __init__(self, block_tokens: int) -> None:
        self.block_tokens = block_tokens
        self.blocks: OrderedDict[Hashable, None] = OrderedDict()
        self.events: KvEventRecorder | None = None

    def touch_leading(self, prefix: tuple[Hashable, ...]) -> int:
        """How many of ``prefix``'s leading blocks are cached; they become the newest."""
        blocks = self.blocks
        hits = len(list(takewhile(blocks.__contains__, prefix)))
        if hits:
            deque(map(blocks.move_to_end, prefix[:hits]), maxlen=0)
        return hits

    def store(self, prefix: tuple[Hashable, ...], room_tokens: int) -> None:
        """Every block of ``prefix`` cached and newest, then evict to ``room_tokens``."""
        blocks = self.blocks
        if self.events is not None:
            stored = list(dict.fromkeys(b for b in prefix if b not in blocks))
            if stored:
                first = prefix.index(stored[0])
                self.events.stored(stored, prefix[first - 1] if first else None)
        blocks.update(dict.fromkeys(prefix))
        deque(map(blocks.move_to_end, prefix), maxlen=0)
        self.evict(room_tokens)

    def evict(self, room_tokens: int) -> None:
        """Drop the oldest blocks until the rest fit in ``room_tokens``."""
        blocks = self.blocks
        keep = room_tokens // self.block_tokens if room_tokens > 0 else 0
        extra = len(blocks) - keep
        if extra <= 0:
            return
        if self.events is None:
            deque(starmap(blocks.popitem, repeat((False,), extra)), maxlen=0)
            return
        self.events.removed([blocks.popitem(False)[0] for _ in range(extra)])

    def clear(self) -> None:
        self.blocks.clear()
        if self.events is not None:
            self.events.cleared()
