"""Prefix-aware balancing: send a prompt where the longest prefix of it is cached.

vLLM caches the KV of every full block of a prompt it has prefilled
(automatic prefix caching); a later prompt that starts with the same blocks
skips their prefill, on that replica only. A chat's next turn re-sends the
whole conversation, an agent's next step its whole history, a RAG request
a document many others also sent, a few-shot request the same long
examples: each is cheap where that prefix is cached and expensive anywhere
else. This module picks that replica, without letting affinity overload
it. It is pure (no I/O, no clock, the random source not needed): the
activator and the simulator run the same code.

A request arrives as its prompt in blocks (``blocks``: one hashable per full
block, in order, each naming the prompt up to its end, so equal blocks mean
equal prefixes; the activator hashes chat messages or the prompt text into
fixed-size chunks, a trace gives block ids). The pick, in order:

1. **Longest match, scored against load.** Per replica, a
   :class:`~activator.balancing.block_index.BlockIndex` holds the blocks it
   was sent, aged as its KV cache would age them (LRU at ``capacity_blocks``),
   or, where the replica publishes its cache events, exactly what it holds.
   The prompt's blocks are matched against every replica at once. The part
   every candidate holds (a system prompt cached everywhere) decides
   nothing; where some replica holds more, each candidate under the bound is
   scored as llm-d's scheduler scores pods: ``prefix_weight`` x its match
   beyond that common part as a share of what is left of the prompt, plus
   ``queue_weight`` x its headroom under the bound (``1 - (in_flight + 1) /
   bound``), and the best score wins (reason ``history``: the prompt went
   where its prefix went). A long match on a busy replica beats a short one
   on an idle replica; two replicas holding the same document split its
   requests by load.
2. **Ring.** When no candidate under the bound holds more than the rest
   (a new conversation, a new document, a prompt whose prefix is cached
   everywhere), consistent hashing with bounded loads (Mirrokni, Thorup and
   Zadimoghaddam, 2017; what KubeAI's ``PrefixHash`` strategy and Vimeo's
   and Envoy's ring balancers do): the first ``anchor`` blocks (the system
   prompt and the start of the first user message, i.e. of the
   conversation or the document) are hashed onto a ring of
   ``virtual_nodes`` points per replica, and the request takes the first
   replica clockwise that is under the bound. Every turn of a
   conversation, every request over one document, has the same anchor, so
   every activator sends it to the same replica without talking to the
   others. A request that passed over a matching or ring replica for the
   bound is ``spilled`` (what an operator watches to see affinity give
   way); a hot document spilled to the next replica is then matched there
   too, and its requests share both.
3. **Least loaded**, when no replica is under the bound (with few requests
   in flight one more is already over it everywhere), and when the prompt
   has no full block (nothing to reuse: ``no-blocks``, the caller balances
   as usual).

**The bound.** A replica may take a request only if it then carries at
most ``load_factor`` times the mean, or the mean plus what chance alone
puts on a replica, whichever is more: ``in_flight + 1 <= max(load_factor *
m, m + max(1, chance_sigmas * sqrt(m)))`` with ``m = (total + 1) / n``,
*total* being the candidates' in-flight sum and *n* their number. The
second term is for the counts an activator sees: requests placed at random
leave a replica's count spread about ``sqrt(m)`` around the mean, and each
of *N* activators sees only its own share (about ``m / N`` of each
replica's), so at tens of requests per replica one replica is routinely
1.25x the mean by chance, and a bound that tight spills follow-ups away
from their cache for noise, not overload (in the sandbox, 1.25x alone
spilled a fifth of all requests). How much chance to allow is a trade: with
the last-block router this replaced, 1.5 standard deviations suited the
sandbox's two activators best; with the longest match, whose load score
already leans to the idler of equal matches, 1.5 let an agent workload's
busiest replica average 1.22x to 1.34x the mean over a minute in the
simulator, and 1.0 keeps every workload within 1.2x at 0.86x to 0.95x of
the finite ceiling's hit rate (``docs/prefix-routing.md``). The slack shrinks
relative to the mean as load grows, so from 16 requests per replica up the
factor is what binds. When no replica is under the bound the least-loaded
one takes the request, which never adds to the busiest. 1.25 is the factor
the bounded-loads paper and Vimeo run and brpc defaults to.

**Several activators.** llm-d's scheduler and SGLang's router are one
process; Tidal's activators share nothing on the request path, so each
keeps its own index of what *it* sent. Two rules keep them agreeing: a
prompt nobody has a match for goes where the ring says, which is the same
in every activator (so turn 1 through activator A and turn 2 through B meet
on the ring's replica), and an activator's record ages at its share of the
replica's cache (``capacity_blocks`` is the cache divided by the number of
activators), so it forgets what the replica has likely evicted. What is
lost with *N* activators: a follow-up whose earlier turn spilled, through
another activator, goes to the ring's replica and misses.

**Replicas coming and going.** A replica's ring points depend only on its
own name, so adding one takes over about ``1/n`` of the anchors and moves
nothing else; removing one moves only its own anchors, to their next
replica clockwise. A replica that is no longer a candidate (gone, draining
or asleep: its cache is lost or soon will be) has its record dropped when
the candidate set changes.

**Memory.** ``capacity_blocks`` blocks per replica (about 150 bytes each:
the key, its holder mask, the LRU links) and one ring per distinct replica
set, rebuilt when the set changes: O(``capacity_blocks`` x n +
``virtual_nodes`` x n).
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from activator.balancing.block_index import BlockIndex

__all__ = [
    "AffinityConfig",
    "Loaded",
    "PrefixAffinity",
    "Ring",
    "load_bound",
    "stable_hash",
]

DEFAULT_LOAD_FACTOR = 1.25
# How far above the mean, in standard deviations of a count placed at
# random (the square root of the mean), a replica's in-flight count may go
# before it counts as overloaded rather than unlucky.
CHANCE_SIGMAS = 1.0
# Anchor of a trace's block ids: 8 blocks of vLLM's 16 tokens reach past a
# short system prompt into the first user message.
DEFAULT_ANCHOR_BLOCKS = 8
# A replica's KV cache in the activator's blocks: Llama-3.1-8B on one H100
# keeps about 400,000 tokens, and a 256-character block is about 64 tokens.
# At ~150 bytes a block that is ~1 MB per replica.
DEFAULT_CAPACITY_BLOCKS = 6_250
# The scorer weights: a prompt's whole remaining prefix matched (1.0) is
# worth 1.5 replicas' worth of headroom, so a long match holds against a
# busier replica until the bound, and equal matches split by load.
DEFAULT_PREFIX_WEIGHT = 3.0
DEFAULT_QUEUE_WEIGHT = 2.0
# The busiest of four replicas owns 1.11x the mean share of anchors with 100
# points each (the median of 20 random replica sets), 1.04x with 1,000: with
# 100 it sits near the 1.25x bound and spills turns away from their cache.
# 1,000 points for 100 replicas is a 100,000-entry ring, built on a change.
DEFAULT_VIRTUAL_NODES = 1000


class Loaded(Protocol):
    @property
    def in_flight(self) -> int: ...


T = TypeVar("T", bound=Loaded)


@dataclass(frozen=True, slots=True)
class AffinityConfig:
    """How strongly to follow prefixes; every field is checked here."""

    load_factor: float = DEFAULT_LOAD_FACTOR
    anchor_blocks: int = DEFAULT_ANCHOR_BLOCKS
    capacity_blocks: int = DEFAULT_CAPACITY_BLOCKS
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES
    prefix_weight: float = DEFAULT_PREFIX_WEIGHT
    queue_weight: float = DEFAULT_QUEUE_WEIGHT
    chance_sigmas: float = CHANCE_SIGMAS

    def __post_init__(self) -> None:
        if not (math.isfinite(self.load_factor) and self.load_factor > 1.0):
            raise ValueError(f"load_factor must be a number above 1, got {self.load_factor!r}")
        for name in ("anchor_blocks", "capacity_blocks", "virtual_nodes"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value!r}")
        for name in ("prefix_weight", "queue_weight", "chance_sigmas"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        if self.prefix_weight == 0:
            raise ValueError("prefix_weight must be above 0: it is what follows prefixes")


def stable_hash(value: object) -> int:
    """A 64-bit hash equal in every process (Python's ``hash`` of a str is salted)."""
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=8).digest(), "big")


