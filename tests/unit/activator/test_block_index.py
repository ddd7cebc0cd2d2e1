"""The block index: matches of the leading blocks, ageing at capacity.

Pure: replica names and block ids are strings.
"""

from __future__ import annotations

from activator.balancing.block_index import BlockIndex


def test_matches_are_the_leading_blocks_each_replica_holds() -> None:
    index = BlockIndex(capacity=100)
    index.sent("a", ["s", "d1", "d2", "q1"])
    index.sent("b", ["s", "d1"])
    index.sent("c", ["x"])
    assert index.matches(["s", "d1", "d2", "q9"], ["a", "b", "c"]) == {"a": 3, "b": 2}
    assert index.matches(["s", "d1", "d2"], ["b"]) == {"b": 2}  # candidates only


def test_a_replica_ages_least_recently_sent_first_at_its_capacity() -> None:
    index = BlockIndex(capacity=3)
    index.sent("a", ["p1", "p2"])
    index.sent("a", ["q1"])
    index.sent("a", ["p1"])  # p1 used again: p2 is now the oldest
    index.sent("a", ["r1"])
    assert index.held("a") == 3
    assert index.matches(["p1", "p2"], ["a"]) == {"a": 1}
    assert index.matches(["q1"], ["a"]) == {"a": 1}
