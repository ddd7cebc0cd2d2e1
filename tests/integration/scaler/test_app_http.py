"""The scaler's HTTP endpoints over real loopback HTTP, with fakes behind the controller.

Covers:
- POST /v1/stats and POST /v1/activate refuse a missing or wrong bearer token
  (401) and record nothing; a bad body is a 400 that says what is wrong;
- the answer to /v1/stats counts the activators reporting, and an activator
  silent for three of its periods is dropped from that count;
- /v1/activate wakes a target at zero within the request (the scale write has
  happened when 202 comes back); an unknown target is a 404; a target whose
  annotations are invalid is refused at once (422 ``not_woken``, naming the
  Deployment and the annotation) until they are fixed, and ``/v1/targets``
  shows it as InvalidAnnotation with no desired scale (not the decision made
  before the annotation broke);
- GET /v1/targets, /healthz, /readyz (serving; 503 once shutting down), /metrics.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from scaler.app import ServerState, build_app
from scaler.metrics import Metrics
from scaler.signals.activator_reports import ActivatorReports
from tests.unit.scaler.fakes import (
    FakeCluster,
    FakeEvents,
    FakeLeader,
    FakeScaleTarget,
    deployment,
    wire,
)

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Scaler:
    client: TestClient
    cluster: FakeCluster
    scale: FakeScaleTarget
    reports: ActivatorReports
    state: ServerState
    clock: list[float]


@pytest_asyncio.fixture
async def scaler() -> AsyncIterator[Scaler]:
    clock = [100.0]
    cluster = FakeCluster()
    cluster.put(deployment("llama", replicas=0))
    scale = FakeScaleTarget(cluster)
    reports = ActivatorReports()
    metrics = Metrics(CollectorRegistry())
    wired = wire(
        cluster,
        sources=[reports],
        scale_target=scale,
        events=FakeEvents(),
        leader=FakeLeader(),
        metrics=metrics,
        clock=lambda: clock[0],
    )
    state = ServerState()
    app = build_app(
        controller=wired.controller,
        signals=wired.signals,
        reports=reports,
        metrics=metrics,
        token=TOKEN,
        clock=lambda: clock[0],
        identity="scaler-0",
        leader=lambda: True,
        state=state,
    )
    client = TestClient(TestServer(app, host="127.0.0.1", port=0))
    await client.start_server()
    try:
        yield Scaler(client, cluster, scale, reports, state, clock)
    finally:
        await client.close()


def stats(name: str, buffered: int = 0) -> dict[str, object]:
    return {
        "activator": name,
        "period_s": 1.0,
        "targets": {
            "default/llama": {
                "concurrency": buffered,
                "in_flight": 0,
                "buffered": buffered,
                "arrivals": buffered,
                "pods": {},
            }
        },
    }


@pytest.mark.parametrize("path", ["/v1/stats", "/v1/activate"])
@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no-token"),
        pytest.param({"Authorization": "Bearer wrong"}, id="wrong-token"),
        pytest.param({"Authorization": TOKEN}, id="not-bearer"),
    ],
)
async def test_write_endpoints_refuse_without_token(
    scaler: Scaler, path: str, headers: dict[str, str]
) -> None:
    body = stats("a", buffered=5) | {"target": "default/llama"}
    resp = await scaler.client.post(path, json=body, headers=headers)
    assert resp.status == 401
    assert (await resp.json())["error"]["code"] == 401
    assert scaler.reports.reporting(now=scaler.clock[0]) == 0
    assert scaler.scale.calls == []


async def test_bad_report_is_400_with_reason(scaler: Scaler) -> None:
    resp = await scaler.client.post("/v1/stats", data=b"{not json", headers=AUTH)
    assert resp.status == 400
    assert "JSON" in (await resp.json())["error"]["message"]
    bad = stats("a") | {"period_s": -1}
    resp = await scaler.client.post("/v1/stats", json=bad, headers=AUTH)
    assert resp.status == 400
    assert "period_s" in (await resp.json())["error"]["message"]


async def test_report_answer_counts_activators_and_drops_silent_ones(scaler: Scaler) -> None:
    async def post(name: str) -> int:
        resp = await scaler.client.post("/v1/stats", json=stats(name), headers=AUTH)
        assert resp.status == 200
        return int((await resp.json())["activators"])

    assert await post("a") == 1
    assert await post("b") == 2
    scaler.clock[0] += 2.9  # "a" silent 2.9 periods: still counted
    assert await post("b") == 2
    scaler.clock[0] += 0.2  # 3.1 periods
    assert await post("b") == 1
    assert await post("a") == 2  # back again


async def test_activate_wakes_within_the_request(scaler: Scaler) -> None:
    resp = await scaler.client.post("/v1/stats", json=stats("a", buffered=1), headers=AUTH)
    assert resp.status == 200
    resp = await scaler.client.post(
        "/v1/activate", json={"activator": "a", "target": "default/llama"}, headers=AUTH
    )
    assert resp.status == 202
    assert scaler.scale.scales == [("default/llama", 1)]
    resp = await scaler.client.post(
        "/v1/activate", json={"activator": "a", "target": "default/nope"}, headers=AUTH
    )
    assert resp.status == 404
    resp = await scaler.client.post("/v1/activate", json={"target": "nope"}, headers=AUTH)
    assert resp.status == 400


async def test_activate_refuses_a_target_with_an_invalid_annotation(scaler: Scaler) -> None:
    await scaler.client.post("/v1/stats", json=stats("a", buffered=1), headers=AUTH)
    await scaler.client.post(
        "/v1/activate", json={"activator": "a", "target": "default/llama"}, headers=AUTH
    )  # decided: signals want 1
    bad = {"autoscaling.tidal.dev/window": "5x"}
    scaler.cluster.put(deployment("llama", replicas=0, annotations=bad))
    scaler.scale.scales.clear()
    resp = await scaler.client.post(
        "/v1/activate", json={"activator": "a", "target": "default/llama"}, headers=AUTH
    )
    assert resp.status == 422
    body = await resp.json()
    assert body["error"]["type"] == "not_woken"
    assert body["target"] == "default/llama"
    message = body["error"]["message"]
    assert "default/llama" in message and 'autoscaling.tidal.dev/window: "5x"' in message
    assert scaler.scale.scales == []  # left alone, as the InvalidAnnotation Event says
    # The live view says so too, not the decision made before the annotation broke.
    [view] = (await (await scaler.client.get("/v1/targets")).json())["targets"]
    assert (view["valid"], view["desired"], view["reason"]) == (False, None, "InvalidAnnotation")
    assert 'autoscaling.tidal.dev/window: "5x"' in view["message"]
    # Fixed: the next activation wakes it.
    scaler.cluster.put(deployment("llama", replicas=0))
    resp = await scaler.client.post(
        "/v1/activate", json={"activator": "a", "target": "default/llama"}, headers=AUTH
    )
    assert resp.status == 202
    assert scaler.scale.scales == [("default/llama", 1)]


async def test_read_endpoints(scaler: Scaler) -> None:
    await scaler.client.post("/v1/stats", json=stats("a", buffered=2), headers=AUTH)
    await scaler.client.post(
        "/v1/activate", json={"activator": "a", "target": "default/llama"}, headers=AUTH
    )
    body = await (await scaler.client.get("/v1/targets")).json()
    assert body["leader"] is True
    assert body["activators"] == 1
    [view] = body["targets"]
    assert view["target"] == "default/llama"
    assert view["desired"] == 1
    assert view["observed"]["activator_buffered"] == 2
    assert view["signals"]["concurrency"]["fresh"] is True
    assert (await scaler.client.get("/healthz")).status == 200
    assert (await scaler.client.get("/readyz")).status == 200
    text = await (await scaler.client.get("/metrics")).text()
    assert 'tidal_scaler_reports_total{result="accepted"} 1.0' in text
    assert "tidal_scaler_leader 1.0" in text
    assert (
        'tidal_scaler_desired_replicas{capacity_type="on-demand",target="default/llama"} 1.0'
        in text
    )
    scaler.state.serving = False
    assert (await scaler.client.get("/readyz")).status == 503
