"""The EndpointSlice controller, driven on the store.

Covers: a Service's slice carries the real labels, owner, address type and
ports (a named targetPort resolved against the pods' containerPorts), and
one endpoint per pod with targetRef, nodeName and zone; endpoints follow
readiness; a Service that selects nothing gets the empty placeholder; the
conditions ready/serving/terminating for each pod state, as podToEndpoint
sets them; removing the selector removes the slices and deleting the
Service garbage-collects them.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadtests.sandbox.cluster.controllers.base import (
    DEPLOYMENTS,
    ENDPOINTSLICES,
    PODS,
    SERVICES,
)
from loadtests.sandbox.cluster.controllers.endpointslices import EndpointSliceController
from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.store import Store
from tests.unit.loadtests.sandbox.cluster.controllers.support import Changes, deployment, items

Obj = dict[str, Any]


def service(name: str = "llama", *, target: Any = "http", selector: bool = True) -> Obj:
    spec: Obj = {"ports": [{"name": "web", "port": 80, "targetPort": target}]}
    if selector:
        spec["selector"] = {"app": "llama"}
    return {"metadata": {"name": name, "labels": {"team": "ml"}}, "spec": spec}


def endpoints(store: Store) -> list[Obj]:
    return [e for s in items(store, ENDPOINTSLICES) for e in s.get("endpoints") or ()]


async def test_slice_shape_and_readiness(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    svc = store.create(SERVICES, service())
    store.create(DEPLOYMENTS, deployment(replicas=2, startup_delay="0.3s"))
    # First the pods are there but not ready...
    eps = await changes.until(lambda: len(endpoints(store)) == 2 and endpoints(store))
    assert all(
        e["conditions"] == {"ready": False, "serving": False, "terminating": False} for e in eps
    )
    # ... then ready after their startup delay.
    await changes.until(lambda: all(e["conditions"]["ready"] for e in endpoints(store)))
    (slice_,) = items(store, ENDPOINTSLICES)
    meta = slice_["metadata"]
    assert meta["name"].startswith("llama-")
    assert meta["labels"] == {
        "team": "ml",
        "kubernetes.io/service-name": "llama",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
    }
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "Service",
        svc["metadata"]["uid"],
        True,
    )
    assert slice_["addressType"] == "IPv4"
    assert slice_["ports"] == [{"name": "web", "protocol": "TCP", "port": 8000}]
    pods = {p["metadata"]["name"]: p for p in items(store, PODS)}
    for ep in slice_["endpoints"]:
        pod = pods[ep["targetRef"]["name"]]
        assert ep["addresses"] == [pod["status"]["podIP"]]
        assert ep["targetRef"] == {
            "kind": "Pod",
            "namespace": "default",
            "name": pod["metadata"]["name"],
            "uid": pod["metadata"]["uid"],
        }
        assert ep["nodeName"] == pod["spec"]["nodeName"]
        assert ep["zone"] in ("us-east-1a", "us-east-1b")


async def test_placeholder_when_nothing_selected(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    store.create(SERVICES, service())
    (slice_,) = await changes.until(lambda: items(store, ENDPOINTSLICES))
    assert slice_["endpoints"] == [] and "ports" not in slice_


async def test_selector_removed_and_service_deleted(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    store.create(SERVICES, service())
    store.create(SERVICES, service("other"))
    store.create(DEPLOYMENTS, deployment(replicas=1))
    await changes.until(lambda: len(endpoints(store)) == 2)
    svc = store.get(SERVICES, "default", "llama")
    del svc["spec"]["selector"]
    store.update(SERVICES, svc)
    await changes.until(lambda: len(items(store, ENDPOINTSLICES)) == 1)
    store.delete(SERVICES, "default", "other")
    await changes.until(lambda: not items(store, ENDPOINTSLICES))


def _pod(*, ready: bool, terminating: bool) -> Obj:
    meta: Obj = {"name": "p", "namespace": "default", "uid": "u"}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": ""},
        "status": {
            "podIP": "127.9.1.1",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


@pytest.mark.parametrize(
    ("ready", "terminating", "publish", "expected"),
    [
        pytest.param(True, False, False, (True, True, False), id="ready"),
        pytest.param(False, False, False, (False, False, False), id="not-ready"),
        pytest.param(True, True, False, (False, True, True), id="terminating-still-serving"),
        pytest.param(False, True, False, (False, False, True), id="terminating-not-serving"),
        pytest.param(False, False, True, (True, False, False), id="publish-not-ready"),
    ],
)
def test_endpoint_conditions(
    store: Store, ready: bool, terminating: bool, publish: bool, expected: tuple[bool, ...]
) -> None:
    from loadtests.sandbox.cluster.controllers.base import Cache

    controller = EndpointSliceController(store, Cache(store))
    svc = {"spec": {"publishNotReadyAddresses": publish}}
    conds = controller._endpoint(svc, _pod(ready=ready, terminating=terminating))["conditions"]
    assert (conds["ready"], conds["serving"], conds["terminating"]) == expected
