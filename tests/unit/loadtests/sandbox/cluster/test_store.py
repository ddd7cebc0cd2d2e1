"""The emulated cluster's store keeps the API server's storage rules.

Covers: create fills server fields and refuses duplicates; generateName;
optimistic concurrency (409 on a stale resourceVersion); status subresource
separation and generation bumps; no-op updates keep the version; graceful pod
deletion and finalizers; ownerReference garbage collection (background and
orphan, a dependent with two owners, references added or dropped by updates);
namespace deletion; watch replay from a version, 410 Gone when
compacted, synthetic ADDED from "0", selector watches seeing objects enter and
leave; overflowing watchers are closed; label and field selectors.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadtests.sandbox.cluster import errors
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.selectors import (
    parse_field_selector,
    parse_label_selector,
    selector_from_object,
)
from loadtests.sandbox.cluster.store import Store

PODS = by_group_version_plural("", "v1", "pods")
DEPLOYMENTS = by_group_version_plural("apps", "v1", "deployments")
NAMESPACES = by_group_version_plural("", "v1", "namespaces")
CONFIGMAPS = by_group_version_plural("", "v1", "configmaps")
assert PODS and DEPLOYMENTS and NAMESPACES and CONFIGMAPS


@pytest.fixture
def store() -> Store:
    s = Store(history_size=50)
    s.create(NAMESPACES, {"metadata": {"name": "default"}})
    return s


def deployment(name: str = "llama", replicas: int = 1, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}},
    }


def test_create_fills_server_fields(store: Store) -> None:
    obj = store.create(DEPLOYMENTS, deployment())
    meta = obj["metadata"]
    assert obj["apiVersion"] == "apps/v1" and obj["kind"] == "Deployment"
    assert meta["namespace"] == "default" and meta["generation"] == 1
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    with pytest.raises(errors.AlreadyExists, match=r'deployments\.apps "llama" already exists'):
        store.create(DEPLOYMENTS, deployment())


def test_create_in_missing_namespace_is_not_found(store: Store) -> None:
    with pytest.raises(errors.NotFound, match='namespaces "nope" not found'):
        store.create(PODS, {"metadata": {"name": "p", "namespace": "nope"}, "spec": {}})


def test_generate_name(store: Store) -> None:
    obj = store.create(PODS, {"metadata": {"generateName": "llama-"}, "spec": {}})
    assert obj["metadata"]["name"].startswith("llama-") and len(obj["metadata"]["name"]) == 11


def test_stale_update_conflicts(store: Store) -> None:
    first = store.create(DEPLOYMENTS, deployment())
    first["spec"]["replicas"] = 2
    updated = store.update(DEPLOYMENTS, first)
    assert updated["metadata"]["generation"] == 2
    first["spec"]["replicas"] = 3  # still carries the old resourceVersion
    with pytest.raises(errors.Conflict, match="the object has been modified"):
        store.update(DEPLOYMENTS, first)


def test_status_subresource_is_separate(store: Store) -> None:
    obj = store.create(DEPLOYMENTS, deployment())
    obj["status"] = {"readyReplicas": 1}
    obj["spec"]["replicas"] = 5
    after = store.update(DEPLOYMENTS, obj, subresource="status")
    assert after["status"] == {"readyReplicas": 1}
    assert after["spec"]["replicas"] == 1  # spec edits through /status are ignored
    assert after["metadata"]["generation"] == 1
    after["status"] = {"readyReplicas": 9}
    again = store.update(DEPLOYMENTS, after)
    assert again["status"] == {"readyReplicas": 1}  # status edits through the main resource too


def test_noop_update_keeps_version(store: Store) -> None:
    obj = store.create(DEPLOYMENTS, deployment())
    same = store.update(DEPLOYMENTS, obj)
    assert same["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def test_graceful_pod_deletion(store: Store) -> None:
    store.create(PODS, {"metadata": {"name": "p"}, "spec": {"nodeName": "gpu-1"}})
    pending = store.delete(PODS, "default", "p")
    assert pending["metadata"]["deletionGracePeriodSeconds"] == 30
    assert store.get(PODS, "default", "p")["metadata"]["deletionTimestamp"]
    store.delete(PODS, "default", "p", grace_period_s=0)
    with pytest.raises(errors.NotFound):
        store.get(PODS, "default", "p")


def test_unscheduled_pod_goes_at_once(store: Store) -> None:
    store.create(PODS, {"metadata": {"name": "p"}, "spec": {}})
    store.delete(PODS, "default", "p")
    with pytest.raises(errors.NotFound):
        store.get(PODS, "default", "p")


def test_finalizers_hold_deletion(store: Store) -> None:
    store.create(CONFIGMAPS, {"metadata": {"name": "c", "finalizers": ["x/y"]}})
    store.delete(CONFIGMAPS, "default", "c")
    held = store.get(CONFIGMAPS, "default", "c")
    assert held["metadata"]["deletionTimestamp"]
    held["metadata"]["finalizers"] = []
    store.update(CONFIGMAPS, held)
    with pytest.raises(errors.NotFound):
        store.get(CONFIGMAPS, "default", "c")


def _owned_pod(store: Store, owner: dict[str, Any], name: str) -> None:
    ref = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    store.create(PODS, {"metadata": {"name": name, "ownerReferences": [ref]}, "spec": {}})


def test_garbage_collection_background(store: Store) -> None:
    owner = store.create(DEPLOYMENTS, deployment())
    _owned_pod(store, owner, "p1")
    _owned_pod(store, owner, "p2")
    store.delete(DEPLOYMENTS, "default", "llama")
    assert store.list(PODS)[0] == []


def test_garbage_collection_orphan(store: Store) -> None:
    owner = store.create(DEPLOYMENTS, deployment())
    _owned_pod(store, owner, "p1")
    store.delete(DEPLOYMENTS, "default", "llama", propagation="Orphan")
    (pod,), _ = store.list(PODS)
    assert "ownerReferences" not in pod["metadata"]


def _ref(owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }


def test_dependent_with_two_owners_goes_with_the_last(store: Store) -> None:
    a = store.create(DEPLOYMENTS, deployment("a"))
    b = store.create(DEPLOYMENTS, deployment("b"))
    store.create(CONFIGMAPS, {"metadata": {"name": "c", "ownerReferences": [_ref(a), _ref(b)]}})
    store.delete(DEPLOYMENTS, "default", "a")
    held = store.get(CONFIGMAPS, "default", "c")
    assert held["metadata"]["ownerReferences"] == [_ref(b)]
    store.delete(DEPLOYMENTS, "default", "b")
    with pytest.raises(errors.NotFound):
        store.get(CONFIGMAPS, "default", "c")


def test_collection_follows_references_changed_by_updates(store: Store) -> None:
    a = store.create(DEPLOYMENTS, deployment("a"))
    b = store.create(DEPLOYMENTS, deployment("b"))
    adopted = store.create(CONFIGMAPS, {"metadata": {"name": "adopted"}})
    store.update(
        CONFIGMAPS, {**adopted, "metadata": {**adopted["metadata"], "ownerReferences": [_ref(a)]}}
    )
    released = store.create(
        CONFIGMAPS, {"metadata": {"name": "released", "ownerReferences": [_ref(a)]}}
    )
    store.update(
        CONFIGMAPS, {**released, "metadata": {**released["metadata"], "ownerReferences": [_ref(b)]}}
    )
    store.delete(DEPLOYMENTS, "default", "a")
    names = [o["metadata"]["name"] for o in store.list(CONFIGMAPS)[0]]
    assert names == ["released"]
    store.delete(DEPLOYMENTS, "default", "b")
    assert store.list(CONFIGMAPS)[0] == []


def test_namespace_deletion_removes_contents(store: Store) -> None:
    store.create(NAMESPACES, {"metadata": {"name": "team"}})
    store.create(CONFIGMAPS, {"metadata": {"name": "c", "namespace": "team"}})
    store.delete(NAMESPACES, None, "team")
    assert store.list(CONFIGMAPS, namespace="team")[0] == []


async def test_watch_replays_from_version(store: Store) -> None:
    obj = store.create(DEPLOYMENTS, deployment())
    rv = obj["metadata"]["resourceVersion"]
    obj["spec"]["replicas"] = 2
    store.update(DEPLOYMENTS, obj)
    store.delete(DEPLOYMENTS, "default", "llama")
    watcher = store.watch(DEPLOYMENTS, resource_version=rv)
    types = [(await watcher.next(0)).type for _ in range(2)]  # type: ignore[union-attr]
    assert types == ["MODIFIED", "DELETED"]
    assert await watcher.next(0) is None  # nothing more yet; the watch stays open
    watcher.close()


async def test_watch_from_zero_sends_synthetic_added(store: Store) -> None:
    store.create(DEPLOYMENTS, deployment("a"))
    store.create(DEPLOYMENTS, deployment("b"))
    watcher = store.watch(DEPLOYMENTS, resource_version="0")
    names = [(await watcher.next(0)).object["metadata"]["name"] for _ in range(2)]  # type: ignore[union-attr]
    assert names == ["a", "b"]
    watcher.close()


async def test_watch_too_old_is_gone(store: Store) -> None:
    first = store.create(DEPLOYMENTS, deployment())
    for i in range(60):  # more writes than the history keeps
        store.create(CONFIGMAPS, {"metadata": {"name": f"c{i}"}})
    with pytest.raises(errors.Gone, match="too old resource version"):
        store.watch(DEPLOYMENTS, resource_version=first["metadata"]["resourceVersion"])


async def test_selector_watch_sees_objects_enter_and_leave(store: Store) -> None:
    watcher = store.watch(DEPLOYMENTS, labels=parse_label_selector("tier=gpu"))
    obj = store.create(DEPLOYMENTS, deployment())
    obj["metadata"]["labels"] = {"tier": "gpu"}
    obj = store.update(DEPLOYMENTS, obj)
    obj["metadata"]["labels"] = {"tier": "cpu"}
    store.update(DEPLOYMENTS, obj)
    types = [(await watcher.next(0)).type for _ in range(2)]  # type: ignore[union-attr]
    assert types == ["ADDED", "DELETED"]
    watcher.close()


async def test_overflowing_watcher_is_closed() -> None:
    store = Store(max_pending_per_watcher=3)
    store.create(NAMESPACES, {"metadata": {"name": "default"}})
    watcher = store.watch(CONFIGMAPS)
    for i in range(5):
        store.create(CONFIGMAPS, {"metadata": {"name": f"c{i}"}})
    assert watcher.overflowed and watcher.closed
    events = [e async for e in watcher]
    assert len(events) == 3


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        pytest.param("app=x", {"app": "x"}, True, id="equals"),
        pytest.param("app==x", {"app": "y"}, False, id="double-equals-miss"),
        pytest.param("app!=x", {}, True, id="not-equals-absent"),
        pytest.param("env in (a, b)", {"env": "b"}, True, id="in"),
        pytest.param("env notin (a,b)", {"env": "a"}, False, id="notin"),
        pytest.param("gpu", {"gpu": ""}, True, id="exists"),
        pytest.param("!gpu", {"gpu": "1"}, False, id="not-exists"),
        pytest.param("app=x,!gpu,env in (a)", {"app": "x", "env": "a"}, True, id="several"),
        pytest.param("", {"anything": "1"}, True, id="empty-selects-all"),
    ],
)
def test_label_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


def test_bad_label_selector_is_bad_request() -> None:
    with pytest.raises(errors.BadRequest):
        parse_label_selector("app in x")


def test_label_selector_object() -> None:
    sel = selector_from_object(
        {
            "matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}],
        }
    )
    assert sel.matches({"app": "x", "tier": "gpu"})
    assert not sel.matches({"app": "x"})
    assert selector_from_object({"app": "x"}).matches({"app": "x"})  # a Service's plain map


def test_field_selectors() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    assert parse_field_selector("metadata.name=p,spec.nodeName==n1").matches(pod)
    assert not parse_field_selector("status.phase!=Running").matches(pod)
    assert parse_field_selector("spec.missing=").matches(pod)
