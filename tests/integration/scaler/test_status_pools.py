"""``tidal status`` lists InferencePools beside Deployments, against the sandbox's API server.

Covers: a Deployment an opted-in pool scales is listed although it carries
no opt-in label, with the pool in the POOL column and its status
annotation's state; a line under the table per pool says what it scales,
or that its selector matches no Deployment; a bad annotation lent by the
pool is read as the scaler reads it (the row says InvalidAnnotation);
live, the pool's line carries its picker's figures (queued by priority,
running, ready endpoints, misses); ``-o json`` has a row per pool.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from loadtests.sandbox.cluster.apiserver import ApiServer
from loadtests.sandbox.cluster.defaults import apply_defaults
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.store import Store
from loadtests.sandbox.example import ExampleModel
from scaler import status

DEPLOYMENTS = by_group_version_plural("apps", "v1", "deployments")
POOLS = by_group_version_plural("inference.networking.k8s.io", "v1", "inferencepools")
assert DEPLOYMENTS and POOLS
A = "autoscaling.tidal.dev/"
STATUS = {"desired": 2, "mode": "stable", "onDemand": 2, "spot": 0, "reason": "ScaledUp"}


def pool(name: str, app: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {A + "enabled": "true"},
            "annotations": annotations,
        },
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {"name": f"{name}-epp", "port": {"number": 9002}},
        },
    }


def deployment(name: str, **annotations: str) -> dict[str, Any]:
    d = ExampleModel(name=name).deployment()
    d["metadata"]["labels"].pop(A + "enabled", None)
    d["metadata"]["annotations"] = annotations
    apply_defaults(d, "Deployment", creating=True)
    return d


@pytest.fixture
async def kubeconfig(tmp_path: Path) -> AsyncIterator[Path]:
    async with ApiServer(Store(), certs_dir=tmp_path / "pki") as srv:
        srv.store.create(DEPLOYMENTS, deployment("llama", **{A + "status": json.dumps(STATUS)}))
        srv.store.create(DEPLOYMENTS, deployment("mistral"))
        srv.store.create(POOLS, pool("llama-pool", "llama"))
        srv.store.create(POOLS, pool("mistral-pool", "mistral", **{A + "max-scale": "0"}))
        srv.store.create(POOLS, pool("gpt-pool", "gpt"))
        yield srv.write_kubeconfig(tmp_path / "kubeconfig")


async def run_status(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    status.configure(parser)
    return await asyncio.to_thread(status.run, parser.parse_args(argv))


async def test_pools_beside_deployments(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_status(["--kubeconfig", str(kubeconfig)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "POOL", "DESIRED", "READY", "MODE", "REASON"]
    assert lines[1].split() == ["default", "llama", "llama-pool", "2", "0", "stable", "ScaledUp"]
    assert lines[2].split()[:3] == ["default", "mistral", "mistral-pool"]
    assert lines[2].split()[-1] == "InvalidAnnotation"
    text = "\n".join(lines)
    assert "default/llama-pool -> default/llama (picker llama-pool-epp:9002)" in text
    assert "default/gpt-pool: selector app=gpt matches no Deployment: nothing scaled" in text
    assert f'{A}max-scale: "0" is not allowed' in text  # under "Left alone until fixed"


async def test_live_picker_figures_and_json(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    observed = {
        "epp_queued_requests": 3.0,
        "epp_queued_requests_priority_10": 1.0,
        "epp_queued_requests_priority_0": 2.0,
        "epp_running_requests": 0.0,
        "epp_ready_endpoints": 0.0,
        "epp_no_endpoint_misses": 4.0,
        "server_running": 0.0,
    }

    async def targets(request: web.Request) -> web.Response:
        return web.json_response({"targets": [{"target": "default/llama", "observed": observed}]})

    app = web.Application()
    app.router.add_get("/v1/targets", targets)
    scaler = TestServer(app, host="127.0.0.1", port=0)
    await scaler.start_server()
    url = f"http://127.0.0.1:{scaler.port}"
    try:
        assert await run_status(["--kubeconfig", str(kubeconfig), "--scaler-url", url]) == 0
        text = capsys.readouterr().out
        assert (
            "default/llama-pool -> default/llama (picker llama-pool-epp:9002); picker: 3 queued"
            " (priority 10: 1, priority 0: 2), 0 running, 0 ready endpoints, 4 turned away for"
            " want of an endpoint (misses)"
        ) in " ".join(text.split())
        argv = ["--kubeconfig", str(kubeconfig), "--scaler-url", url, "-o", "json"]
        assert await run_status(argv) == 0
        rows = json.loads(capsys.readouterr().out)
    finally:
        await scaler.close()
    pools = {r["name"]: r for r in rows if r.get("kind") == "InferencePool"}
    assert pools["llama-pool"]["scales"] == "default/llama"
    assert pools["llama-pool"]["live"]["epp_no_endpoint_misses"] == 4.0
    assert "server_running" not in pools["llama-pool"]["live"]
    assert pools["gpt-pool"]["scales"] is None
