"""The API server's HTTP semantics, checked with a raw HTTPS client.

Covers: 401 without or with an unknown token; discovery in both shapes
(aggregated v2 when asked, plain otherwise) with scale/status subresources;
/openapi/v3 root and group documents declaring ``fieldValidation`` on
PATCH, /openapi/v2 404; create with generateName and defaults, dryRun;
409 AlreadyExists and 409 Conflict on a stale resourceVersion; the status
subresource keeping spec and status apart; the scale subresource (GET,
merge patch, 422 on negative replicas); JSON patch (test op failing with
422), merge patch, strategic merge by merge key; list with label and field
selectors and limit/continue paging; Tables with includeObject; watch from
a version, bookmarks, timeoutSeconds, 410 Gone as an ERROR event then a
successful re-list and re-watch; selector watches seeing objects leave;
delete with preconditions, propagation (Orphan) and deletecollection;
events.k8s.io over the core Events both ways; Warn-mode warnings; fault
injection (503, latency, watch cut) over the admin endpoint.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from loadtests.sandbox.cluster.apiserver import ApiServer
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.store import Store

from .conftest import Api

DEPLOYMENTS = by_group_version_plural("apps", "v1", "deployments")
assert DEPLOYMENTS
NS = "/api/v1/namespaces/default"
DEPLOY = "/apis/apps/v1/namespaces/default/deployments"


def deployment(name: str = "llama", replicas: int = 1, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name, **labels}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "vllm", "image": "vllm:1", "ports": [{"containerPort": 8000}]}
                    ]
                },
            },
        },
    }


async def test_unauthenticated_is_401(api: Api) -> None:
    code, body, _ = await api.call("GET", "/api/v1/pods", token="")
    assert code == 401 and body["reason"] == "Unauthorized"
    code, body, _ = await api.call("GET", "/api/v1/pods", token="nope")
    assert code == 401


async def test_discovery_both_shapes(api: Api) -> None:
    aggregated = (
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    )
    code, body, headers = await api.call("GET", "/apis", accept=aggregated)
    assert code == 200 and body["kind"] == "APIGroupDiscoveryList"
    assert "as=APIGroupDiscoveryList" in headers["Content-Type"]
    apps = next(i for i in body["items"] if i["metadata"].get("name") == "apps")
    deploy = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments")
    scale = next(s for s in deploy["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    code, body, _ = await api.call("GET", "/apis")
    assert body["kind"] == "APIGroupList"
    assert {"apps", "events.k8s.io", "discovery.k8s.io"} <= {g["name"] for g in body["groups"]}
    code, body, _ = await api.call("GET", "/apis/apps/v1")
    names = {r["name"] for r in body["resources"]}
    assert {"deployments", "deployments/scale", "deployments/status"} <= names
    code, body, _ = await api.call("GET", "/api")
    assert body["kind"] == "APIVersions" and body["versions"] == ["v1"]


async def test_openapi_v3_declares_field_validation(api: Api) -> None:
    code, root, _ = await api.call("GET", "/openapi/v3")
    url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
    code, doc, _ = await api.call("GET", url)
    assert code == 200
    item = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    patch = item["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "version": "v1",
        "kind": "Deployment",
    }
    assert any(p["name"] == "fieldValidation" for p in patch["parameters"])
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    containers = doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"][
        "containers"
    ]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    code, _, _ = await api.call(
        "GET", "/openapi/v2", accept="application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    )
    assert code == 404


async def test_create_defaults_generate_name_dry_run_and_conflicts(api: Api, store: Store) -> None:
    body = deployment()
    code, created, _ = await api.call("POST", DEPLOY, body=body)
    assert code == 201
    assert created["spec"]["strategy"]["type"] == "RollingUpdate"
    assert created["metadata"]["generation"] == 1
    code, err, _ = await api.call("POST", DEPLOY, body=body)
    assert code == 409 and err["reason"] == "AlreadyExists"
    assert err["message"] == 'deployments.apps "llama" already exists'
    gen = {"metadata": {"generateName": "cm-"}, "data": {"a": "b"}}
    code, made, _ = await api.call("POST", f"{NS}/configmaps", body=gen)
    assert code == 201 and made["metadata"]["name"].startswith("cm-")
    code, _dry, _ = await api.call("POST", DEPLOY, body=deployment("dry"), params={"dryRun": "All"})
    assert code == 201 and store.peek(DEPLOYMENTS, "default", "dry") is None
    # Update with a stale version: 409 Conflict, worded as the real server does.
    stale = dict(created)
    stale["spec"] = {**created["spec"], "replicas": 5}
    code, updated, _ = await api.call("PUT", f"{DEPLOY}/llama", body=stale)
    assert code == 200 and updated["metadata"]["generation"] == 2
    code, err, _ = await api.call("PUT", f"{DEPLOY}/llama", body=stale)
    assert code == 409 and err["reason"] == "Conflict"
    assert err["message"].startswith('Operation cannot be fulfilled on deployments.apps "llama"')


async def test_status_and_scale_subresources(api: Api) -> None:
    await api.call("POST", DEPLOY, body=deployment(replicas=2))
    code, obj, _ = await api.call(
        "PATCH",
        f"{DEPLOY}/llama/status",
        body={"spec": {"replicas": 9}, "status": {"replicas": 2, "readyReplicas": 1}},
        content_type="application/merge-patch+json",
    )
    assert code == 200
    assert obj["status"]["readyReplicas"] == 1 and obj["spec"]["replicas"] == 2
    code, scale, _ = await api.call("GET", f"{DEPLOY}/llama/scale")
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "app=llama"}
    code, scale, _ = await api.call(
        "PATCH",
        f"{DEPLOY}/llama/scale",
        body={"spec": {"replicas": 4}},
        content_type="application/merge-patch+json",
    )
    assert code == 200 and scale["spec"]["replicas"] == 4
    code, obj, _ = await api.call("GET", f"{DEPLOY}/llama")
    assert obj["spec"]["replicas"] == 4 and obj["status"]["readyReplicas"] == 1
    code, err, _ = await api.call(
        "PATCH",
        f"{DEPLOY}/llama/scale",
        body={"spec": {"replicas": -1}},
        content_type="application/merge-patch+json",
    )
    assert code == 422
    assert err["message"] == (
        'Scale.autoscaling "llama" is invalid: spec.replicas: Invalid value: -1: '
        "must be greater than or equal to 0"
    )


async def test_patch_types(api: Api) -> None:
    await api.call("POST", DEPLOY, body=deployment())
    smp = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "sidecar", "image": "envoy"},
                        {"name": "vllm", "env": [{"name": "X", "value": "1"}]},
                    ]
                }
            }
        }
    }
    code, obj, _ = await api.call(
        "PATCH",
        f"{DEPLOY}/llama",
        body=smp,
        content_type="application/strategic-merge-patch+json",
    )
    assert code == 200, obj
    containers = obj["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["vllm", "sidecar"]
    assert containers[0]["image"] == "vllm:1" and containers[0]["env"] == [
        {"name": "X", "value": "1"}
    ]
    ops = [
        {"op": "test", "path": "/spec/replicas", "value": 1},
        {"op": "replace", "path": "/spec/replicas", "value": 2},
        {"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}},
    ]
    code, obj, _ = await api.call(
        "PATCH", f"{DEPLOY}/llama", body=ops, content_type="application/json-patch+json"
    )
    assert (
        code == 200
        and obj["spec"]["replicas"] == 2
        and obj["metadata"]["annotations"] == {"a": "b"}
    )
    code, _, _ = await api.call(
        "PATCH", f"{DEPLOY}/llama", body=ops[:1], content_type="application/json-patch+json"
    )
    assert code == 422
    code, obj, _ = await api.call(
        "PATCH",
        f"{DEPLOY}/llama",
        body={"metadata": {"annotations": {"a": None}}},
        content_type="application/merge-patch+json",
    )
    assert "a" not in (obj["metadata"].get("annotations") or {})
    # A patch carrying a stale resourceVersion is a conflict.
    code, _err, _ = await api.call(
        "PATCH",
        f"{DEPLOY}/llama",
        body={"metadata": {"resourceVersion": "1"}},
        content_type="application/merge-patch+json",
    )
    assert code == 409


async def test_field_validation_modes(api: Api) -> None:
    body = deployment()
    body["spec"]["bogus"] = 1
    code, err, _ = await api.call("POST", DEPLOY, body=body, params={"fieldValidation": "Strict"})
    assert code == 400 and err["reason"] == "BadRequest"
    assert err["message"].endswith('strict decoding error: unknown field "spec.bogus"')
    code, obj, headers = await api.call("POST", DEPLOY, body=body)
    assert code == 201 and "bogus" not in obj["spec"]
    assert headers.getall("Warning") == ['299 - "unknown field \\"spec.bogus\\""']
    code, err, _ = await api.call(
        "PATCH",
        f"{DEPLOY}/llama",
        body={"spec": {"replicas": "many"}},
        content_type="application/merge-patch+json",
    )
    assert code == 422 and err["details"]["causes"][0]["field"] == "spec.replicas"


async def test_list_selectors_and_paging(api: Api) -> None:
    for i in range(5):
        await api.call("POST", DEPLOY, body=deployment(f"m{i}", tier="gpu" if i % 2 else "cpu"))
    _, body, _ = await api.call("GET", DEPLOY, params={"labelSelector": "tier=gpu"})
    assert [i["metadata"]["name"] for i in body["items"]] == ["m1", "m3"]
    _, body, _ = await api.call("GET", DEPLOY, params={"labelSelector": "tier in (cpu),app!=m0"})
    assert [i["metadata"]["name"] for i in body["items"]] == ["m2", "m4"]
    _, body, _ = await api.call(
        "GET", "/apis/apps/v1/deployments", params={"fieldSelector": "metadata.name=m3"}
    )
    assert [i["metadata"]["name"] for i in body["items"]] == ["m3"]
    names: list[str] = []
    params = {"limit": "2"}
    pages = 0
    while True:
        _code, body, _ = await api.call("GET", DEPLOY, params=params)
        pages += 1
        names += [i["metadata"]["name"] for i in body["items"]]
        token = body["metadata"].get("continue")
        if not token:
            break
        assert body["metadata"]["remainingItemCount"] == 5 - len(names)
        params = {"limit": "2", "continue": token}
    assert names == [f"m{i}" for i in range(5)] and pages == 3


async def test_tables(api: Api) -> None:
    await api.call("POST", DEPLOY, body=deployment(replicas=3))
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    _, table, _ = await api.call("GET", DEPLOY, accept=accept)
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]][:5] == [
        "Name",
        "Ready",
        "Up-to-date",
        "Available",
        "Age",
    ]
    row = table["rows"][0]
    assert row["cells"][:4] == ["llama", "0/3", 0, 0]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    _, table, _ = await api.call("GET", DEPLOY, accept=accept, params={"includeObject": "Object"})
    assert table["rows"][0]["object"]["spec"]["replicas"] == 3
    _code, table, _ = await api.call("GET", DEPLOY, accept=accept, params={"includeObject": "None"})
    assert "object" not in table["rows"][0]


async def read_events(response: aiohttp.ClientResponse, count: int) -> list[dict[str, Any]]:
    events = []
    while len(events) < count:
        line = await asyncio.wait_for(response.content.readline(), 10)
        assert line, "the watch ended early"
        events.append(json.loads(line))
    return events


async def test_watch_replay_bookmark_timeout_and_selector_leave(
    api: Api, server: ApiServer
) -> None:
    _code, created, _ = await api.call("POST", DEPLOY, body=deployment(tier="gpu"))
    rv = created["metadata"]["resourceVersion"]
    await api.call(
        "PATCH",
        f"{DEPLOY}/llama",
        body={"spec": {"replicas": 2}},
        content_type="application/merge-patch+json",
    )
    url = server.url + DEPLOY
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    params = {
        "watch": "true",
        "resourceVersion": rv,
        "allowWatchBookmarks": "true",
        "labelSelector": "tier=gpu",
        "timeoutSeconds": "2",
    }
    async with api.session.get(url, params=params, headers=headers, ssl=api.ssl_context) as resp:
        assert resp.status == 200
        (modified,) = await read_events(resp, 1)
        assert modified["type"] == "MODIFIED" and modified["object"]["spec"]["replicas"] == 2
        (bookmark,) = await read_events(resp, 1)  # nothing happens: a bookmark comes
        assert bookmark["type"] == "BOOKMARK"
        assert (
            bookmark["object"]["metadata"]["resourceVersion"]
            == modified["object"]["metadata"]["resourceVersion"]
        )
        # The object stops matching the selector: the watcher sees it leave.
        await api.call(
            "PATCH",
            f"{DEPLOY}/llama",
            body={"metadata": {"labels": {"tier": "cpu"}}},
            content_type="application/merge-patch+json",
        )
        event = (await read_events(resp, 1))[0]
        while event["type"] == "BOOKMARK":
            event = (await read_events(resp, 1))[0]
        assert event["type"] == "DELETED" and event["object"]["metadata"]["name"] == "llama"
        # timeoutSeconds ends the stream cleanly.
        rest = await asyncio.wait_for(resp.content.read(), 10)
        assert all(json.loads(line)["type"] == "BOOKMARK" for line in rest.splitlines() if line)


async def test_stale_watch_gets_410_then_relists(api: Api, server: ApiServer, store: Store) -> None:
    _, created, _ = await api.call("POST", DEPLOY, body=deployment())
    old_rv = created["metadata"]["resourceVersion"]
    await api.call("POST", DEPLOY, body=deployment("second"))
    server.cut_watches(compact=True)
    url = server.url + DEPLOY
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    async with api.session.get(
        url, params={"watch": "1", "resourceVersion": old_rv}, headers=headers, ssl=api.ssl_context
    ) as resp:
        assert resp.status == 200
        (error,) = await read_events(resp, 1)
        assert error["type"] == "ERROR"
        assert error["object"]["code"] == 410 and error["object"]["reason"] == "Expired"
        assert error["object"]["message"].startswith("too old resource version")
        assert await resp.content.read() == b""
    # Re-list, then watch from the list's version: only what happens next arrives.
    _code, listing, _ = await api.call("GET", DEPLOY)
    assert {i["metadata"]["name"] for i in listing["items"]} == {"llama", "second"}
    async with api.session.get(
        url,
        params={"watch": "true", "resourceVersion": listing["metadata"]["resourceVersion"]},
        headers=headers,
        ssl=api.ssl_context,
    ) as resp:
        await api.call("DELETE", f"{DEPLOY}/second")
        (event,) = await read_events(resp, 1)
        assert event["type"] == "DELETED" and event["object"]["metadata"]["name"] == "second"


async def test_watch_cut_by_fault_ends_stream(api: Api, server: ApiServer) -> None:
    url = server.url + DEPLOY
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    async with api.session.get(
        url, params={"watch": "true"}, headers=headers, ssl=api.ssl_context
    ) as resp:
        # The server registers the watch before it sends the headers we hold.
        assert server.open_watches == 1
        code, _state, _ = await api.call("POST", "/_sandbox/faults", body={"cut_watches": True})
        assert code == 200
        assert await asyncio.wait_for(resp.content.read(), 10) == b""


async def test_unavailable_and_slow_faults(api: Api, server: ApiServer) -> None:
    code, _, _ = await api.call("POST", "/_sandbox/faults", body={"unavailable_s": 30})
    assert code == 200
    code, err, headers = await api.call("GET", DEPLOY)
    assert code == 503 and err["reason"] == "ServiceUnavailable" and headers["Retry-After"] == "1"
    code, _, _ = await api.call("DELETE", "/_sandbox/faults")
    code, _, _ = await api.call("GET", DEPLOY)
    assert code == 200
    loop = asyncio.get_running_loop()
    server.slow_down(latency_s=0.3, duration_s=30)
    started = loop.time()
    code, _, _ = await api.call("GET", DEPLOY)
    assert code == 200 and loop.time() - started >= 0.3
    await server.restore()
    # Only the admin may touch faults.
    token = server.mint_token("default", "someone")
    code, _, _ = await api.call("POST", "/_sandbox/faults", body={"unavailable_s": 1}, token=token)
    assert code == 401


async def test_refused_connections_then_recovery(api: Api, server: ApiServer) -> None:
    await server.make_unavailable(30, refuse_connections=True)
    async with aiohttp.ClientSession() as fresh:
        try:
            async with fresh.get(server.url + "/version", ssl=api.ssl_context) as resp:
                raise AssertionError(f"connected while refusing: {resp.status}")
        except aiohttp.ClientConnectionError:
            pass
    await server.restore()
    async with (
        aiohttp.ClientSession() as fresh,
        fresh.get(
            server.url + "/version",
            ssl=api.ssl_context,
            headers={"Authorization": f"Bearer {server.admin_token}"},
        ) as resp,
    ):
        assert resp.status == 200


async def test_delete_preconditions_orphan_and_collection(api: Api) -> None:
    code, owner, _ = await api.call("POST", DEPLOY, body=deployment())
    pod = {
        "metadata": {
            "name": "p",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "llama",
                    "uid": owner["metadata"]["uid"],
                }
            ],
            "labels": {"app": "llama"},
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    await api.call("POST", f"{NS}/pods", body=pod)
    code, err, _ = await api.call(
        "DELETE",
        f"{DEPLOY}/llama",
        body={"preconditions": {"uid": "not-the-uid"}},
    )
    assert code == 409 and "Precondition failed" in err["message"]
    code, status, _ = await api.call(
        "DELETE", f"{DEPLOY}/llama", params={"propagationPolicy": "Orphan"}
    )
    assert code == 200 and status["status"] == "Success"
    code, orphan, _ = await api.call("GET", f"{NS}/pods/p")
    assert code == 200 and "ownerReferences" not in orphan["metadata"]
    for name in ("q", "r"):
        await api.call(
            "POST",
            f"{NS}/pods",
            body={**pod, "metadata": {"name": name, "labels": {"app": "other"}}},
        )
    code, deleted, _ = await api.call("DELETE", f"{NS}/pods", params={"labelSelector": "app=other"})
    assert code == 200 and sorted(i["metadata"]["name"] for i in deleted["items"]) == ["q", "r"]
    code, left, _ = await api.call("GET", f"{NS}/pods")
    assert [i["metadata"]["name"] for i in left["items"]] == ["p"]


async def test_events_api_groups_share_one_store(api: Api) -> None:
    new_event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "llama.1"},
        "eventTime": "2025-01-01T00:00:00.000000Z",
        "regarding": {"kind": "Deployment", "name": "llama", "namespace": "default", "uid": "u1"},
        "reason": "ScaledUp",
        "note": "0 -> 1",
        "type": "Normal",
        "action": "Scale",
        "reportingController": "tidal.dev/scaler",
        "reportingInstance": "scaler-0",
    }
    code, created, _ = await api.call(
        "POST", "/apis/events.k8s.io/v1/namespaces/default/events", body=new_event
    )
    assert code == 201, created
    assert created["note"] == "0 -> 1" and created["apiVersion"] == "events.k8s.io/v1"
    code, core, _ = await api.call(
        "GET",
        f"{NS}/events",
        params={"fieldSelector": "involvedObject.name=llama,involvedObject.kind=Deployment"},
    )
    (event,) = core["items"]
    assert event["message"] == "0 -> 1" and event["involvedObject"]["uid"] == "u1"
    assert event["reportingComponent"] == "tidal.dev/scaler"
    code, back, _ = await api.call(
        "GET",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        params={"fieldSelector": "regarding.name=llama"},
    )
    assert [e["reason"] for e in back["items"]] == ["ScaledUp"]
    assert back["items"][0]["regarding"]["kind"] == "Deployment"


async def test_unknown_resource_and_method(api: Api) -> None:
    code, err, _ = await api.call("GET", "/apis/apps/v1/namespaces/default/widgets")
    assert code == 404 and err["message"] == "the server could not find the requested resource"
    code, err, _ = await api.call("GET", f"{NS}/pods/p/log")
    assert code == 404


async def test_watch_list_with_initial_events_end_bookmark(api: Api, server: ApiServer) -> None:
    for name in ("a", "b"):
        await api.call("POST", DEPLOY, body=deployment(name))
    params = {
        "watch": "true",
        "sendInitialEvents": "true",
        "allowWatchBookmarks": "true",
        "resourceVersionMatch": "NotOlderThan",
        "resourceVersion": "",
    }
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    async with api.session.get(
        server.url + DEPLOY, params=params, headers=headers, ssl=api.ssl_context
    ) as resp:
        events = await read_events(resp, 3)
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events[:2]] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]
    assert events[2]["type"] == "BOOKMARK"
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_quantities_stored_canonically_and_bad_ones_refused(api: Api, store: Store) -> None:
    body = deployment("q")
    container = body["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": 1, "cpu": "1000m"}}
    code, created, _ = await api.call("POST", DEPLOY, body=body)
    assert code == 201
    limits = created["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "1", "cpu": "1"}
    assert DEPLOYMENTS is not None
    stored = store.get(DEPLOYMENTS, "default", "q")
    assert stored["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == limits

    bad = deployment("bad")
    bad["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "lots"}}
    code, status, _ = await api.call("POST", DEPLOY, body=bad)
    assert code == 400, status
    assert "quantities must match the regular expression" in status["message"]
    assert "spec.template.spec.containers[0].resources.limits.cpu" in status["message"]
