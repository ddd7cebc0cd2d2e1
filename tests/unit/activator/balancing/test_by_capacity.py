"""Balancing across GPU shapes (activator.balancing.by_capacity).

Covers, with a seeded random source: requests spread by capacity (an H100
three times a slice's weight carries about three times its requests); a
prompt a slice cannot prefill in time goes only to the H100s, and one no
shape serves in time to the one of the longest reach; the per-replica limit
holds, and with every candidate full there is no pick; alike replicas are
picked as least in flight.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from activator.balancing.by_capacity import pick

WEIGHTS = {"h100": 3.0, "slice": 1.0}
REACH: dict[str, float | None] = {"h100": 48_000.0, "slice": 10_000.0}


@dataclass
class Replica:
    name: str
    shape: str
    in_flight: int = 0


def choose(
    replicas: list[Replica], prompt: int, rng: random.Random, limit: int = 0
) -> Replica | None:
    return pick(
        replicas,
        weight=lambda r: WEIGHTS[r.shape],
        reach=lambda r: REACH[r.shape],
        prompt_tokens=prompt,
        limit=limit,
        rng=rng,
    )


def test_requests_spread_by_capacity() -> None:
    rng = random.Random(7)
    replicas = [Replica("h", "h100"), Replica("s1", "slice"), Replica("s2", "slice")]
    for _ in range(500):  # requests that stay: each pick sees the load so far
        chosen = choose(replicas, 500, rng)
        assert chosen is not None
        chosen.in_flight += 1
    h100, s1, s2 = (r.in_flight for r in replicas)
    assert 2.5 <= h100 / ((s1 + s2) / 2) <= 3.5


def test_a_long_prompt_goes_where_it_is_prefilled_in_time() -> None:
    rng = random.Random(1)
    replicas = [Replica("h", "h100", in_flight=40), Replica("s", "slice")]
    picks = Counter(choose(replicas, 20_000, rng).name for _ in range(50))  # type: ignore[union-attr]
    assert picks == {"h": 50}  # busy as it is, the only shape in time
    # Longer than any shape prefills in time: the longest reach, never the slice.
    assert {choose(replicas, 90_000, rng).name for _ in range(50)} == {"h"}  # type: ignore[union-attr]
    # No H100 serving: the slice is the fastest there is.
    only = Replica("s", "slice")
    assert choose([only], 20_000, rng) is only


def test_the_limit_holds() -> None:
    rng = random.Random(3)
    full = [Replica("h", "h100", in_flight=4), Replica("s", "slice", in_flight=4)]
    assert choose(full, 100, rng, limit=4) is None
    one_free = [Replica("h", "h100", in_flight=4), Replica("s", "slice", in_flight=1)]
    assert {choose(one_free, 100, rng, limit=4).name for _ in range(20)} == {"s"}  # type: ignore[union-attr]
    assert choose([], 100, rng) is None


def test_alike_replicas_go_to_the_least_loaded() -> None:
    rng = random.Random(5)
    replicas = [Replica("a", "slice", in_flight=5), Replica("b", "slice", in_flight=1)]
    assert {choose(replicas, 100, rng).name for _ in range(20)} == {"b"}  # type: ignore[union-attr]
