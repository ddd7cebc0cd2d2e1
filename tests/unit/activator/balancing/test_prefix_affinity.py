"""The prefix router, pure: longest match, score, ring, bound, churn, memory, agreement.

Replicas are plain objects with a name and an in-flight count; a test sets
the counts it needs. No network, no clock, no randomness but a seeded one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from activator.balancing.prefix_affinity import (
    AffinityConfig,
    PrefixAffinity,
    Ring,
    load_bound,
    stable_hash,
)


@dataclass
class Rep:
    name: str
    in_flight: int = 0


def router(**config: float) -> PrefixAffinity[Rep]:
    return PrefixAffinity(AffinityConfig(**config), lambda r: r.name)  # type: ignore[arg-type]


def reps(n: int) -> list[Rep]:
    return [Rep(f"r{i}") for i in range(n)]


def conversation(cid: int, turns: int, blocks_per_turn: int = 5) -> list[tuple[str, ...]]:
    """Each turn's prompt: a shared system block, then the growing history."""
    history: list[str] = ["system"]
    prompts = []
    for turn in range(turns):
        history += [f"c{cid}-t{turn}-b{b}" for b in range(blocks_per_turn)]
        prompts.append(tuple(history))
    return prompts


def test_next_turn_follows_history_even_against_the_ring() -> None:
    r = router(
        anchor_blocks=1
    )  # every conversation shares its anchor: the ring alone would pile up
    replicas = reps(4)
    first, _ = r.choose(("a", "b"), replicas, 0)
    assert first is not None
    # Another conversation's turn lands somewhere; then the first one's next turn.
    r.choose(("x", "y"), replicas, 0)
    again, reason = r.choose(("a", "b", "c", "d"), replicas, 0)
    assert (again, reason) == (first, "history")


def test_deepest_remembered_tip_wins() -> None:
    r = router(anchor_blocks=1)
    a, b = Rep("a"), Rep("b")
    r.choose(("s", "p1"), [a], 0)  # the short prefix was sent to a
    r.choose(("s", "p1", "p2", "p3"), [b], 0)  # the longer one to b
    chosen, reason = r.choose(("s", "p1", "p2", "p3", "p4"), [a, b], 0)
    assert (chosen, reason) == (b, "history")


def test_a_shared_system_prompt_is_not_a_tip() -> None:
    r = router(anchor_blocks=2)
    replicas = reps(8)
    # A prompt that is only the shared system block went to r0 alone ...
    r.choose(("system",), replicas[:1], 0)
    # ... yet 200 new conversations behind that block spread over the ring
    # instead of following it.
    counts: dict[str, int] = {}
    for cid in range(200):
        chosen, reason = r.choose(conversation(cid, 1)[0], replicas, 0)
        assert chosen is not None and reason == "ring"
        counts[chosen.name] = counts.get(chosen.name, 0) + 1
    assert len(counts) == 8 and max(counts.values()) < 50


def test_no_replica_goes_over_the_bound() -> None:
    rng = random.Random(7)
    r = router(anchor_blocks=1)
    replicas = reps(5)
    convs = [conversation(c, 6) for c in range(40)]
    for _ in range(3000):
        busy = [x for x in replicas if x.in_flight > 0]
        if busy and rng.random() < 0.5:
            rng.choice(busy).in_flight -= 1
            continue
        prompt = rng.choice(rng.choice(convs))
        bound = load_bound([x.in_flight for x in replicas], 1.25)
        least = min(x.in_flight for x in replicas)
        chosen, reason = r.choose(prompt, replicas, 0)
        assert chosen is not None
        if reason == "least-loaded":
            assert chosen.in_flight == least
        else:
            assert chosen.in_flight + 1 <= bound
        chosen.in_flight += 1


def test_history_over_the_bound_spills_to_the_ring() -> None:
    r = router(anchor_blocks=1)
    a, b = Rep("a"), Rep("b")
    r.choose(("k", "k2"), [a], 0)
    a.in_flight = 10  # the bound for 11 in flight over two: 5.5 + 2 * sqrt(5.5) = 10.2
    chosen, reason = r.choose(("k", "k2", "k3"), [a, b], 0)
    assert (chosen, reason) == (b, "spilled")


def test_a_replica_over_the_mean_by_chance_keeps_its_conversation() -> None:
    # Four replicas near four requests each: 5 is within chance of the mean
    # (4 + sqrt(4) = 6 with this request), so the follow-up stays with its
    # cache; at ten times the load the same proportions are no longer chance
    # and the factor (1.25x) sends it on.
    for scale, expected in ((1, "history"), (10, "spilled")):
        r = router(anchor_blocks=1)
        replicas = [Rep(f"r{i}", n * scale) for i, n in enumerate((0, 4, 3, 3))]
        home, _ = r.choose(("s", "t"), replicas[:1], 0)
        assert home is replicas[0]
        home.in_flight = 5 * scale
        chosen, reason = r.choose(("s", "t", "u"), replicas, 0)
        assert reason == expected, (scale, chosen)
        assert (chosen is home) == (expected == "history")


