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
  the simulator's :mod:`simulator.kv_events` decodes them; the live activator
  does not subscribe to a replica's events yet) and the index applies
  them as they come; what the router sends it is not recorded, because the
  replica itself says what it stored and evicted. Exact state is only
  useful when the published block hashes are the router's own (the
  simulator's engine and the sandbox's fake vLLM hash as the router does; a
  real vLLM hashes token ids, which a router without the model's tokenizer
  cannot reproduce).

Main decision: one index, many LRU orders. Each replica's LRU order is its
own ``OrderedDict`` (O(1) touch and evict); the index maps a block to the
replicas holding it as a bit mask (each replica a bit, reused when it
leaves), so :meth:`BlockIndex.matches` costs one integer AND per matched
block and stops where the last holder drops out. Sets instead of masks cost
twice as much per request, which matters: this runs on every request of a
prefix-balanced model.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence

__all__ = ["BlockIndex"]


class BlockIndex:
    """Per replica name, the blocks it holds (approximate or exact, see the module)."""

    __slots__ = ("_bits", "_exact", "_holders", "_lru", "_names", "capacity")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1 block, got {capacity!r}")
        self.capacity = capacity
        self._holders: dict[Hashable, int] = {}  # block -> mask of the replicas holding it
        self._lru: dict[str, OrderedDict[Hashable, None]] = {}
        self._bits: dict[str, int] = {}  # replica -> its bit
        self._names: dict[int, str] = {}  # bit -> replica
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
        bits = self._bits
        alive = 0
        for name in names:
            alive |= bits.get(name, 0)
        out: dict[str, int] = {}
        get = self._holders.get
        depth = 0
        for block in blocks:
            if not alive:
                break
            have = get(block, 0) & alive
            if have != alive and depth:
                self._name_bits(alive & ~have, depth, out)
            alive = have
            depth += 1
        if alive:
            self._name_bits(alive, depth, out)
        return out

    def _name_bits(self, mask: int, depth: int, out: dict[str, int]) -> None:
        names = self._names
        while mask:
            low = mask & -mask
            out[names[low]] = depth
            mask ^= low

    def sent(self, name: str, blocks: Sequence[Hashable]) -> None:
        """The router sent ``blocks`` to ``name``: approximate mode records them."""
        if name in self._exact:
            return
        bit = self._bit_of(name)
        lru = self._lru[name]
        holders = self._holders
        get = holders.get
        touch = lru.move_to_end
        for block in blocks:
            if block in lru:
                touch(block)
            else:
                lru[block] = None
                holders[block] = get(block, 0) | bit
        if len(lru) > self.capacity:
            keep = ~bit
            pop = lru.popitem
            for _ in range(len(lru) - self.capacity):
                block, _ = pop(last=False)
                mask = holders[block] & keep
                if mask:
                    holders[block] = mask
                else:
                    del holders[block]

    def stored(self, name: str, blocks: Iterable[Hashable]) -> None:
        """``name`` published that it stored ``blocks``: from now on it runs exact."""
        self._exact.add(name)
        bit = self._bit_of(name)
        lru = self._lru[name]
        holders = self._holders
        for block in blocks:
            if block not in lru:
                lru[block] = None
                holders[block] = holders.get(block, 0) | bit

    def removed(self, name: str, blocks: Iterable[Hashable]) -> None:
        """``name`` published that it evicted ``blocks``."""
        self._exact.add(name)
        lru = self._lru.get(name)
        if lru is None:
            return
        bit = self._bits[name]
        for block in blocks:
            if block in lru:
                del lru[block]
                self._unhold(block, bit)

    def cleared(self, name: str) -> None:
        """``name`` published that it dropped every block (a cache reset)."""
        self._exact.add(name)
        self._forget(name)
        self._bit_of(name)

    def drop(self, name: str) -> None:
        """``name`` is gone (scaled in, asleep, preempted): its cache with it."""
        self._exact.discard(name)
        self._forget(name)

    def _bit_of(self, name: str) -> int:
        bit = self._bits.get(name)
        if bit is None:
            used = 0
            for b in self._names:
                used |= b
            bit = (used + 1) & ~used  # the lowest free bit
            self._bits[name] = bit
            self._names[bit] = name
            self._lru[name] = OrderedDict()
        return bit

    def _forget(self, name: str) -> None:
        lru = self._lru.pop(name, None)
        bit = self._bits.pop(name, None)
        if bit is None:
            return
        del self._names[bit]
        if lru is not None:
            for block in lru:
                self._unhold(block, bit)

    def _unhold(self, block: Hashable, bit: int) -> None:
        mask = self._holders.get(block, 0) & ~bit
        if mask:
            self._holders[block] = mask
        else:
            self._holders.pop(block, None)
