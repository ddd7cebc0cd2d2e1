"""The engines' prefix cache, block by block in bulk, and the KV-cache events it records.

vLLM's automatic prefix caching as the engine models have it (their KV
cache, :mod:`simulator.engine.kv_cache`, decides when): blocks in
least-recently-used order, a request's leading cached blocks touched when
it is admitted, all its blocks stored (and touched) once its prefill is
scheduled, the oldest evicted while the cached blocks and the running
sequences' KV together exceed the KV cache, each change recorded as vLLM's
KV-cache events when a :class:`KvEventRecorder` is attached.

Main decision: a chat prompt is a hundred blocks, touched when it is
admitted and stored when it is prefilled; rather than a Python loop over
them, each operation is one pass of the C built-ins over the whole prefix (``takewhile`` over the
membership test, ``move_to_end`` mapped over the blocks, ``popitem``
repeated), which leaves the blocks in exactly the order the one-by-one
walk does.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Hashable
from itertools import repeat, starmap, takewhile

__all__ = ["KvEventRecorder", "PrefixCache"]


class KvEventRecorder:
    """A cache's changes as vLLM's KV-cache events, in the layout its msgpack decodes to.

    ``[tag, fields...]`` per event: ``["BlockStored", block_hashes,
    parent_block_hash, token_ids, block_size, lora_id, medium]`` (no token
    ids: the model has none), ``["BlockRemoved", block_hashes, medium]``,
    ``["AllBlocksCleared"]``. It starts with a clear, so that a subscriber
    starts from an empty cache.
    """

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._events: list[list[object]] = [["AllBlocksCleared"]]

    def stored(self, blocks: list[Hashable], parent: Hashable | None) -> None:
        self._events.append(["BlockStored", blocks, parent, [], self.block_size, None, None])

    def removed(self, blocks: list[Hashable]) -> None:
        self._events.append(["BlockRemoved", blocks, None])

    def cleared(self) -> None:
        self._events.append(["AllBlocksCleared"])

    def take(self) -> list[list[object]]:
        """The events since the last call."""
        events, self._events = self._events, []
        return events


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
