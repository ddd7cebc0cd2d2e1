"""Prefix-aware balancing: send a prompt where its prefix is most likely cached.

vLLM caches the KV of every full block of a prompt it has prefilled
(automatic prefix caching); a later prompt that starts with the same blocks
skips their prefill, on that replica only. A chat's next turn re-sends the
whole conversation, so it is cheap where the last turn ran and expensive
anywhere else. This module picks that replica, without letting affinity
overload it. It is pure (no I/O, no clock, the random source not needed):
the activator and the simulator run the same code.

A request arrives as its prompt in blocks (``blocks``: one hashable per full
block, in order, each naming the prompt up to its end, so equal blocks mean
equal prefixes; the activator hashes chat messages or the prompt text into
fixed-size chunks, a trace gives block ids). The pick, in order:

1. **History.** The router remembers, per request it routed, the *tip* of the
   prompt (its last full block) and the replica it went to, in an LRU map of
   at most ``max_tracked`` entries. The new prompt's blocks are looked up
   from the deepest to just past the anchor (below): the deepest remembered
   tip whose replica is still a candidate and under the load bound wins. A
   chat's turn *k+1* contains turn *k*'s whole prompt, so it finds turn
   *k*'s tip and the replica that holds the longest matching prefix. Only
   tips past the anchor are remembered, not every block: a system prompt
   shared by every conversation is never one, so it does not pull every new
   conversation to the replica that happened to see it first (which would
   also make each activator's choice depend on its own past).
2. **Ring.** Otherwise, consistent hashing with bounded loads (Mirrokni,
   Thorup and Zadimoghaddam, 2017; what KubeAI's ``PrefixHash`` strategy
   and Vimeo's and Envoy's ring balancers do): the first ``anchor`` blocks
   (the start of the conversation: the system prompt and first user
   message) are hashed onto a ring of ``virtual_nodes`` points per replica,
   and the request takes the first replica clockwise that is under the
   bound. Every turn of a conversation has the same anchor, so every
   activator sends it to the same replica without talking to the others.
   A request that passed over a remembered or ring replica for the bound
   is ``spilled`` (what an operator watches to see affinity give way).
3. **Least loaded**, when no replica is under the bound (with few requests
   in flight one more is already over it everywhere), and when the prompt
   has no full block (nothing to reuse: ``no-blocks``, the caller balances
   as usual).

**The bound.** A replica may take a request only if it then carries at
most ``load_factor`` times the mean, or the mean plus what chance alone
puts on a replica, whichever is more: ``in_flight + 1 <= max(load_factor *
m, m + max(1, 1.5 * sqrt(m)))`` with ``m = (total + 1) / n``, *total* being
the candidates' in-flight sum and *n* their number. The second term is for
the counts an activator sees: requests placed at random leave a replica's
count spread about ``sqrt(m)`` around the mean, and each of *N* activators
sees only its own share (about ``m / N`` of each replica's), so at tens of
requests per replica one replica is routinely 1.25x the mean by chance. A
bound that tight spills follow-up turns away from their cache for noise,
not overload: in the sandbox (96 chat users through two activators to four
replicas, at most 12 requests per replica in each activator's view) 1.25x
alone spilled a fifth of all requests and held the hit rate to 1.9x
least-loaded's (conversations of up to four turns); 1.5 standard
deviations spill one in twelve and reach 2.3x (2.5x to 2.8x with up to
three turns). Two spilled half as many again, but in a lightly loaded
simulation (four replicas, about five requests each) let the busiest
replica average 1.28x the mean over a minute, where 1.5 keeps it at 1.2x
(``tests/unit/scaler/sim/test_prefix_routing.py``). The slack
shrinks relative to the mean as load grows (2.5x the mean at one request,
1.5x at ten), so from 36 requests per replica up the factor is what binds
(the paper rounds its bound up to a whole request, to the same effect at
light load). When no replica is under the bound the least-loaded one takes
the request, which never adds to the busiest. 1.25 is the factor the
bounded-loads paper and Vimeo run and brpc defaults to.

**Why a ring and history, not a score.** llm-d's scheduler and SGLang's
router keep, per replica, an index of the prefixes they sent there and
score replicas by match against load. That index lives in one router: with
several activators, each sees a share of a conversation's turns and scores
against an index that misses the others'. Tidal's activators share nothing
on the request path (DESIGN §3), so the decision each makes alone must
agree: the ring gives every activator the same answer for the same anchor
from the replica list they all watch, and history only refines it with
what this activator itself routed (a spill, a deeper prefix). What is lost
with *N* activators: a turn goes to the ring's replica unless some earlier
turn spilled elsewhere and this activator did not route that turn; with
spills at rate *s* per turn, about ``s * (1 - 1/N)`` of follow-ups lose
their history (the simulator measures it, ``docs/prefix-routing.md``).

**Replicas coming and going.** A replica's ring points depend only on its
own name, so adding one takes over about ``1/n`` of the anchors and moves
nothing else; removing one moves only its own anchors, to their next
replica clockwise. History naming a replica that is no longer a candidate
(gone, draining or asleep: its cache is lost or soon will be) is dropped
when met.

**Memory.** ``max_tracked`` tips (LRU), one ring per distinct replica set,
rebuilt when the set changes: O(``max_tracked`` + ``virtual_nodes`` x n).
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

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
CHANCE_SIGMAS = 1.5
# Anchor of a trace's block ids: 8 blocks of vLLM's 16 tokens reach past a
# short system prompt into the first user message.
DEFAULT_ANCHOR_BLOCKS = 8
# 100,000 tips at ~150 bytes each (the key, the name reference, the LRU
# links) is ~15 MB per model: ten times the conversations a replica's KV
# cache holds at once (Llama-3-8B on an H100 keeps ~470k tokens, a few
# hundred conversations), so a live conversation is never forgotten first.
DEFAULT_MAX_TRACKED = 100_000
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
    max_tracked: int = DEFAULT_MAX_TRACKED
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES

    def __post_init__(self) -> None:
        if not (math.isfinite(self.load_factor) and self.load_factor > 1.0):
            raise ValueError(f"load_factor must be a number above 1, got {self.load_factor!r}")
        for name in ("anchor_blocks", "max_tracked", "virtual_nodes"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value!r}")


def stable_hash(value: object) -> int:
    """A 64-bit hash equal in every process (Python's ``hash`` of a str is salted)."""
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=8).digest(), "big")


