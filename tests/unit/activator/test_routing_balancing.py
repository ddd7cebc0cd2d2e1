"""Routing table and balancing functions, with no network.

Covers: DESIGN §3's routing order (header when allowed, host exact over
wildcard, longest prefix on segment boundaries, model); conflicts kept by the
first name; power of two choices with a seeded RNG never picks a full
replica and spreads ties; least-in-flight; a single replica at its limit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from activator.balancing.least_loaded import least_in_flight, pick, power_of_two_choices
from activator.routing.table import RoutingTable
from activator.targets import TargetSpec

TABLE = RoutingTable.build(
    [
        TargetSpec(name="ns/exact", hosts=("llama.example.com",)),
        TargetSpec(name="ns/wild", hosts=("*.example.com",)),
        TargetSpec(name="ns/short", path_prefix="/llama"),
        TargetSpec(name="ns/long", path_prefix="/llama/v2"),
        TargetSpec(name="ns/root", path_prefix="/"),
        TargetSpec(name="ns/model", models=("m1", "m2")),
    ]
)


def test_route_cached_answers_as_route_does_and_stays_bounded() -> None:
    table = RoutingTable.build(
        [
            TargetSpec(name="ns/exact", hosts=("llama.example.com",)),
            TargetSpec(name="ns/short", path_prefix="/llama"),
        ]
    )
    cases = [
        ("llama.example.com", "/x"),
        ("other", "/llama/v1"),
        ("other", "/llamas"),
        (None, "/llama"),
        (None, "/nothing"),
    ]
    for _ in range(2):  # the second round is answered from the cache
        for host, path in cases:
            raw = host.encode() if host is not None else None
            assert table.route_cached(raw, path) == table.route(host=host, path=path)
    for i in range(5000):
        assert table.route_cached(None, f"/llama?i={i}") == "ns/short"
    assert len(table._cache) <= 4096


@pytest.mark.parametrize(
    ("host", "path", "header", "expected"),
    [
        pytest.param("llama.example.com", "/x", None, "ns/exact", id="exact host"),
        pytest.param("LLAMA.example.com:8080", "/x", None, "ns/exact", id="host case and port"),
        pytest.param("other.example.com", "/x", None, "ns/wild", id="wildcard one label"),
        pytest.param("a.b.example.com", "/llama", None, "ns/short", id="wildcard not two labels"),
        pytest.param("x", "/llama/v2/chat?q=1", None, "ns/long", id="longest prefix"),
        pytest.param("x", "/llama/v1", None, "ns/short", id="shorter prefix"),
        pytest.param("x", "/llamas", None, "ns/root", id="segment boundary"),
        pytest.param("x", "/llama", "ns/model", "ns/model", id="header first"),
        pytest.param("x", "/llama", "ns/missing", None, id="unknown header target"),
    ],
)
def test_route_order(host: str, path: str, header: str | None, expected: str | None) -> None:
    assert TABLE.route(host=host, path=path, header_target=header) == expected


def test_model_routing_and_conflicts() -> None:
    assert TABLE.wants_model("POST", "/v1/chat/completions")
    assert not TABLE.wants_model("GET", "/v1/models")
    assert TABLE.by_model("m2") == "ns/model"
    assert TABLE.by_model(["m1"]) is None
    table = RoutingTable.build(
        [TargetSpec(name="ns/b", models=("m",)), TargetSpec(name="ns/a", models=("m",))]
    )
    assert table.by_model("m") == "ns/a"
    assert table.conflicts
    assert "ns/a and ns/b" in table.conflicts[0]
    assert RoutingTable.build([]).route(host="x", path="/") is None


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
