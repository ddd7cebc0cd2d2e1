"""The fake endpoint picker against the emulated API server, over real HTTP on loopback.

Covers: with an InferencePool whose only pod is not Ready, a request sent to
the gateway is held (queued in the router's series); once the pod turns
Ready the request reaches the fake vLLM behind it and its answer comes back,
counted as dispatched with one ready endpoint and one TTFT observation; the
exposition carries every family the scaler's reader reads, under the
router's names and with exactly the labels of the router's captured
exposition (tests/data), older twins included; with no endpoint, a request
that waits out ``noEndpointRequestTTL`` gets the router's 503 (body and
dropped-reason header) and is counted evicted for no endpoints, here through
the ``tidal sandbox epp`` command run as a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from groundwork.kube.connection import KubeAccess, connect
from loadtests.sandbox.cluster.apiserver import ApiServer
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.store import Store
from loadtests.sandbox.epp.service import EppConfig, FakeEpp
from loadtests.sandbox.servers.server import ModelServer, ServerConfig
from scaler.signals.epp_metrics import DISPATCHED, FAMILIES, read_epp_metrics

FIXTURE = Path(__file__).resolve().parents[4] / "data" / "llm_d_router_epp_metrics.txt"
PODS = by_group_version_plural("", "v1", "pods")
POOLS = by_group_version_plural("inference.networking.k8s.io", "v1", "inferencepools")
assert PODS and POOLS


def inference_pool(port: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "llama", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "llama"}},
            "targetPorts": [{"number": port}],
            "endpointPickerRef": {"name": "llama-epp", "port": {"number": 9002}},
        },
    }


def pod(*, ready: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": "llama-0", "namespace": "default", "labels": {"app": "llama"}},
        "spec": {"containers": [{"name": "vllm", "image": "vllm"}]},
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with ApiServer(Store(), certs_dir=tmp_path / "pki") as srv:
        yield srv


@pytest.fixture
async def access(server: ApiServer, tmp_path: Path) -> AsyncIterator[KubeAccess]:
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    got = await connect(kubeconfig=str(kubeconfig))
    try:
        yield got
    finally:
        await got.close()


@pytest.fixture
async def vllm() -> AsyncIterator[ModelServer]:
    async with ModelServer(ServerConfig(engine="vllm", model="m", port=0, speedup=50.0)) as srv:
        await srv.wait_ready()
        yield srv


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - the state is the controller's count
            await asyncio.sleep(0.01)


def label_sets(text: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        name = family.name + "_total" if family.type == "counter" else family.name
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                found.setdefault(name, set()).update(set(sample.labels) - {"le"})
    return found


async def test_held_until_the_pod_is_ready_then_answered_by_it(
    server: ApiServer, access: KubeAccess, vllm: ModelServer
) -> None:
    server.store.create(POOLS, inference_pool(vllm.port))
    server.store.create(PODS, pod(ready=False))
    config = EppConfig(pool="llama", namespace="default", port=0, metrics_port=0)
    async with FakeEpp(config, access=access) as epp, aiohttp.ClientSession() as client:
        assert epp.controller is not None
        body = {"model": "m", "prompt": "hello there", "max_tokens": 4}
        sent = asyncio.create_task(client.post(f"{epp.gateway_url}/v1/completions", json=body))
        await until(lambda: epp.controller is not None and epp.controller.held == 1)
        async with client.get(epp.metrics_url) as resp:
            held = read_epp_metrics(await resp.text(), pool="llama")
        assert (held.queued_requests, held.ready_endpoints) == (1, 0)

        server.store.update(PODS, pod(ready=True), namespace="default", subresource="status")
        async with await asyncio.wait_for(sent, 10) as answer:
            assert answer.status == 200, await answer.text()
            assert (await answer.json())["object"] == "text_completion"
        async with client.get(epp.metrics_url) as resp:
            text = await resp.text()
    reading = read_epp_metrics(text, pool="llama")
    assert (reading.queued_requests, reading.left(DISPATCHED)) == (0, 1)
    assert reading.ready_endpoints == 1
    assert reading.ttft is not None and reading.ttft.count == 1
    assert reading.inflight_requests == 0  # the answer ended
    # The router's names, labels and older twins, as in its captured exposition.
    written, captured = label_sets(text), label_sets(FIXTURE.read_text())
    for family in FAMILIES:
        for name in (family.name, family.legacy):
            if name is not None:
                assert written.get(name) == captured[name], name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_command_evicts_for_no_endpoints_after_the_ttl(
    server: ApiServer, tmp_path: Path
) -> None:
    server.store.create(POOLS, inference_pool(8000))
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    port, metrics_port = free_port(), free_port()
    command = [
        sys.executable, "-m", "scaler", "sandbox", "epp", "--pool", "llama",
        "--namespace", "default", "--kubeconfig", str(kubeconfig),
        "--port", str(port), "--metrics-port", str(metrics_port),
        "--no-endpoint-request-ttl", "300ms", "--sweep-interval", "50ms",
    ]  # fmt: skip
    log = tmp_path / "epp.log"
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            *command, stdout=subprocess.DEVNULL, stderr=sink
        )
    try:
        async with aiohttp.ClientSession() as client:
            metrics = f"http://127.0.0.1:{metrics_port}/metrics"
            async with asyncio.timeout(30):
                while process.returncode is None:
                    with contextlib.suppress(aiohttp.ClientConnectionError):
                        async with client.get(metrics) as resp:
                            if "llm_d_epp_ready_endpoints" in await resp.text():
                                break
                    await asyncio.sleep(0.1)
            assert process.returncode is None, log.read_text()
            async with client.post(
                f"http://127.0.0.1:{port}/v1/completions", json={"model": "m", "prompt": "hi"}
            ) as answer:
                assert answer.status == 503
                assert answer.headers["x-llm-d-request-dropped-reason"] == "rejected-no-endpoints"
                assert (await answer.text()).startswith(
                    "inference error: ServiceUnavailable - request timed out in queue and no "
                    "endpoints are available"
                )
            async with client.get(metrics) as resp:
                reading = read_epp_metrics(await resp.text(), pool="llama")
        assert reading.evicted_no_endpoints == 1 and reading.queued_requests == 0
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 20) == 0, log.read_text()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
