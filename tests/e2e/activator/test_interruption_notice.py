"""The activator on a spot interruption notice, through real watches of the emulated cluster.

Covers, with the in-process activator and its Kubernetes source: two
replicas of one model behind one Service, one on an on-demand node and one
on a spot node (two Deployments with the same pod labels, as spot
placement makes them). A streamed generation is in flight on the spot
replica when the node gets the provider's notice taint (what Karpenter or
a termination handler writes):

- the spot endpoint turns draining (never ready) while its slice still
  says ready, and the on-demand one stays ready;
- the stream in flight finishes, whole (every token, ``[DONE]``);
- requests sent after the notice all go to the on-demand replica (its
  fake vLLM counts them; the spot one's count stays put);
- the taint removed (a notice withdrawn), the spot endpoint is ready again;
- an activator told no notice keys (``notice_taints: ""``) does not watch
  Nodes and leaves the endpoint ready.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from activator.app import start
from activator.kube.notice_taints import parse_notice_taints
from activator.kube.source import KubeSource
from tests.e2e.activator.kube_support import (
    MERGE,
    Api,
    Snapshots,
    deployment,
    running_cluster,
    service,
)
from tests.integration.activator.helpers import FakeScaler, settings

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SELECTOR = "autoscaling.tidal.dev/enabled=true"
TAINT = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
# Slow decode steps, so a 40-token stream lasts about 2 s.
SLOW = "--step-base-s 0.05 --step-per-seq-s 0"


def pinned(name: str, capacity: str, *, opted_in: bool) -> dict[str, Any]:
    dep = deployment(name, replicas=1, vllm=True, opted_in=opted_in)
    dep["spec"]["selector"] = {"matchLabels": {"app": "llama", "half": name}}
    template = dep["spec"]["template"]
    template["metadata"]["labels"] = {"app": "llama", "half": name}
    template["metadata"]["annotations"]["sandbox.tidal.dev/args"] = SLOW
    template["spec"]["nodeSelector"] = {"karpenter.sh/capacity-type": capacity}
    if opted_in:
        dep["metadata"]["annotations"] = {"routing.tidal.dev/models": "llama-3-8b"}
    return dep


async def successes(ip: str) -> float:
    """The pod's fake vLLM's own count of finished requests."""
    async with (
        aiohttp.ClientSession() as client,
        client.get(f"http://{ip}:8000/metrics") as resp,
    ):
        text = await resp.text()
    found = re.findall(r"^vllm:request_success_total\{[^}]*\} ([0-9.e+]+)$", text, re.M)
    return sum(float(v) for v in found)


async def wait_for(condition: Callable[[], bool], timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - the registry has no event to await
            await asyncio.sleep(0.02)


async def test_notice_drains_the_spot_replica_and_in_flight_finishes(tmp_path: Path) -> None:
    scaler = await FakeScaler().start()
    try:
        async with running_cluster(tmp_path / "cluster") as cluster, Api(cluster) as api:
            await api.create(service("llama", app="llama"))
            await api.create(pinned("llama", "on-demand", opted_in=True))
            await api.create(pinned("llama-spot", "spot", opted_in=False))
            source = KubeSource(label_selector=SELECTOR, kubeconfig=cluster.kubeconfig)
            activator = await start(settings(scaler, kubeconfig=cluster.kubeconfig), source=source)
            try:
                await run_notice_story(api, activator)
            finally:
                await activator.close()
    finally:
        await scaler.stop()


async def run_notice_story(api: Api, activator: Any) -> None:
    registry = activator.registry

    def gate_endpoints() -> Any:
        target = registry.targets.get("default/llama")
        return target.gate.endpoints if target is not None else None

    def ready_ips() -> set[str]:
        eps = gate_endpoints()
        return {t.host for t in eps.ready} if eps is not None else set()

    await wait_for(lambda: len(ready_ips()) == 2, 60)
    pods = {p["metadata"]["labels"]["half"]: p for p in await api.pods("llama")}
    spot, on_demand = pods["llama-spot"], pods["llama"]
    spot_ip, od_ip = spot["status"]["podIP"], on_demand["status"]["podIP"]
    spot_node = spot["spec"]["nodeName"]
    assert spot_node.startswith("gpu-spot"), spot_node
    url = f"http://127.0.0.1:{activator.data_port}/v1/completions"

    def spot_tracker() -> Any:
        return next(t for t in gate_endpoints().trackers.values() if t.host == spot_ip)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as client:
        # Streams until one lands on the spot replica (the balancer spreads them).
        stream_body = {
            "model": "llama-3-8b", "prompt": "hi", "max_tokens": 40,
            "ignore_eos": True, "stream": True,
        }  # fmt: skip
        streams: list[asyncio.Task[tuple[int, str]]] = []

        async def one_stream() -> tuple[int, str]:
            async with client.post(url, json=stream_body) as resp:
                return resp.status, await resp.text()

        for _ in range(6):
            streams.append(asyncio.create_task(one_stream()))
            await asyncio.sleep(0.05)
            if spot_tracker().in_flight:
                break
        assert spot_tracker().in_flight >= 1, "no stream reached the spot replica"
        spot_before = await successes(spot_ip)

        # The notice: the node is tainted; the spot endpoint drains.
        await api.call(
            "PATCH", f"/api/v1/nodes/{spot_node}", {"spec": {"taints": [TAINT]}},
            content_type=MERGE,
        )  # fmt: skip
        await wait_for(lambda: ready_ips() == {od_ip}, 10)
        assert spot_tracker().draining
        assert spot_tracker().in_flight >= 1, "the stream should still be running"

        # New requests go to the on-demand replica only.
        plain = {"model": "llama-3-8b", "prompt": "hi", "max_tokens": 2}
        od_before = await successes(od_ip)

        async def one_plain() -> int:
            async with client.post(url, json=plain) as resp:
                await resp.read()
                return resp.status

        assert await asyncio.gather(*(one_plain() for _ in range(6))) == [200] * 6

        # The streams in flight finish, whole.
        for status, text in await asyncio.gather(*streams):
            assert status == 200, text
            chunks = [line for line in text.splitlines() if line.startswith("data: ")]
            assert chunks[-1] == "data: [DONE]", text[-300:]
            tokens = [json.loads(c[6:]) for c in chunks[:-1]]
            assert sum(1 for t in tokens if t["choices"][0].get("text")) == 40
        spot_streams = await successes(spot_ip) - spot_before
        assert spot_streams >= 1, "the spot replica's stream should have finished there"
        assert await successes(od_ip) - od_before >= 6
        assert spot_tracker().in_flight == 0

        # The notice withdrawn: back in rotation.
        await api.call(
            "PATCH", f"/api/v1/nodes/{spot_node}", {"spec": {"taints": None}},
            content_type=MERGE,
        )  # fmt: skip
        await wait_for(lambda: ready_ips() == {od_ip, spot_ip}, 10)
        # No request was sent to the spot replica while it drained.
        assert await successes(spot_ip) - spot_before == spot_streams


async def test_without_notice_keys_nodes_are_not_watched(tmp_path: Path) -> None:
    async with running_cluster(tmp_path / "cluster") as cluster, Api(cluster) as api:
        await api.create(service("llama", app="llama"))
        await api.create(pinned("llama", "spot", opted_in=True))
        source = KubeSource(
            label_selector=SELECTOR,
            kubeconfig=cluster.kubeconfig,
            notice_taints=parse_notice_taints(""),
        )
        sink = Snapshots()
        task = asyncio.create_task(source.run(sink))
        try:
            await sink.wait_for(lambda t: any(e.ready for e in t["default/llama"].endpoints), 60)
            # No Node reflector; ConfigMaps (opted-in ones, for LoRA adapter lists) are.
            what = [r.what for r in source.reflectors]
            assert what == ["Deployment", "Service", "EndpointSlice", "ConfigMap"]
            pod = (await api.pods("llama"))[0]
            await api.call(
                "PATCH", f"/api/v1/nodes/{pod['spec']['nodeName']}", {"spec": {"taints": [TAINT]}},
                content_type=MERGE,
            )  # fmt: skip
            await asyncio.sleep(1.0)
            assert all(e.ready for e in sink.latest["default/llama"].endpoints)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
