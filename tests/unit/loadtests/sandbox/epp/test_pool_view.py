"""An InferencePool and its pods as the fake endpoint picker's endpoints, and which one has room.

Covers: the pool's matchLabels pick Ready pods with an address in its
namespace, each target port making a ``<pod>-rank-<i>`` endpoint; a pod not
Ready, without an address, in another namespace or not matching is left out;
a missing pool or one without selector or ports has no endpoints and says
why. Picking: the endpoint with the fewest requests in flight, then tokens,
then name; none at its concurrency limit; saturation is in-flight over
capacity, 1.0 for an empty pool.
"""

from __future__ import annotations

from typing import Any

from loadtests.sandbox.epp.picking import InFlight, pick, saturation
from loadtests.sandbox.epp.pool_view import Endpoint, pool_view

POOL = {
    "spec": {
        "selector": {"matchLabels": {"app": "llama"}},
        "targetPorts": [{"number": 8000}, {"number": 8001}],
    }
}


def pod(
    name: str, *, ready: bool = True, ip: str | None = "127.9.1.1", **meta: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml", "labels": {"app": "llama"}, **meta},
        "status": {
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_ready_selected_pods_become_one_endpoint_per_target_port() -> None:
    pods = [
        pod("a"),
        pod("b", ready=False),
        pod("c", ip=None),
        pod("d", namespace="other"),
        pod("e", labels={"app": "mistral"}),
    ]
    view = pool_view("ml", "llama", POOL, pods)
    assert view.problem == ""
    assert view.endpoints == (
        Endpoint("a-rank-0", "ml", "127.9.1.1", 8000),
        Endpoint("a-rank-1", "ml", "127.9.1.1", 8001),
    )
    assert view.endpoints[0].url == "http://127.9.1.1:8000"


def test_no_pool_or_no_selector_means_no_endpoints_and_says_why() -> None:
    missing = pool_view("ml", "llama", None, [pod("a")])
    assert missing.endpoints == () and "not found" in missing.problem
    bare = pool_view("ml", "llama", {"spec": {"targetPorts": [{"number": 1}]}}, [pod("a")])
    assert bare.endpoints == () and "matchLabels" in bare.problem


E1, E2 = Endpoint("e1", "ml", "127.0.0.2", 1), Endpoint("e2", "ml", "127.0.0.3", 1)


def test_the_least_loaded_endpoint_with_room_goes_first() -> None:
    loads = {"e1": InFlight(2, 10), "e2": InFlight(2, 5)}
    assert pick([E1, E2], loads, max_concurrency=3) == E2  # fewer tokens
    assert pick([E1, E2], {"e2": InFlight(1, 0)}, max_concurrency=3) == E1  # nothing in flight
    assert pick([E1, E2], {"e1": InFlight(3), "e2": InFlight(3)}, max_concurrency=3) is None


def test_saturation_is_in_flight_over_capacity_and_one_when_empty() -> None:
    assert saturation([], {}, max_concurrency=4) == 1.0
    assert saturation([E1, E2], {"e1": InFlight(3), "e2": InFlight(1)}, max_concurrency=4) == 0.5