def load_bound(
    loads: Sequence[int], load_factor: float, chance_sigmas: float = CHANCE_SIGMAS
) -> float:
    """The most a replica may carry after taking one more request."""
    mean = (sum(loads) + 1) / len(loads)
    return max(load_factor * mean, mean + max(1.0, chance_sigmas * math.sqrt(mean)))


class Ring:
    """Consistent-hash ring over replica names, ``points`` points each."""

    __slots__ = ("_hashes", "_names", "members")

    def __init__(self, names: Sequence[str], points: int) -> None:
        self.members = frozenset(names)
        pairs = sorted(
            (stable_hash((name, i)), name) for name in self.members for i in range(points)
        )
        self._hashes = [h for h, _ in pairs]
        self._names = [n for _, n in pairs]

    def walk(self, key: int) -> Iterator[str]:
        """Every member once, clockwise from ``key``."""
        seen: set[str] = set()
        n = len(self._hashes)
        start = bisect.bisect_left(self._hashes, key)
        for step in range(n):
            name = self._names[(start + step) % n]
            if name not in seen:
                seen.add(name)
                yield name
                if len(seen) == len(self.members):
                    return


class PrefixAffinity(Generic[T]):
    """One model's prefix router: its block index and its ring (see the module docstring)."""

    def __init__(self, config: AffinityConfig, name: Callable[[T], str]) -> None:
        self.config = config
        self._name = name
        self.index = BlockIndex(config.capacity_blocks)
        self._ring: Ring | None = None

    @property
    def tracked(self) -> int:
        """Blocks recorded over every replica."""
        return sum(self.index.held(n) for n in self.index.replicas)

    def choose(
        self,
        blocks: Sequence[Hashable],
        candidates: Sequence[T],
        limit: int,
        *,
        anchor: int | None = None,
        anchor_key: int | None = None,
    ) -> tuple[T | None, str]:
        """The replica for a prompt of ``blocks``, and how it was found.

        The reason is ``history`` (the candidate holding the longest prefix,
        scored against load), ``ring`` (the conversation's own replica on
        the ring), ``spilled`` (the replica that held its prefix, or its ring
        replica, was over the bound or at ``limit``: the next one on the ring
        under it), ``full`` (every candidate at ``limit``, the per-replica
        in-flight cap, 0: none: hold the request), ``least-loaded`` (no
        replica under the bound) or ``no-blocks`` (the caller balances as
        usual). ``anchor`` overrides the configured anchor depth (the
        activator knows where a chat's first user message ends);
        ``anchor_key`` is the ring's key for it where the blocks are not the
        same in every process (the activator's are not; default: a stable
        hash of the anchor's blocks). The prompt is recorded as sent to the
        chosen replica.
        """
        if not candidates:
            return None, "full"
        if not blocks:
            return None, "no-blocks"
        by_name = {self._name(c): c for c in candidates}
        ring = self._ring_for(by_name)
        depth = max(
            1, min(len(blocks), anchor if anchor is not None else self.config.anchor_blocks)
        )
        config = self.config
        bound = load_bound(
            [c.in_flight for c in candidates], config.load_factor, config.chance_sigmas
        )

        def free(c: T) -> bool:
            return limit <= 0 or c.in_flight < limit

        passed_over: list[T] = []

        def room(c: T) -> bool:
            if c.in_flight + 1 <= bound and free(c):
                return True
            passed_over.append(c)
            return False

        chosen, reason = self._best_match(blocks, depth, by_name, bound, room), "history"
        if chosen is None:
            key = anchor_key if anchor_key is not None else stable_hash(tuple(blocks[:depth]))
            chosen = self._from_ring(ring, key, by_name, room)
            reason = "spilled" if passed_over else "ring"
        if chosen is None:
            open_ = [c for c in candidates if free(c)]
            if not open_:
                return None, "full"
            chosen, reason = min(open_, key=lambda c: c.in_flight), "least-loaded"
        self.index.sent(self._name(chosen), blocks)
        return chosen, reason

    def _best_match(
        self,
        blocks: Sequence[Hashable],
        anchor: int,
        by_name: dict[str, T],
        bound: float,
        room: Callable[[T], bool],
    ) -> T | None:
        """The best-scored candidate under the bound that holds more than the rest.

        A match counts past the anchor and past what every candidate holds:
        a system prompt, or the anchor the ring already places, decides
        nothing, so that new conversations still go where the ring (the
        same in every activator) says.
        """
        matched = self.index.matches(blocks, by_name)
        if not matched:
            return None
        common = min(matched.values()) if len(matched) == len(by_name) else 0
        floor = max(common, anchor)
        rest = len(blocks) - floor
        config = self.config
        best: T | None = None
        best_score = -math.inf
        for name, depth in matched.items():
            if depth <= floor:
                continue
            candidate = by_name[name]
            if not room(candidate):
                continue
            score = config.prefix_weight * (depth - floor) / rest + config.queue_weight * (
                1.0 - (candidate.in_flight + 1) / bound
            )
            if score > best_score:
                best, best_score = candidate, score
        return best

    def _from_ring(
        self,
        ring: Ring,
        key: int,
        by_name: dict[str, T],
        room: Callable[[T], bool],
    ) -> T | None:
        for name in ring.walk(key):
            candidate = by_name[name]
            if room(candidate):
                return candidate
        return None

    def _ring_for(self, by_name: dict[str, T]) -> Ring:
        if self._ring is None or self._ring.members != by_name.keys():
            self._ring = Ring(list(by_name), self.config.virtual_nodes)
            # Gone, draining or asleep: its cache is lost or soon will be.
            for name in self.index.replicas:
                if name not in by_name:
                    self.index.drop(name)
        return self._ring
