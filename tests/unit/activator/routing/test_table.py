"""The routing table, with no network (:mod:`activator.routing.table`).

Covers: the routing order (header when allowed, host exact over wildcard,
longest prefix on segment boundaries, model), the cached route agreeing
with the full one and staying bounded; conflicts kept by the first name.
"""

from __future__ import annotations

import pytest

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
