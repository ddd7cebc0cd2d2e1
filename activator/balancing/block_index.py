"""What each replica's prefix cache holds, as one router knows it: a block index.

vLLM keeps the KV of a prompt's full blocks after the request ends and
reuses the longest run of leading blocks it still holds. A router that
wants to send a prompt where most of it is cached needs, per replica, the
set of blocks that replica holds. This module keeps that set for every
replica in one index (block -> the replicas holding it), so that the
longest match of a prompt against all replicas is one walk down its
blocks, not one per replica.

Two modes, per replica:

- **approximate** (the default): a replica holds what this router sent it,
  aged as its cache would age it: least recently used first, at most
  ``capacity`` blocks (its KV cache in blocks, divided by the number of
  routers sharing it, since each sees only its share of the traffic).
  Blocks are touched in prompt order, as the engine touches them, so an old
  prompt's leading blocks go first, as they do there. What a replica's
  cache really holds drifts from this (other routers' traffic, preemption,
  a restart), which is why a match is a preference under the load bound,
  never a promise.
- **exact**: the replica publishes its cache events (vLLM's KV events:
  ``BlockStored``, ``BlockRemoved``, ``AllBlocksCleared``;
  :mod:`activator.balancing.kv_events` decodes them) and the index applies
  them as they come; what the router sends it is not recorded, because the
  replica itself says what it stored and evicted. Exact state is only
  useful when the published block hashes are the router's own (the
  simulator's engine and the sandbox's fake vLLM hash as the router does; a
  real vLLM hashes token ids, which a router without the model's tokenizer
  cannot reproduce).

Main decision: one index, many LRU orders. Each replica's LRU order is its
own ``OrderedDict`` (O(1) touch and evict); the index maps a block to the
set of replicas holding it, so :meth:`BlockIndex.matches` costs one set
intersection per matched block, at most the prompt's length times the
replica count and usually far less (it stops where the last holder drops
out).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence

__all__ = ["BlockIndex"]


class BlockIndex:
    """Per replica name, the blocks it holds (approximate or exact, see the module)."""

    __slots__ = ("_exact", "_holders", "_lru", "capacity")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1 block, got {capacity!r}")
        self.capacity = capacity
        self._holders: dict[Hashable, set[str]] = {}
        self._lru: dict[str, OrderedDict[Hashable, None]] = {}
        self._exact: set[str] = set()

    def held(self, name: str) -> int:
        """Blocks ``name`` holds, as far as this index knows."""
        lru = self._lru.get(name)
        return len(lru) if lru is not None else 0

    def is_exact(self, name: str) -> bool:
        return name in self._exact

    @property
    def replicas(self) -> list[str]:
        return list(self._lru)

    def matches(self, blocks: Sequence[Hashable], names: Iterable[str]) -> dict[str, int]:
        """Per name, how many of ``blocks``' leading blocks it holds (absent: none)."""
        alive = set(names)
        out: dict[str, int] = {}
        holders = self._holders
        depth = 0
        for block in blocks:
            have = holders.get(block)
            if not have:
                break
            still = alive & have
            if not still:
                break
            if len(still) < len(alive):
                for name in alive - still:
                    out[name] = depth
            alive = still
            depth += 1
        if depth:
            for name in alive:
                out[name] = depth
        return {n: d for n, d in out.items() if d}

    def sent(self, name: str, blocks: Sequence[Hashable]) -> None:
        """The router sent ``blocks`` to ``name``: approximate mode records them."""
        if name in self._exact:
            return
        lru = self._lru.setdefault(name, OrderedDict())
        holders = self._holders
        for block in blocks:
            if block in lru:
                lru.move_to_end(block)
            else:
                lru[block] = None
                holders.setdefault(block, set()).add(name)
        self._trim(name, lru, self.capacity)

    def stored(self, name: str, blocks: Iterable[Hashable]) -> None:
        """``name`` published that it stored ``blocks``: from now on it runs exact."""
        self._exact.add(name)
        lru = self._lru.setdefault(name, OrderedDict())
        holders = self._holders
        for block in blocks:
            if block not in lru:
                lru[block] = None
                holders.setdefault(block, set()).add(name)

    def removed(self, name: str, blocks: Iterable[Hashable]) -> None:
        """``name`` published that it evicted ``blocks``."""
        self._exact.add(name)
        lru = self._lru.get(name)
        if lru is None:
            return
        for block in blocks:
            if block in lru:
                del lru[block]
                self._unhold(block, name)

    def cleared(self, name: str) -> None:
        """``name`` published that it dropped every block (a cache reset)."""
        self._exact.add(name)
        self._forget(name)
        self._lru[name] = OrderedDict()

    def drop(self, name: str) -> None:
        """``name`` is gone (scaled in, asleep, preempted): its cache with it."""
        self._exact.discard(name)
        self._forget(name)

    def _forget(self, name: str) -> None:
        lru = self._lru.pop(name, None)
        if lru is not None:
            for block in lru:
                self._unhold(block, name)

    def _trim(self, name: str, lru: OrderedDict[Hashable, None], capacity: int) -> None:
        while len(lru) > capacity:
            block, _ = lru.popitem(last=False)
            self._unhold(block, name)

    def _unhold(self, block: Hashable, name: str) -> None:
        have = self._holders.get(block)
        if have is not None:
            have.discard(name)
            if not have:
                del self._holders[block]