def test_limit_holds_when_every_replica_is_full_and_no_blocks_defers() -> None:
    r = router()
    full = [Rep("a", 2), Rep("b", 2)]
    assert r.choose(("x",), full, 2) == (None, "full")
    assert r.choose((), reps(2), 0) == (None, "no-blocks")
    assert r.choose(("x",), [], 0) == (None, "full")


def test_a_new_replica_takes_only_its_share_and_a_removed_one_only_moves_its_own() -> None:
    anchors = [stable_hash(("anchor", i)) for i in range(4000)]
    four = Ring([f"r{i}" for i in range(4)], 100)
    five = Ring([f"r{i}" for i in range(5)], 100)
    before = [next(four.walk(k)) for k in anchors]
    after = [next(five.walk(k)) for k in anchors]
    moved = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert all(a == "r4" for _, a in moved)  # nothing moves between old replicas
    assert 0.12 < len(moved) / len(anchors) < 0.28  # about 1/5
    three = Ring(["r0", "r1", "r3"], 100)
    gone = [next(three.walk(k)) for k in anchors]
    changed = [b for b, g in zip(before, gone, strict=True) if b != g]
    assert changed and set(changed) == {"r2"}


def test_two_activators_agree_without_sharing_state() -> None:
    one, two = router(), router()
    replicas = reps(6)
    for cid in range(300):
        prompt = conversation(cid, 1)[0]
        assert one.choose(prompt, replicas, 0)[0] is two.choose(prompt, replicas, 0)[0]


def test_a_document_cached_on_two_replicas_splits_by_load() -> None:
    r = router(anchor_blocks=1)
    a, b, c = Rep("a"), Rep("b"), Rep("c")
    doc = ("s", "d1", "d2", "d3")
    r.index.sent("a", (*doc, "q1"))
    r.index.sent("b", (*doc, "q2"))
    a.in_flight, b.in_flight = 3, 1
    chosen, reason = r.choose((*doc, "q3"), [a, b, c], 0)
    assert (chosen, reason) == (b, "history")
    a.in_flight, b.in_flight = 1, 3
    chosen, reason = r.choose((*doc, "q4"), [a, b, c], 0)
    assert (chosen, reason) == (a, "history")


def test_a_long_match_on_a_busier_replica_beats_a_short_one_on_an_idle_one() -> None:
    r = router(anchor_blocks=1)
    a, b, c = Rep("a"), Rep("b"), Rep("c")
    r.index.sent("a", ("s", "h1"))
    r.index.sent("b", ("s", "h1", "h2", "h3", "h4", "h5", "h6"))
    a.in_flight, b.in_flight, c.in_flight = 4, 6, 5
    chosen, reason = r.choose(("s", "h1", "h2", "h3", "h4", "h5", "h6", "h7"), [a, b, c], 0)
    assert (chosen, reason) == (b, "history")
    b.in_flight = 8  # over the bound (the mean with this request is 6, plus sqrt(6))
    chosen, reason = r.choose(("s", "h1", "h2", "h3", "h4", "h5", "h6", "h7"), [a, b, c], 0)
    assert (chosen, reason) == (a, "history")


def test_what_a_replica_holds_is_aged_at_its_cache_size() -> None:
    r = router(capacity_blocks=4, anchor_blocks=1)
    a, b = Rep("a"), Rep("b")
    r.choose(("s", "old"), [a], 0)
    r.choose(("t", "x1", "x2", "x3"), [a], 0)  # four newer blocks push both out
    assert r.index.held("a") == 4
    assert r.choose(("s", "old", "more"), [b, a], 0)[1] == "ring"


def test_a_replica_that_left_is_forgotten() -> None:
    r = router(anchor_blocks=1)
    a, b = Rep("a"), Rep("b")
    r.choose(("s", "t"), [a], 0)
    chosen, reason = r.choose(("s", "t", "u"), [b], 0)
    assert (chosen, reason) == (b, "ring")
    assert r.index.held("a") == 0


def test_stable_hash_is_the_same_in_every_process() -> None:
    # A literal: Python's own str hash changes per process and would fail this.
    assert stable_hash(("r0", 0)) == 0x108167F4D2C835F3


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("load_factor", 1.0, "load_factor must be a number above 1"),
        ("load_factor", float("nan"), "load_factor must be a number above 1"),
        ("anchor_blocks", 0, "anchor_blocks must be at least 1"),
        ("capacity_blocks", 0, "capacity_blocks must be at least 1"),
        ("virtual_nodes", 0, "virtual_nodes must be at least 1"),
        ("prefix_weight", 0.0, "prefix_weight must be above 0"),
        ("queue_weight", -1.0, "queue_weight must be a number >= 0"),
    ],
)
def test_bad_config_is_refused_by_name(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AffinityConfig(**{field: value})  # type: ignore[arg-type]
