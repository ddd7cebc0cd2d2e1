"""The fake Triton (KServe v2) server.

Covers:
- live at once, ready (server and model) only after the startup delay, and
  inference refused until then;
- infer returns the inputs as outputs, by model and by model version;
- the pending count shows requests queued behind a slow model, and the
  counters (success, inference count, executions, queue and compute time)
  move as they should; metric names are Triton's (no ``_total``);
- bad tensors get a 400 naming the problem.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import aiohttp
import pytest

from loadtests.sandbox.servers.server import ModelServer, ServerConfig
from simulator.engine import BatcherParams
from tests.integration.loadtests.sandbox.servers.conftest import scrape

LABELS = '{model="resnet",version="1"}'


def config(**overrides: Any) -> ServerConfig:
    base = ServerConfig(engine="triton", model="resnet", port=0, speedup=1.0)
    return dataclasses.replace(base, **overrides)


def tensor(batch: int) -> dict[str, Any]:
    return {
        "inputs": [
            {"name": "INPUT0", "shape": [batch, 2], "datatype": "FP32", "data": [0.5] * (2 * batch)}
        ]
    }


async def test_live_at_once_ready_after_loading() -> None:
    server = ModelServer(config(startup_delay_s=0.4))
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(100):  # the listener comes up at once, before the model
                try:
                    live = await session.get(f"http://127.0.0.1:{server.port}/v2/health/live")
                    break
                except (RuntimeError, aiohttp.ClientError):
                    await asyncio.sleep(0.01)
            assert live.status == 200
            url = server.url
            async with session.get(f"{url}/v2/health/ready") as resp:
                assert resp.status == 400
            async with session.get(f"{url}/v2/models/resnet/ready") as resp:
                assert resp.status == 400
            async with session.post(f"{url}/v2/models/resnet/infer", json=tensor(1)) as resp:
                assert resp.status == 400
            await server.wait_ready()
            async with session.get(f"{url}/v2/health/ready") as resp:
                assert resp.status == 200
            async with session.get(f"{url}/v2/models/resnet/ready") as resp:
                assert resp.status == 200
            async with session.get(f"{url}/v2/models/resnet") as resp:
                assert (await resp.json())["versions"] == ["1"]
    finally:
        await server.stop()


async def test_infer_echoes_inputs() -> None:
    async with ModelServer(config()) as server, aiohttp.ClientSession() as session:
        for path in ("/v2/models/resnet/infer", "/v2/models/resnet/versions/1/infer"):
            body = {**tensor(3), "id": "req-1"}
            async with session.post(f"{server.url}{path}", json=body) as resp:
                assert resp.status == 200
                reply = await resp.json()
            assert reply["id"] == "req-1"
            assert reply["outputs"][0]["shape"] == [3, 2]
            assert reply["outputs"][0]["data"] == [0.5] * 6


async def test_pending_count_and_counters() -> None:
    slow = BatcherParams(max_batch_size=1, exec_base_s=0.15, exec_per_item_s=0.0)
    async with ModelServer(config(batcher=slow)) as server, aiohttp.ClientSession() as session:
        url = f"{server.url}/v2/models/resnet/infer"

        async def infer(batch: int) -> int:
            async with session.post(url, json=tensor(batch)) as resp:
                return resp.status

        tasks = [asyncio.create_task(infer(1)) for _ in range(4)]
        for _ in range(100):
            samples = await scrape(session, server.url)
            if samples[f"nv_inference_pending_request_count{LABELS}"] == 3:
                break
            await asyncio.sleep(0.01)
        assert samples[f"nv_inference_pending_request_count{LABELS}"] == 3
        assert await asyncio.gather(*tasks) == [200] * 4
        assert await infer(2) == 400  # a batch larger than max_batch_size is refused
        assert await infer(1) == 200
        samples = await scrape(session, server.url)
        async with session.get(f"{server.url}/metrics") as resp:
            text = await resp.text()
    assert samples[f"nv_inference_pending_request_count{LABELS}"] == 0
    # prometheus_client's parser names counter samples with _total; the text has none.
    assert samples[f"nv_inference_request_success_total{LABELS}"] == 5
    assert samples[f"nv_inference_request_failure_total{LABELS}"] == 1
    assert samples[f"nv_inference_count_total{LABELS}"] == 5
    assert samples[f"nv_inference_exec_count_total{LABELS}"] == 5
    compute_us = samples[f"nv_inference_compute_infer_duration_us_total{LABELS}"]
    assert compute_us == pytest.approx(5 * 150_000, rel=0.3)
    # Queued behind 0.15 s executions: the last of the four waited ~0.45 s.
    assert samples[f"nv_inference_queue_duration_us_total{LABELS}"] > 500_000
    assert "_total" not in text
    assert f"nv_inference_count{LABELS} 5.0" in text
    assert any(k.startswith("nv_gpu_utilization{gpu_uuid=") for k in samples)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        pytest.param({"inputs": []}, "non-empty", id="no inputs"),
        pytest.param(
            {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32"}]}, "'data'", id="no data"
        ),
        pytest.param(
            {"inputs": [{"name": "x", "shape": [1], "datatype": "F", "data": [1]}]},
            "datatype",
            id="bad datatype",
        ),
    ],
)
async def test_bad_tensors(body: dict[str, Any], needle: str) -> None:
    async with (
        ModelServer(config()) as server,
        aiohttp.ClientSession() as session,
        session.post(f"{server.url}/v2/models/resnet/infer", json=body) as resp,
    ):
        assert resp.status == 400
        assert needle in (await resp.json())["error"]
