"""Balancing by load, as plain functions (:mod:`activator.balancing.least_loaded`).

Covers: power of two choices with a seeded RNG never picks a full replica
and spreads ties; least-in-flight; a single replica at its limit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from activator.balancing.least_loaded import least_in_flight, pick, power_of_two_choices


@dataclass
class T:
    name: str
    in_flight: int = 0


def test_power_of_two_choices_prefers_less_loaded_and_respects_limit() -> None:
    rng = random.Random(7)
    trackers = [T("a", 5), T("b", 0), T("c", 5), T("d", 5)]
    picks = [power_of_two_choices(trackers, 0, rng).name for _ in range(200)]  # type: ignore[union-attr]
    # b wins every pair it is in (about half of all pairs), never loses one.
    assert 0.35 < picks.count("b") / 200 < 0.65
    full = [T("a", 2), T("b", 2), T("c", 1)]
    for _ in range(50):
        chosen = pick(full, 2, rng)
        assert chosen is not None
        assert chosen.name == "c"
    assert pick([T("a", 2), T("b", 2)], 2, rng) is None


def test_ties_are_spread_and_single_replica_limit() -> None:
    rng = random.Random(1)
    trackers = [T("a"), T("b"), T("c")]
    seen = {pick(trackers, 0, rng).name for _ in range(50)}  # type: ignore[union-attr]
    assert seen == {"a", "b", "c"}
    assert pick([T("a", 3)], 3, rng) is None
    assert pick([T("a", 3)], 0, rng) is not None
    assert least_in_flight([T("a", 2), T("b", 1), T("c", 1)], 0).name == "b"  # type: ignore[union-attr]
    assert pick([], 0, rng) is None
