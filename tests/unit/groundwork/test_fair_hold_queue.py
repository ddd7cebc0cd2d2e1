"""The fair hold queue: classes, tenants in weighted turns, leaving, deadlines, shedding.

Covers each rule of :mod:`groundwork.fair_hold_queue` on simulated time:
with one class and one tenant it is a FIFO (checked against a
plain deque over random operations); higher classes go first; tenants alternate, ties going to the
one waiting longest; turns are weighted by cost, and an idle tenant banks no
credit; a tenant whose requests all left vanishes without stalling the
others; deadlines expire the oldest whatever their class; a full buffer sheds
the lowest class first, from its heaviest tenant, then pushes out the
heaviest tenant of the newcomer's class, and otherwise refuses the newcomer;
``take`` sees capacity counted, and a refused turn is offered again; a request
that cannot go (``SKIP``) is passed over, the order kept among the others and
its own place and turn kept for the next release; a request that leaves is out
of the queue at once; the rule that displaced a request is said; priority
values parse as documented.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable, Iterator

import pytest

from groundwork.fair_hold_queue import BY_CLASS, BY_TENANT, SKIP, FairHoldQueue, Skip
from groundwork.rules.priority import class_label, parse_priority


def _release(queue: FairHoldQueue[str], slots: int | None = None) -> list[str]:
    free = [slots if slots is not None else 1_000_000]

    def take(_head: str) -> int | None:
        return free[0] if free[0] > 0 else None

    out = []
    for name, _since, _slot in queue.hand_out(take):
        free[0] -= 1  # the caller counts the slot before take() is asked again
        out.append(name)
    return out


def _hold_all(queue: FairHoldQueue[str], names: Iterable[str], **kw: object) -> None:
    for n, name in enumerate(names):
        queue.hold(name, float(n), **kw)  # type: ignore[arg-type]


def test_one_class_one_tenant_is_the_fifo_over_random_operations() -> None:
    rng = random.Random(7)
    for _ in range(50):
        _compare_once(rng)


class _Fifo:
    """The reference: held in arrival order, those that left skipped, the oldest expire."""

    def __init__(self, left: set[int]) -> None:
        self.left = left
        self.entries: deque[tuple[int, float]] = deque()

    def hold(self, item: int, since: float) -> None:
        self.entries.append((item, since))

    def hand_out(self, k: int) -> list[int]:
        waiting = [i for i, _ in self.entries if i not in self.left]
        self.entries = deque(e for e in self.entries if e[0] in waiting[k:])
        return waiting[:k]

    def expire(self, held_for_s: float, now: float) -> list[int]:
        out = [i for i, t in self.entries if t + held_for_s <= now and i not in self.left]
        self.entries = deque(e for e in self.entries if e[1] + held_for_s > now)
        return out

    def drain(self) -> list[int]:
        out = [i for i, _ in self.entries if i not in self.left]
        self.entries.clear()
        return out


def _compare_once(rng: random.Random) -> None:
    left: set[int] = set()
    fifo = _Fifo(left)
    fair: FairHoldQueue[int] = FairHoldQueue(lambda i: i not in left)
    n, now = 0, 0.0
    for _ in range(200):
        now += rng.random()
        op = rng.random()
        if op < 0.5:
            fifo.hold(n, now)
            fair.hold(n, now)
            n += 1
        elif op < 0.7 and n:
            left.add(rng.randrange(n))
        elif op < 0.9:
            k = rng.randrange(4)
            assert fifo.hand_out(k) == [i for i, _, _ in _take_k(fair.hand_out, k)]
        else:
            assert fifo.expire(5.0, now) == fair.expire(5.0, now)
    assert fifo.drain() == fair.drain()


def _take_k(
    hand_out: Callable[[Callable[[int], int | None]], Iterator[tuple[int, float, int]]], k: int
) -> Iterator[tuple[int, float, int]]:
    """What ``hand_out`` gives with ``k`` free slots."""
    free = [k]

    def take(_item: int) -> int | None:
        return free[0] if free[0] > 0 else None

    for got in hand_out(take):
        free[0] -= 1
        yield got


def test_higher_classes_go_first_whatever_the_arrival_order() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    for n, (name, priority) in enumerate(
        [("s1", -1), ("n1", 0), ("c1", 1), ("n2", 0), ("top", 50), ("s2", -1), ("c2", 1)]
    ):
        queue.hold(name, float(n), priority=priority)
    assert _release(queue) == ["top", "c1", "c2", "n1", "n2", "s1", "s2"]
    assert not queue


def test_a_lower_class_gets_nothing_while_a_higher_one_waits() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    _hold_all(queue, ["n1", "n2"], priority=0)
    assert _release(queue, slots=1) == ["n1"]
    queue.hold("c1", 5.0, priority=1)
    assert _release(queue, slots=1) == ["c1"]  # arrived later, served before n2
    assert _release(queue) == ["n2"]


def test_tenants_alternate_and_a_tie_goes_to_the_one_waiting_longest() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    _hold_all(queue, [f"a{i}" for i in range(5)], tenant="a")
    _hold_all(queue, ["b0", "b1"], tenant="b")
    queue.hold("c0", 9.0, tenant="c")
    # a began waiting first, so it wins the opening tie; then b, then c.
    assert _release(queue) == ["a0", "b0", "c0", "a1", "b1", "a2", "a3", "a4"]


def test_turns_are_weighted_by_cost_not_by_count() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    _hold_all(queue, [f"short{i}" for i in range(40)], tenant="many", cost=10)
    _hold_all(queue, [f"long{i}" for i in range(4)], tenant="few", cost=100)
    order = _release(queue)
    # Each long request is followed by ten short ones: equal tokens each way.
    first_22 = order[:22]
    assert first_22.count("long0") + first_22.count("long1") == 2
    assert sum(name.startswith("short") for name in first_22) == 20
    assert order.index("long3") < order.index("short39")


def test_an_idle_tenant_banks_no_credit() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    _hold_all(queue, [f"a{i}" for i in range(10)], tenant="a")
    assert _release(queue, slots=6) == [f"a{i}" for i in range(6)]
    # b arrives late: it starts level with a's last turn, so it shares from now
    # on; it does not get six turns in a row for the time it was away.
    _hold_all(queue, [f"b{i}" for i in range(4)], tenant="b")
    assert _release(queue) == ["b0", "a6", "b1", "a7", "b2", "a8", "b3", "a9"]


def test_a_tenant_that_vanishes_does_not_stall_the_others() -> None:
    left: set[str] = set()
    queue: FairHoldQueue[str] = FairHoldQueue(lambda name: name not in left)
    _hold_all(queue, [f"a{i}" for i in range(100)], tenant="a")
    _hold_all(queue, ["b0", "b1"], tenant="b")
    assert _release(queue, slots=1) == ["a0"]
    left.update(f"a{i}" for i in range(100))  # every client of tenant a disconnected
    assert _release(queue, slots=1) == ["b0"]
    assert _release(queue) == ["b1"]
    assert not queue and len(queue) == 0


def test_take_sees_capacity_counted_and_a_refused_turn_is_offered_again() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    _hold_all(queue, ["a0", "a1"], tenant="a")
    _hold_all(queue, ["b0"], tenant="b")
    seen: list[str] = []

    def never(head: str) -> None:
        seen.append(head)

    for _ in queue.hand_out(never):
        raise AssertionError("nothing is free")
    for _ in queue.hand_out(never):
        raise AssertionError("nothing is free")
    assert seen == ["a0", "a0"]  # the same request, twice: asking changed nothing
    assert _release(queue) == ["a0", "b0", "a1"]


def test_deadlines_expire_the_oldest_whatever_their_class() -> None:
    left = {"b"}
    queue: FairHoldQueue[str] = FairHoldQueue(lambda name: name not in left)
    queue.hold("a", 0.0, priority=1)
    queue.hold("b", 1.0, priority=0)
    queue.hold("c", 2.0, priority=-1)
    queue.hold("d", 8.0, priority=-1)
    assert queue.expire(5.0, now=4.0) == []
    assert queue.expire(5.0, now=7.5) == ["a", "c"]  # b had left: dropped, not returned
    assert len(queue) == 1
    assert _release(queue) == ["d"]


def test_a_full_buffer_sheds_the_lowest_class_first_from_its_heaviest_tenant() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    queue.hold("n-x", 0.0, priority=0, tenant="x")
    queue.hold("s-x", 1.0, priority=-1, tenant="x")
    queue.hold("s-y1", 2.0, priority=-1, tenant="y")
    queue.hold("s-y2", 3.0, priority=-1, tenant="y")
    queue.hold("low", 4.0, priority=-5, tenant="z")
    assert queue.shed_for(0, "x") == "low"  # the lowest class of all goes first
    assert queue.shed_for(0, "x") == "s-y2"  # then sheddable: y holds most, its newest
    assert queue.shed_for(0, "x") == "s-y1"  # x and y hold one each: the newest goes
    assert queue.shed_for(0, "x") == "s-x"
    # Only standard is left: a standard newcomer of the same tenant is refused.
    assert queue.shed_for(0, "x") is None
    assert queue.shed_for(-1, "w") is None  # nothing below sheddable to shed
    assert _release(queue) == ["n-x"]


def test_the_rule_that_displaced_a_request_is_said() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    queue.hold("s", 0.0, priority=-1, tenant="x")
    _hold_all(queue, ["a0", "a1", "a2"], tenant="a")
    assert queue.displace(0, "b") == ("s", BY_CLASS)
    assert queue.displace(0, "b") == ("a2", BY_TENANT)
    assert queue.displace(0, "a") is None


def test_a_request_that_cannot_go_is_passed_over_and_keeps_its_place() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    queue.hold("crit-lora", 0.0, priority=1, tenant="t1")
    queue.hold("x1", 1.0, tenant="t1")
    queue.hold("lora1", 2.0, tenant="t1")
    queue.hold("x2", 3.0, tenant="t1")
    queue.hold("y1", 4.0, tenant="t2")
    queue.hold("y2", 5.0, tenant="t2")
    blocked = {"crit-lora", "lora1"}
    asked: list[str] = []
    free = [3]

    def take(item: str) -> int | Skip | None:
        asked.append(item)
        if item in blocked:
            return SKIP
        return free[0] if free[0] > 0 else None

    out = []
    for item, _, _ in queue.hand_out(take):
        free[0] -= 1
        out.append(item)
    # The critical class has nothing that can go: standard goes, its tenants in turns,
    # each tenant's own requests in arrival order, past the one that cannot go.
    assert out == ["x1", "y1", "x2"]
    assert asked.count("crit-lora") == 1 and len(queue) == 3
    blocked.clear()
    # Free again: the ones passed over kept their places (class first, then arrival).
    assert _release(queue) == ["crit-lora", "y2", "lora1"]


def test_a_request_that_leaves_is_out_at_once() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    _hold_all(queue, ["a", "b", "c"], tenant="t", priority=1)
    assert queue.leave("b", priority=1, tenant="t")
    assert not queue.leave("b", priority=1, tenant="t")  # already out
    assert not queue.leave("a", priority=0, tenant="t")  # not held there
    assert len(queue) == 2
    assert _release(queue) == ["a", "c"]
    assert not queue


def test_a_full_buffer_pushes_out_the_heaviest_tenant_of_the_same_class() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    _hold_all(queue, [f"a{i}" for i in range(6)], tenant="a")
    queue.hold("b0", 9.0, tenant="b")
    assert queue.shed_for(0, "b") == "a5"  # a holds 6, b 1: b may take a's newest place
    queue.hold("b1", 10.0, tenant="b")
    assert queue.shed_for(0, "b") == "a4"
    queue.hold("b2", 11.0, tenant="b")
    # a holds 4, b 3: not two more, so the newcomer is refused (each keeps its share).
    assert queue.shed_for(0, "b") is None
    assert queue.shed_for(0, "a") is None  # a alone cannot push anyone out
    assert queue.shed_for(0, "c") == "a3"  # a third tenant holds none: a holds 2 more


def test_push_out_lets_a_tenant_alone_use_the_whole_buffer() -> None:
    queue: FairHoldQueue[str] = FairHoldQueue()
    _hold_all(queue, [f"a{i}" for i in range(3)], tenant="a")
    assert queue.shed_for(0, "a") is None  # one tenant, one class: refused, as before
    assert queue.shed_for(0, "c") == "a2"  # a newcomer tenant gets a place


def test_shedding_skips_requests_that_already_left() -> None:
    left = {"s1"}
    queue: FairHoldQueue[str] = FairHoldQueue(lambda name: name not in left)
    queue.hold("s0", 0.0, priority=-1)
    queue.hold("s1", 1.0, priority=-1)
    assert queue.shed_for(0) == "s0"
    assert queue.shed_for(0) is None and not queue


def test_drain_and_compact_keep_only_the_waiting() -> None:
    left: set[str] = set()
    queue: FairHoldQueue[str] = FairHoldQueue(lambda name: name not in left)
    _hold_all(queue, ["a", "b", "c"], tenant="t", priority=1)
    queue.hold("d", 3.0, tenant="u", priority=-1)
    left.add("b")
    queue.compact()
    assert len(queue) == 3
    assert sorted(queue.drain()) == ["a", "c", "d"]
    assert not queue and _release(queue) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("critical", 1),
        (" Standard ", 0),
        ("SHEDDABLE", -1),
        ("7", 7),
        ("-3", -3),
        ("+2", 2),
        ("1000000", 1_000_000),
        ("1000001", None),
        ("", None),
        ("high", None),
        ("1.5", None),
        ("٣", None),  # a digit, but not an ASCII one
        ("--1", None),
    ],
)
def test_priority_values_parse_as_documented(value: str, expected: int | None) -> None:
    assert parse_priority(value) == expected


def test_class_labels_are_three_whatever_the_integer() -> None:
    assert [class_label(p) for p in (1_000_000, 1, 0, -1, -7)] == [
        "critical",
        "critical",
        "standard",
        "sheddable",
        "sheddable",
    ]
