"""Kubernetes discovery against the emulated API server, through real watches.

Covers:
- an opted-in Deployment becomes a target with every routing annotation read
  (models, hosts, path-prefix, service, port by name, container-concurrency,
  max-buffered, cold-start-timeout, adapters from the annotation and from an
  opted-in ConfigMap); its endpoints come from the named
  Service's EndpointSlices on the named port; a Deployment without the
  opt-in label is ignored though annotated the same;
- endpoints follow the slices: new pods appear (not ready, then ready), a
  terminating pod leaves at once (held by a finalizer, so the terminating
  state is certain), scale-down removes pods;
- annotation changes are picked up; removing the opt-in label or deleting the
  Deployment removes the target, and adding it back brings it back;
- watch cuts with compaction (410 Gone, then a re-list) and an API outage
  (503s, then refused connections) never empty the target set: the last
  known state is kept and changes made meanwhile arrive after; a request
  sent through the in-process activator during the outage is answered by the
  real fake vLLM pod;
- a request held through a real cold start: the test's fake scaler scales
  the Deployment from 0 to 1 through the API when told to activate; the
  response's first byte comes shortly after the EndpointSlice turns ready
  (the direct prober slowed, so the watch alone is measured; the bound is
  loose, the benchmark carries the target).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from activator.app import start
from activator.kube.source import KubeSource
from loadtests.sandbox.cluster.cluster import SandboxCluster
from tests.e2e.activator.kube_support import (
    Api,
    SliceReadiness,
    Snapshots,
    deployment,
    ready_hosts,
    running_cluster,
    service,
)
from tests.integration.activator.helpers import FakeScaler, settings

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SELECTOR = "autoscaling.tidal.dev/enabled=true"

ROUTING = {
    "routing.tidal.dev/models": "llama-3-8b, llama-3-8b-instruct",
    "routing.tidal.dev/hosts": "llama.example.com,*.llama.example.com",
    "routing.tidal.dev/path-prefix": "/llama",
    "routing.tidal.dev/service": "llama-svc",
    "routing.tidal.dev/port": "http",
    "routing.tidal.dev/container-concurrency": "4",
    "routing.tidal.dev/max-buffered": "250",
    "routing.tidal.dev/cold-start-timeout": "90s",
    "routing.tidal.dev/adapters": "sql-lora=/models/sql",
    "routing.tidal.dev/adapters-configmap": "llama-adapters",
}
# The adapters ConfigMap carries the opt-in label, as the Deployment does.
ADAPTERS_CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "llama-adapters",
        "namespace": "default",
        "labels": {"autoscaling.tidal.dev/enabled": "true"},
    },
    "data": {"chat-lora": "org/chat-lora", "sql-lora": "org/overridden-by-the-annotation"},
}
# The Service lists a metrics port first, so "first port" would be wrong.
PORTS = [
    {"name": "metrics", "port": 9000, "targetPort": 9000},
    {"name": "http", "port": 80, "targetPort": "http"},
]


@contextlib.asynccontextmanager
async def watching(cluster: SandboxCluster) -> AsyncIterator[tuple[KubeSource, Snapshots]]:
    source = KubeSource(label_selector=SELECTOR, kubeconfig=cluster.kubeconfig)
    sink = Snapshots()
    task = asyncio.create_task(source.run(sink))
    try:
        yield source, sink
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def pod_names(api: Api, app: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in await api.pods(app))


async def test_discovery_annotations_endpoints_changes_and_deletion(tmp_path: Path) -> None:
    async with running_cluster(tmp_path / "cluster") as cluster, Api(cluster) as api:
        await api.create(service("llama-svc", app="llama", ports=PORTS))
        await api.create(ADAPTERS_CONFIGMAP)
        await api.create(deployment("llama", replicas=2, annotations=ROUTING))
        # Same annotations, no opt-in label: never a target.
        await api.create(service("other", app="other"))
        await api.create(deployment("other", replicas=1, annotations=ROUTING, opted_in=False))

        async with watching(cluster) as (_, sink):
            latest = await sink.wait_for(lambda t: len(ready_hosts(t.get("default/llama"))) == 2)
            found = latest["default/llama"]
            spec = found.spec
            assert set(latest) == {"default/llama"}
            assert spec.models == ("llama-3-8b", "llama-3-8b-instruct")
            assert spec.hosts == ("llama.example.com", "*.llama.example.com")
            assert spec.path_prefix == "/llama"
            assert spec.container_concurrency == 4
            assert spec.max_buffered == 250
            assert spec.cold_start_timeout_s == 90.0
            assert [(a.name, a.source) for a in spec.adapters] == [
                ("chat-lora", "org/chat-lora"),
                ("sql-lora", "/models/sql"),
            ]
            pods = await api.pods("llama")
            ips = {p["status"]["podIP"] for p in pods}
            assert ready_hosts(found) == ips
            # The http port's target (container port 8000), not the metrics port.
            assert {e.port for e in found.endpoints} == {8000}
            assert {e.name for e in found.endpoints} == {p["metadata"]["name"] for p in pods}

            # A third pod: listed not ready first (startup delay), then ready.
            await api.patch_deployment(
                "llama",
                {
                    "spec": {
                        "replicas": 3,
                        "template": {
                            "metadata": {"annotations": {"sandbox.tidal.dev/startup-delay": "1s"}}
                        },
                    }
                },
            )
            # (The template change rolls the pods; wait for three ready ones.)
            rolled = await sink.wait_for(lambda t: len(ready_hosts(t.get("default/llama"))) == 3)
            assert any(
                any(not e.ready for e in s["default/llama"].endpoints)
                for s in sink.history
                if "default/llama" in s
            ), "a starting pod was never listed as not ready"

            # A terminating pod leaves the target at once; a finalizer keeps it
            # terminating (in the API) for as long as the test needs.
            # The victim is one of the ready pods the activator lists: the rollout
            # may still be starting a pod (no IP yet) beside them.
            listed = ready_hosts(rolled["default/llama"])
            pods = [
                p
                for p in await api.pods("llama")
                if not p["metadata"].get("deletionTimestamp") and p["status"].get("podIP") in listed
            ]
            victim = pods[0]
            name, ip = victim["metadata"]["name"], victim["status"]["podIP"]
            path = f"/api/v1/namespaces/default/pods/{name}"
            await api.call(
                "PATCH", path, {"metadata": {"finalizers": ["tests.tidal.dev/hold"]}},
                content_type="application/merge-patch+json",
            )  # fmt: skip
            await api.delete(path)
            latest = await sink.wait_for(
                lambda t: ip not in {e.host for e in t["default/llama"].endpoints}
            )
            held = await api.call("GET", path)
            assert held["metadata"].get("deletionTimestamp"), "the pod should still be terminating"
            assert len(ready_hosts(latest["default/llama"])) >= 2
            await api.call(
                "PATCH", path, {"metadata": {"finalizers": None}},
                content_type="application/merge-patch+json",
            )  # fmt: skip

            # Annotation changes are picked up.
            await api.patch_deployment(
                "llama",
                {
                    "metadata": {
                        "annotations": {
                            "routing.tidal.dev/models": "llama-3-70b",
                            "routing.tidal.dev/max-buffered": "7",
                            "routing.tidal.dev/hosts": None,
                        }
                    }
                },
            )
            latest = await sink.wait_for(
                lambda t: (
                    t["default/llama"].spec.models == ("llama-3-70b",)
                    and t["default/llama"].spec.max_buffered == 7
                )
            )
            assert latest["default/llama"].spec.hosts == ()

            # Scale down: endpoints follow.
            await api.scale("llama", 1)
            await sink.wait_for(lambda t: len(t["default/llama"].endpoints) == 1)

            # Opt out (label removed) -> gone; opt back in -> back; delete -> gone.
            await api.patch_deployment(
                "llama", {"metadata": {"labels": {"autoscaling.tidal.dev/enabled": None}}}
            )
            await sink.wait_for(lambda t: "default/llama" not in t)
            await api.patch_deployment(
                "llama", {"metadata": {"labels": {"autoscaling.tidal.dev/enabled": "true"}}}
            )
            await sink.wait_for(lambda t: len(ready_hosts(t.get("default/llama"))) == 1)
            await api.delete("/apis/apps/v1/namespaces/default/deployments/llama")
            await sink.wait_for(lambda t: "default/llama" not in t)
            assert all("default/other" not in s for s in sink.history)


async def test_watch_cuts_410_and_outage_keep_last_known_state(tmp_path: Path) -> None:
    scaler = await FakeScaler().start()
    try:
        async with running_cluster(tmp_path / "cluster") as cluster, Api(cluster) as api:
            await api.create(service("llama", app="llama"))
            await api.create(
                deployment(
                    "llama",
                    replicas=1,
                    vllm=True,
                    annotations={"routing.tidal.dev/models": "llama-3-8b"},
                )
            )
            source = KubeSource(label_selector=SELECTOR, kubeconfig=cluster.kubeconfig)
            cfg = settings(scaler, kubeconfig=cluster.kubeconfig)
            activator = await start(cfg, source=source)
            url = f"http://127.0.0.1:{activator.data_port}/v1/completions"
            body = {"model": "llama-3-8b", "prompt": "hi", "max_tokens": 2}
            registry = activator.registry

            def ready_count() -> int:
                target = registry.targets.get("default/llama")
                return len(target.gate.endpoints.ready) if target is not None else 0

            # Every snapshot the registry takes after the first: never empty.
            seen_empty: list[int] = []
            registry._on_update = lambda: (
                seen_empty.append(registry.updates) if not registry.targets else None
            )
            try:
                async with aiohttp.ClientSession() as client:
                    await wait_for(lambda: ready_count() == 1, 30)
                    async with client.post(url, json=body) as resp:
                        assert resp.status == 200, await resp.text()

                    # 1. Watches cut with history compacted: 410 Gone, re-list.
                    lists_before = [r.lists for r in source.reflectors]
                    assert cluster.api is not None
                    assert cluster.api.cut_watches(compact=True) >= 3
                    await api.scale("llama", 2)
                    await wait_for(lambda: ready_count() == 2, 30)
                    assert all(
                        r.lists > before
                        for r, before in zip(source.reflectors, lists_before, strict=True)
                    ), "every reflector should have re-listed after 410 Gone"

                    # 2. The API answers 503 for a while, then refuses connections.
                    await cluster.api.make_unavailable(2.0)
                    async with client.post(url, json=body) as resp:
                        assert resp.status == 200, await resp.text()
                    await asyncio.sleep(2.2)
                    await cluster.api.make_unavailable(2.0, refuse_connections=True)
                    async with client.post(url, json=body) as resp:
                        assert resp.status == 200, await resp.text()
                    assert ready_count() == 2, "the outage must not drop known endpoints"
                    # A change made while the API is away arrives once it is back.
                    deployments = cluster.store.resource_type("deployments.apps")
                    obj = cluster.store.get(deployments, "default", "llama")
                    obj["metadata"]["annotations"]["routing.tidal.dev/models"] = "llama-next"
                    cluster.store.update(deployments, obj)
                    await wait_for(
                        lambda: registry.table.by_model("llama-next") == "default/llama", 30
                    )
                    # Routed to the pod (whose fake vLLM serves only llama-3-8b, so
                    # it answers 404 itself), not refused by the activator.
                    async with client.post(url, json={**body, "model": "llama-next"}) as resp:
                        answer = await resp.json()
                    assert resp.status == 404
                    assert "does not exist" in answer["message"], answer
                assert not seen_empty, f"the target set was emptied at updates {seen_empty}"
            finally:
                await activator.close()
    finally:
        await scaler.stop()


async def wait_for(condition: object, timeout_s: float) -> None:
    assert callable(condition)
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - the registry has no event to await
            await asyncio.sleep(0.02)


async def test_request_held_through_a_real_cold_start(tmp_path: Path) -> None:
    async with running_cluster(tmp_path / "cluster") as cluster, Api(cluster) as api:
        await api.create(service("llama", app="llama"))
        await api.create(
            deployment(
                "llama",
                replicas=0,
                vllm=True,
                startup_delay="1500ms",
                annotations={"routing.tidal.dev/models": "llama-3-8b"},
            )
        )
        slices = SliceReadiness(cluster)
        loop = asyncio.get_running_loop()
        activations: list[float] = []

        # The "scaler": when told to activate, the test scales 0 -> 1 through the API.
        async def activate(request: web.Request) -> web.Response:
            document = await request.json()
            assert document["target"] == "default/llama"
            if not activations:
                await api.scale("llama", 1)
            activations.append(loop.time())
            return web.json_response({}, status=202)

        async def stats(request: web.Request) -> web.Response:
            await request.read()
            return web.json_response({"activators": 1})

        app = web.Application()
        app.router.add_post("/v1/activate", activate)
        app.router.add_post("/v1/stats", stats)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        scaler_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        # The prober is slowed to a crawl: what is measured is the watch path.
        cfg = settings(
            None, scaler_url=scaler_url, kubeconfig=cluster.kubeconfig, probe_interval_s=60.0
        )
        source = KubeSource(label_selector=SELECTOR, kubeconfig=cluster.kubeconfig)
        activator = await start(cfg, source=source)
        try:
            await wait_for(lambda: "default/llama" in activator.registry.targets, 20)
            url = f"http://127.0.0.1:{activator.data_port}/v1/completions"
            body = {"model": "llama-3-8b", "prompt": "hello", "max_tokens": 4}
            sent = loop.time()
            async with (
                aiohttp.ClientSession() as client,
                client.post(url, data=json.dumps(body)) as resp,
            ):
                first_byte = loop.time()
                text = await resp.text()
            assert resp.status == 200, text
            assert json.loads(text)["model"] == "llama-3-8b"
            assert activations, "the scaler was never told"
            assert activations[0] - sent < 1.0
            ready_at = slices.first_ready["default/llama"]
            gap_s = first_byte - ready_at
            print(
                f"cold start: held {first_byte - sent:.2f}s; slice ready -> first byte "
                f"{gap_s * 1000:.1f} ms"
            )
            # Waited for the cold start (1.5 s of startup at least) ...
            assert first_byte - sent > 1.5
            # ... and answered soon after the slice turned ready (loose: two
            # shared cores run the API server, the pod and the activator).
            assert 0.0 <= gap_s < 1.5, gap_s
        finally:
            await activator.close()
            await runner.cleanup()
