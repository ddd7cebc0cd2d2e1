"""Benchmark: the emulated cluster at scale, on one core.

1,000 Deployments of 5 process-less pods (``sandbox.tidal.dev/process:
none``) are created at once in a sandbox cluster with 50 CPU nodes, while
five HTTP watchers stream every pod event from the API server (TLS, bearer
token, as a client does). The whole process is pinned to one core, so the
API server, the control plane and the watchers share it.

Figures, each against a reference measured in the same run:

- time to converge (every Deployment reports 5 available replicas), against
  a bare store loop doing the same number of writes the control plane did
  (how much the controllers cost over the storage itself);
- pod events delivered per second to the watchers (all five together)
  during convergence, and the share of the writes each watcher saw;
- a LIST of all 5,000 pods over HTTP, against a LIST of one namespace;
- watch latency: from a store write to the event at an HTTP watcher
  (median and p99 of 200 writes), against an in-process store watch;
- RSS before and after, per pod.

``python -m loadtests.bench.bench_cluster [--deployments N] [--replicas R]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import ssl
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from loadtests.sandbox.cluster.cluster import SandboxCluster
from loadtests.sandbox.cluster.controllers.base import DEPLOYMENTS, NAMESPACES, PODS
from loadtests.sandbox.cluster.nodes import NodeSpec
from loadtests.sandbox.cluster.resources import ResourceType, by_group_version_plural
from loadtests.sandbox.cluster.store import Store


def _configmaps() -> ResourceType:
    rtype = by_group_version_plural("", "v1", "configmaps")
    assert rtype is not None
    return rtype


CONFIGMAPS = _configmaps()


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def deployment(i: int, replicas: int) -> dict[str, Any]:
    name = f"model-{i:04d}"
    return {
        "metadata": {"name": name, "namespace": f"ns-{i % 10}"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {"sandbox.tidal.dev/process": "none"},
                },
                "spec": {"containers": [{"name": "server", "image": "vllm/vllm-openai"}]},
            },
        },
    }


def bare_store_writes(count: int) -> float:
    """Seconds for ``count`` create/update writes of small objects on a fresh store."""
    store = Store(history_size=20_000)
    store.create(NAMESPACES, {"metadata": {"name": "default"}})
    started = time.perf_counter()
    creates = count // 2
    for i in range(creates):
        store.create(CONFIGMAPS, {"metadata": {"name": f"cm-{i}"}, "data": {"k": "v"}})
    for i in range(count - creates):
        obj = store.get(CONFIGMAPS, "default", f"cm-{i % creates}")
        obj["data"] = {"k": str(i)}
        store.update(CONFIGMAPS, obj)
    return time.perf_counter() - started


class HttpWatcher:
    def __init__(self, session: aiohttp.ClientSession, url: str, token: str) -> None:
        self.session = session
        self.url = url
        self.token = token
        self.events = 0
        self.arrivals: dict[str, float] = {}  # marker -> time seen
        self.ready = asyncio.Event()

    async def run(self, ssl_context: ssl.SSLContext) -> None:
        params = {"watch": "true", "allowWatchBookmarks": "true", "resourceVersion": "1"}
        headers = {"Authorization": f"Bearer {self.token}"}
        async with self.session.get(
            f"{self.url}/api/v1/pods", params=params, headers=headers, ssl=ssl_context
        ) as resp:
            resp.raise_for_status()
            self.ready.set()
            async for line in resp.content:
                event = json.loads(line)
                if event["type"] == "BOOKMARK":
                    continue
                self.events += 1
                marker = (event["object"]["metadata"].get("annotations") or {}).get("bench")
                if marker:
                    self.arrivals[marker] = time.perf_counter()


@dataclass(frozen=True, slots=True)
class _Figures:
    """What one run measured (see the module docstring for what each stands for)."""

    deployments: int
    pods: int
    converge_s: float
    writes: int
    delivered: int
    list_all_s: float
    list_one_s: float
    http_latencies_s: list[float]
    local_latencies_s: list[float]
    rss_start_mib: float
    rss_end_mib: float


class _Run:
    """One run's phases on a started cluster, its HTTP watchers already watching."""

    def __init__(
        self,
        store: Store,
        session: aiohttp.ClientSession,
        watchers: list[HttpWatcher],
        *,
        url: str,
        token: str,
        ssl_context: ssl.SSLContext,
    ) -> None:
        self._store = store
        self._session = session
        self._watchers = watchers
        self._url = url
        self._token = token
        self._ssl = ssl_context

    async def converge(self, deployments: int, replicas: int) -> tuple[float, int]:
        """Create the Deployments and wait until every one has all its replicas
        available: the seconds it took, and the store writes made meanwhile."""
        store = self._store
        writes_before = int(store.resource_version)
        ready = asyncio.Event()
        available: set[str] = set()

        def on_change(rtype: Any, _event: str, _old: Any, new: dict[str, Any]) -> None:
            if rtype.key != DEPLOYMENTS.key:
                return
            if (new.get("status") or {}).get("availableReplicas") == replicas:
                available.add(new["metadata"]["name"])
                if len(available) == deployments:
                    ready.set()

        store.add_listener(on_change)
        started = time.perf_counter()
        for i in range(deployments):
            store.create(DEPLOYMENTS, deployment(i, replicas))
            if i % 50 == 49:
                await asyncio.sleep(0)  # as a client's creates would interleave
        await asyncio.wait_for(ready.wait(), timeout=600)
        return time.perf_counter() - started, int(store.resource_version) - writes_before

    async def list_latency(self) -> tuple[float, float]:
        """LIST latency over HTTP (the median of three): all pods, and ten of one namespace."""
        headers = {"Authorization": f"Bearer {self._token}"}

        async def timed_get(path: str) -> float:
            t = time.perf_counter()
            async with self._session.get(self._url + path, headers=headers, ssl=self._ssl) as r:
                await r.read()
                r.raise_for_status()
            return time.perf_counter() - t

        list_all = statistics.median([await timed_get("/api/v1/pods") for _ in range(3)])
        list_one = statistics.median(
            [await timed_get("/api/v1/namespaces/ns-0/pods?limit=10") for _ in range(3)]
        )
        return list_all, list_one

    async def watch_latency(self, pods: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
        """Annotate pods one at a time and time until every HTTP watcher sees each, and
        until an in-process store watch does: both latencies, sorted."""
        store, watchers = self._store, self._watchers
        store_watch = store.watch(PODS)
        while store_watch.pending():
            await store_watch.next(0)
        http_lat: list[float] = []
        local_lat: list[float] = []
        for k in range(200):
            pod = store.get(PODS, pods[k]["metadata"]["namespace"], pods[k]["metadata"]["name"])
            pod["metadata"].setdefault("annotations", {})["bench"] = f"m{k}"
            t = time.perf_counter()
            store.update(PODS, pod)
            await store_watch.next(5)
            local_lat.append(time.perf_counter() - t)
            deadline = time.perf_counter() + 5
            while any(f"m{k}" not in w.arrivals for w in watchers):
                await asyncio.sleep(0)
                if time.perf_counter() > deadline:
                    break
            http_lat.append(max(w.arrivals.get(f"m{k}", deadline) for w in watchers) - t)
        store_watch.close()
        return sorted(http_lat), sorted(local_lat)


async def run_bench(deployments: int, replicas: int) -> int:
    rss_start = rss_mib()
    pods_total = deployments * replicas
    nodes = [NodeSpec(f"cpu-{i}", "on-demand", "us-east-1a", gpus=0, pods=120) for i in range(50)]
    with tempfile.TemporaryDirectory() as tmp:
        async with SandboxCluster(Path(tmp), nodes=nodes) as cluster:
            api, plane = cluster.api, cluster.plane
            assert api is not None
            assert plane is not None
            store = cluster.store
            for n in range(10):
                store.create(NAMESPACES, {"metadata": {"name": f"ns-{n}"}})
            ssl_context = ssl.create_default_context(cafile=str(api.ca_path))
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as session:
                watchers = [HttpWatcher(session, api.url, api.admin_token) for _ in range(5)]
                tasks = [asyncio.create_task(w.run(ssl_context)) for w in watchers]
                await asyncio.gather(*(w.ready.wait() for w in watchers))
                run = _Run(
                    store,
                    session,
                    watchers,
                    url=api.url,
                    token=api.admin_token,
                    ssl_context=ssl_context,
                )
                converge_s, writes = await run.converge(deployments, replicas)
                delivered = sum(w.events for w in watchers)
                pods = store.list(PODS, copy=False)[0]
                assert len(pods) == pods_total, len(pods)
                rss_end = rss_mib()
                list_all, list_one = await run.list_latency()
                http_lat, local_lat = await run.watch_latency(pods)
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
    figures = _Figures(
        deployments=deployments,
        pods=pods_total,
        converge_s=converge_s,
        writes=writes,
        delivered=delivered,
        list_all_s=list_all,
        list_one_s=list_one,
        http_latencies_s=http_lat,
        local_latencies_s=local_lat,
        rss_start_mib=rss_start,
        rss_end_mib=rss_end,
    )
    _print_figures(figures)
    return 0


def _print_figures(f: _Figures) -> None:
    bare_s = bare_store_writes(f.writes)
    pod_writes = f.delivered / 5
    print(f"deployments={f.deployments} pods={f.pods} nodes=50 watchers=5 (one core)")
    print(
        f"converge: {f.converge_s:.2f} s for {f.writes} store writes "
        f"= {f.converge_s / bare_s:.1f}x a bare store loop of the same writes ({bare_s:.2f} s)"
    )
    print(
        f"watch delivery: {f.delivered / f.converge_s:,.0f} pod events/s to 5 HTTP watchers "
        f"({pod_writes:,.0f} events each = {pod_writes / f.writes:.2f} of all writes)"
    )
    print(
        f"LIST all {f.pods} pods over HTTP: {f.list_all_s * 1000:.0f} ms "
        f"= {f.list_all_s / f.list_one_s:.0f}x a 10-pod LIST ({f.list_one_s * 1000:.1f} ms)"
    )
    http_lat, local_lat = f.http_latencies_s, f.local_latencies_s
    p50 = http_lat[len(http_lat) // 2]
    p99 = http_lat[int(len(http_lat) * 0.99) - 1]
    local = local_lat[len(local_lat) // 2]
    print(
        f"watch latency to 5 HTTP watchers: p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms "
        f"= {p50 / local:.0f}x an in-process store watch ({local * 1e6:.0f} us)"
    )
    print(
        f"RSS: {f.rss_start_mib:.0f} MiB -> {f.rss_end_mib:.0f} MiB "
        f"({(f.rss_end_mib - f.rss_start_mib) * 1024 / f.pods:.1f} KiB per pod, "
        "with its share of ReplicaSet and Deployment)"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench_cluster", description=__doc__)
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=5)
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
    return asyncio.run(run_bench(args.deployments, args.replicas))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
