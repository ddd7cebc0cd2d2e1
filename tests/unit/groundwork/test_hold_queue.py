"""The hold queue the Gate and the simulator share: order, leaving, deadlines, draining.

Covers: capacity goes to the held in arrival order, and ``take`` sees the
capacity already handed out (the caller counts it before the next call);
an entry that left is skipped at the head and dropped by ``compact``;
``expire`` removes from the head those held for the timeout, returning only
those still waiting; ``drain`` returns those still waiting and empties it.
"""

from __future__ import annotations

from groundwork.hold_queue import HoldQueue


def test_capacity_goes_out_in_arrival_order_and_take_sees_it_counted() -> None:
    queue: HoldQueue[str] = HoldQueue()
    for n, name in enumerate("abc"):
        queue.hold(name, since=float(n))
    slots = [2]  # two free slots: the third request stays held

    def take(_head: str) -> int | None:
        return slots[0] if slots[0] > 0 else None

    handed = []
    for name, since, slot in queue.hand_out(take):
        slots[0] -= 1  # the caller counts the slot before take() is asked again
        handed.append((name, since, slot))
    assert handed == [("a", 0.0, 2), ("b", 1.0, 1)]
    assert len(queue) == 1 and queue


def test_those_that_left_are_skipped_and_compacted() -> None:
    left: set[str] = set()
    queue: HoldQueue[str] = HoldQueue(lambda name: name not in left)
    for name in "abcd":
        queue.hold(name, since=0.0)
    left.update({"a", "c"})
    handing = queue.hand_out(lambda _head: 1)
    assert next(handing)[0] == "b"  # a left: skipped at the head
    handing.close()
    queue.hold("e", since=1.0)
    left.add("e")
    queue.compact()
    assert len(queue) == 1  # only d: c and e left, wherever they were
    assert queue.drain() == ["d"] and not queue


def test_expire_takes_the_timed_out_from_the_head() -> None:
    left = {"b"}
    queue: HoldQueue[str] = HoldQueue(lambda name: name not in left)
    queue.hold("a", since=0.0)
    queue.hold("b", since=1.0)
    queue.hold("c", since=5.0)
    assert queue.expire(10.0, now=9.0) == []
    assert queue.expire(10.0, now=11.0) == ["a"]  # b had left: dropped, not returned
    assert [name for name, _, _ in queue.hand_out(lambda _head: 1)] == ["c"]