def load_bound(loads: Sequence[int], load_factor: float) -> float:
    """The most a replica may carry after taking one more request."""
    mean = (sum(loads) + 1) / len(loads)
    return max(load_factor * mean, mean + max(1.0, CHANCE_SIGMAS * math.sqrt(mean)))


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
    """One model's prefix router: its history and its ring (see the module docstring)."""

    def __init__(self, config: AffinityConfig, name: Callable[[T], str]) -> None:
        self.config = config
        self._name = name
        self._tips: OrderedDict[Hashable, str] = OrderedDict()
        self._ring: Ring | None = None

    @property
    def tracked(self) -> int:
        return len(self._tips)

    def choose(
        self,
        blocks: Sequence[Hashable],
        candidates: Sequence[T],
        limit: int,
        *,
        anchor: int | None = None,
    ) -> tuple[T | None, str]:
        """The replica for a prompt of ``blocks``, and how it was found.

        The reason is ``history``, ``ring`` (the conversation's own replica on
        the ring), ``spilled`` (the replica that held its prefix, or its ring
        replica, was over the bound or at ``limit``: the next one on the ring
        under it), ``full`` (every candidate at ``limit``, the per-replica
        in-flight cap, 0: none: hold the request), ``least-loaded`` (no
        replica under the bound) or ``no-blocks`` (the caller balances as
        usual). ``anchor`` overrides
        the configured anchor depth (the activator knows where a chat's first
        user message ends). The choice is remembered as this prompt's tip.
        """
        if not candidates:
            return None, "full"
        if not blocks:
            return None, "no-blocks"
        by_name = {self._name(c): c for c in candidates}
        depth = max(
            1, min(len(blocks), anchor if anchor is not None else self.config.anchor_blocks)
        )
        bound = load_bound([c.in_flight for c in candidates], self.config.load_factor)

        def free(c: T) -> bool:
            return limit <= 0 or c.in_flight < limit

        passed_over: list[T] = []

        def room(c: T) -> bool:
            if c.in_flight + 1 <= bound and free(c):
                return True
            passed_over.append(c)
            return False

        chosen, reason = self._from_history(blocks, depth, by_name, room), "history"
        if chosen is None:
            chosen = self._from_ring(blocks[:depth], by_name, room)
            reason = "spilled" if passed_over else "ring"
        if chosen is None:
            open_ = [c for c in candidates if free(c)]
            if not open_:
                return None, "full"
            chosen, reason = min(open_, key=lambda c: c.in_flight), "least-loaded"
        if len(blocks) > depth:
            self._remember(blocks[-1], self._name(chosen))
        return chosen, reason

    def _from_history(
        self,
        blocks: Sequence[Hashable],
        depth: int,
        by_name: dict[str, T],
        room: Callable[[T], bool],
    ) -> T | None:
        tips = self._tips
        for block in reversed(blocks[depth:]):
            name = tips.get(block)
            if name is None:
                continue
            candidate = by_name.get(name)
            if candidate is None:
                # Gone, draining or asleep: its cache is lost or soon will be.
                del tips[block]
                continue
            if room(candidate):
                return candidate
        return None

    def _from_ring(
        self, anchor: Sequence[Hashable], by_name: dict[str, T], room: Callable[[T], bool]
    ) -> T | None:
        ring = self._ring_for(by_name)
        for name in ring.walk(stable_hash(tuple(anchor))):
            candidate = by_name[name]
            if room(candidate):
                return candidate
        return None

    def _ring_for(self, by_name: dict[str, T]) -> Ring:
        if self._ring is None or self._ring.members != by_name.keys():
            self._ring = Ring(list(by_name), self.config.virtual_nodes)
        return self._ring

    def _remember(self, tip: Hashable, name: str) -> None:
        tips = self._tips
        tips[tip] = name
        tips.move_to_end(tip)
        while len(tips) > self.config.max_tracked:
            tips.popitem(last=False)
