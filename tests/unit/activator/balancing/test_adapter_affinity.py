"""Routing by LoRA adapter and unloading idle ones (activator.balancing.adapter_affinity).

Covers: loaded-and-room first, least loaded among those; else a free slot,
least loaded; else a slot made by unloading the least recently used idle
adapter; else hold; an adapter being unloaded is neither sent to nor loaded
again there, and keeps its slot; a replica that refused the adapter or is full is never
chosen; the keep-alive decision unloads only managed, idle, overdue
adapters, least recently used first.
"""

from __future__ import annotations

from activator.balancing.adapter_affinity import (
    AdapterChoice,
    Move,
    ReplicaAdapters,
    choose,
    idle_adapters,
)


def _r(
    loaded: str = "",
    *,
    max_loras: int = 2,
    in_flight: int = 0,
    busy: str = "",
    refused: str = "",
    used: dict[str, float] | None = None,
) -> ReplicaAdapters:
    def names(text: str) -> frozenset[str]:
        return frozenset(n for n in text.split(",") if n)

    return ReplicaAdapters(
        loaded=names(loaded),
        max_loras=max_loras,
        in_flight=in_flight,
        busy=names(busy),
        refused=names(refused),
        last_used=used or {},
    )


def test_a_replica_that_has_it_loaded_wins_over_a_less_loaded_one() -> None:
    replicas = [_r(in_flight=0), _r("a", in_flight=5), _r("a", in_flight=3)]
    assert choose("a", replicas, limit=0) == AdapterChoice(2, Move.SEND)


def test_loaded_but_full_loads_it_on_another_replica_with_a_free_slot() -> None:
    replicas = [_r("a", in_flight=4), _r("b", in_flight=2), _r(in_flight=1)]
    assert choose("a", replicas, limit=4) == AdapterChoice(2, Move.LOAD)


def test_no_free_slot_unloads_the_least_recently_used_idle_adapter() -> None:
    replicas = [
        _r("b,c", busy="b,c", in_flight=2),  # every slot busy: never chosen
        _r("d,e", busy="e", in_flight=3, used={"d": 5.0, "e": 1.0}),
        _r("f,g", in_flight=4, used={"f": 9.0, "g": 2.0}),
    ]
    assert choose("a", replicas, limit=0) == AdapterChoice(1, Move.LOAD, evict="d")
    replicas[1] = _r("d,e", busy="d,e", in_flight=3)
    assert choose("a", replicas, limit=0) == AdapterChoice(2, Move.LOAD, evict="g")


def test_an_adapter_being_unloaded_keeps_its_slot_and_is_not_sent_to() -> None:
    unloading = ReplicaAdapters(
        loaded=frozenset({"b"}), max_loras=2, in_flight=0, unloading=frozenset({"a"})
    )
    spare = _r(in_flight=3)
    assert choose("a", [unloading, spare], limit=0) == AdapterChoice(1, Move.LOAD)
    assert choose("c", [unloading], limit=0) == AdapterChoice(0, Move.LOAD, evict="b")


def test_hold_when_nothing_can_take_it() -> None:
    full = [_r("b,c", busy="b,c"), _r(refused="a"), _r(in_flight=4)]
    assert choose("a", full, limit=4) is None
    assert choose("a", [], limit=0) is None
    assert choose("a", [_r(max_loras=0)], limit=0) is None  # the server has no LoRA


def test_keep_alive_unloads_managed_idle_overdue_adapters_oldest_first() -> None:
    replica = _r(
        "a,b,c,d,static",
        max_loras=5,
        busy="c",
        used={"a": 50.0, "b": 10.0, "c": 0.0, "static": 0.0},
    )
    managed = frozenset({"a", "b", "c", "d"})
    assert idle_adapters(replica, managed=managed, keep_alive_s=60.0, now=100.0) == ["b"]
    assert idle_adapters(replica, managed=managed, keep_alive_s=60.0, now=110.0) == ["b", "a"]
