"""Pod scrapes and Prometheus queries against small real HTTP servers on loopback.

Covers:
- scrape of a vLLM-like and a Triton-like ``/metrics`` (Triton's queue/compute
  rate from two scrapes); pods in groups (a model's GPU shapes) read per
  group as well as whole;
- a pod that starts failing (500, refused connection, a hang past the
  timeout) keeps its last values but turns the view stale after
  ``stale_after_s``; it is never read as zero;
- scrapes in flight never exceed ``max_concurrent``; pods no longer listed are forgotten;
- vLLM's prompt-token counter becomes the tokens new since the previous
  scrape, summed over the pods of the latest refresh only, and so do its
  TTFT histogram's buckets;
- a Prometheus-shaped API: the query names the configured labels, percent is
  converted to a fraction, a pod without a value makes the view stale, and a
  failing server leaves the last answer to go stale.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer

from scaler.policy.api import SignalKind
from scaler.signals.base import PodEndpoint, TargetPods
from scaler.signals.prometheus import GpuMetric, PrometheusGpu
from scaler.signals.prometheus_query import PrometheusQuery
from scaler.signals.scrape import PodScraper

VLLM = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} {running}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="m"}} {waiting}
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{model_name="m"}} 0.25
"""
TRITON = """# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{{model="m",version="1"}} 2
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{{model="m",version="1"}} {queue}
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{{model="m",version="1"}} {compute}
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{{gpu_uuid="GPU-0"}} 0.8
"""

CONC, QUEUE = SignalKind.CONCURRENCY, SignalKind.QUEUE_DEPTH
GPU, KV = SignalKind.GPU_UTILIZATION, SignalKind.KV_CACHE_UTILIZATION


@dataclass
class FakePod:
    text: Callable[[], str]
    mode: str = "ok"  # ok | error | hang
    in_flight: int = 0
    max_in_flight: int = 0
    hang: asyncio.Event = field(default_factory=asyncio.Event)

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            if self.mode == "error":
                return web.Response(status=500, text="boom")
            if self.mode == "hang":
                await self.hang.wait()
            return web.Response(text=self.text())
        finally:
            self.in_flight -= 1


@pytest_asyncio.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest_asyncio.fixture
async def serve() -> AsyncIterator[Callable[[FakePod], asyncio.Future[int]]]:
    servers: list[TestServer] = []
    pods: list[FakePod] = []

    async def start(pod: FakePod) -> int:
        app = web.Application()
        app.router.add_get("/metrics", pod.metrics)
        server = TestServer(app, host="127.0.0.1", port=0)
        await server.start_server()
        servers.append(server)
        pods.append(pod)
        assert server.port is not None
        return server.port

    try:
        yield start  # type: ignore[misc]
    finally:
        for pod in pods:
            pod.hang.set()
        for server in servers:
            await server.close()


def target(key: str, engine: str, ports: list[int]) -> TargetPods:
    return TargetPods(
        key=key,
        namespace=key.split("/")[0],
        engine=engine,
        pods=[
            PodEndpoint(name=f"p{i}", ip="127.0.0.1", metrics_port=p) for i, p in enumerate(ports)
        ],
    )


async def test_vllm_scrape_then_failures_go_stale_not_zero(serve, session) -> None:  # type: ignore[no-untyped-def]
    a = FakePod(lambda: VLLM.format(running=3, waiting=1))
    b = FakePod(lambda: VLLM.format(running=2, waiting=0))
    ports = [await serve(a), await serve(b)]
    scraper = PodScraper(session=session, timeout_s=0.3, stale_after_s=5.0)
    t = target("ns/llama", "vllm", ports)
    await scraper.refresh([t], now=10.0)
    r = scraper.read("ns/llama", now=10.0)
    assert r is not None
    assert (r.signals.get(CONC), r.signals.get(QUEUE), r.fresh, r.reporters) == (6.0, 1.0, True, 2)
    assert r.signals.get(KV) == 0.25
    assert r.pod_load == {"p0": 4.0, "p1": 2.0}

    a.mode = "error"
    b.mode = "hang"  # answers after the timeout: a timeout
    await scraper.refresh([t], now=13.0)
    r = scraper.read("ns/llama", now=13.0)
    assert r is not None
    assert (r.signals.get(CONC), r.fresh) == (6.0, True)  # last values, 3 s old: still fresh
    r = scraper.read("ns/llama", now=15.5)
    assert r is not None
    assert (r.signals.get(CONC), r.fresh) == (6.0, False)  # stale, and still not zero


async def test_pods_in_groups_are_read_per_group_too(serve, session) -> None:  # type: ignore[no-untyped-def]
    ports = [
        await serve(FakePod(lambda: VLLM.format(running=3, waiting=1))),
        await serve(FakePod(lambda: VLLM.format(running=2, waiting=0))),
        await serve(FakePod(lambda: VLLM.format(running=1, waiting=5))),
    ]
    groups = ("h100", "mig-3g.40gb", "mig-3g.40gb")
    t = TargetPods(
        key="ns/llama",
        namespace="ns",
        engine="vllm",
        pods=[
            PodEndpoint(name=f"p{i}", ip="127.0.0.1", metrics_port=port, group=group)
            for i, (port, group) in enumerate(zip(ports, groups, strict=True))
        ],
    )
    scraper = PodScraper(session=session, timeout_s=0.3, stale_after_s=5.0)
    await scraper.refresh([t], now=10.0)
    r = scraper.read("ns/llama", now=10.0)
    assert r is not None and r.signals.get(CONC) == 12.0
    h100, mig = r.groups["h100"], r.groups["mig-3g.40gb"]
    assert (h100.signals.get(CONC), h100.reporters, h100.levels.running) == (4.0, 1, 3.0)
    assert (mig.signals.get(CONC), mig.signals.get(QUEUE), mig.reporters) == (8.0, 5.0, 2)
    assert mig.pod_load == {"p1": 2.0, "p2": 6.0}


async def test_refused_connection_and_never_scraped_pod(session) -> None:  # type: ignore[no-untyped-def]
    # Port 1 on loopback: nothing listens there, the connection is refused.
    scraper = PodScraper(session=session, timeout_s=0.5, stale_after_s=5.0)
    await scraper.refresh([target("ns/x", "vllm", [1])], now=1.0)
    r = scraper.read("ns/x", now=1.0)
    assert r is not None
    assert (r.fresh, r.signals.get(CONC), r.reporters) == (False, None, 0)
    assert scraper.read("ns/never-listed", now=1.0) is not None  # unknown: stale, not absent
    await scraper.refresh([target("ns/g", "generic", [1])], now=2.0)
    assert scraper.read("ns/g", now=2.0) is None  # generic engine: no server view
    assert scraper.read("ns/x", now=2.0) is not None  # forgotten target: unknown again


async def test_zero_ready_pods_is_a_fresh_zero(session) -> None:  # type: ignore[no-untyped-def]
    scraper = PodScraper(session=session)
    await scraper.refresh([target("ns/x", "vllm", [])], now=1.0)
    r = scraper.read("ns/x", now=1.0)
    assert r is not None
    assert (r.fresh, r.signals.get(CONC), r.busy) == (True, 0.0, False)


async def test_triton_rates_between_scrapes(serve, session) -> None:  # type: ignore[no-untyped-def]
    counters = {"queue": 1000, "compute": 10000}
    pod = FakePod(lambda: TRITON.format(**counters))
    scraper = PodScraper(session=session)
    t = target("ns/t", "triton", [await serve(pod)])
    await scraper.refresh([t], now=1.0)
    r = scraper.read("ns/t", now=1.0)
    assert r is not None
    assert (r.signals.get(CONC), r.signals.get(QUEUE), r.signals.get(GPU)) == (2.0, 2.0, 0.8)
    assert "server_queue_to_compute_ratio" not in r.observed
    counters.update(queue=4000, compute=16000)
    await scraper.refresh([t], now=3.0)
    r = scraper.read("ns/t", now=3.0)
    assert r is not None
    assert r.observed["server_queue_to_compute_ratio"] == pytest.approx(3000 / 6000)


async def test_scrape_concurrency_is_bounded(serve, session) -> None:  # type: ignore[no-untyped-def]
    shared = FakePod(lambda: VLLM.format(running=1, waiting=0))
    port = await serve(shared)
    scraper = PodScraper(session=session, max_concurrent=2)
    many = TargetPods(
        key="ns/m",
        namespace="ns",
        engine="vllm",
        pods=[PodEndpoint(name=f"p{i}", ip="127.0.0.1", metrics_port=port) for i in range(8)],
    )
    await scraper.refresh([many], now=1.0)
    r = scraper.read("ns/m", now=1.0)
    assert r is not None
    assert r.signals.get(CONC) == 8.0
    assert shared.max_in_flight == 2


@dataclass
class FakePrometheus:
    values: dict[tuple[str, str], float]
    status: int = 200
    queries: list[str] = field(default_factory=list)

    async def query(self, request: web.Request) -> web.Response:
        self.queries.append(request.query.get("query", ""))
        if self.status != 200:
            return web.json_response({"status": "error", "error": "down"}, status=self.status)
        result = [
            {"metric": {"exported_namespace": ns, "exported_pod": pod}, "value": [1.0, str(v)]}
            for (ns, pod), v in self.values.items()
        ]
        return web.json_response(
            {"status": "success", "data": {"resultType": "vector", "result": result}}
        )


async def test_prometheus_gpu(session) -> None:  # type: ignore[no-untyped-def]
    prom = FakePrometheus({("ns", "p0"): 60.0, ("ns", "p1"): 80.0})
    app = web.Application()
    app.router.add_get("/api/v1/query", prom.query)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    try:
        client = PrometheusQuery(
            session=session, url=f"http://127.0.0.1:{server.port}/", timeout_s=2.0
        )
        gpu = PrometheusGpu(
            client,
            metric=GpuMetric.DCGM_GPU_UTIL,
            pod_label="exported_pod",
            namespace_label="exported_namespace",
            stale_after_s=10.0,
        )
        two = target("ns/llama", "vllm", [1, 2])
        await gpu.refresh([two], now=1.0)
        assert prom.queries == ["avg by (exported_pod, exported_namespace) (DCGM_FI_DEV_GPU_UTIL)"]
        r = gpu.read("ns/llama", now=1.0)
        assert r is not None
        assert r.fresh
        assert r.signals.get(GPU) == pytest.approx(0.7)
        three = TargetPods(
            key="ns/llama",
            namespace="ns",
            engine="vllm",
            pods=[*two.pods, PodEndpoint(name="p2", ip="127.0.0.1", metrics_port=1)],
        )
        await gpu.refresh([three], now=2.0)
        r = gpu.read("ns/llama", now=2.0)
        assert r is not None
        assert not r.fresh  # p2 has no value yet: may raise, not lower
        assert r.signals.get(GPU) == pytest.approx(0.7)
        prom.status = 503
        await gpu.refresh([two], now=5.0)
        r = gpu.read("ns/llama", now=5.0)
        assert r is not None
        assert r.fresh  # the answer from t=2 is 3 s old
        r = gpu.read("ns/llama", now=12.5)
        assert r is not None
        assert not r.fresh
        assert r.signals.get(GPU) == pytest.approx(0.7)
    finally:
        await server.close()


VLLM_TOKENS = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} 1
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{model_name="m"}} {prompt}
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_count{{model_name="m"}} {firsts}
vllm:time_to_first_token_seconds_sum{{model_name="m"}} {ttft_sum}
"""


async def test_new_prompt_tokens_count_only_the_pods_of_the_latest_refresh(serve, session) -> None:  # type: ignore[no-untyped-def]
    counters = {"a": 1000, "b": 500}
    a = FakePod(lambda: VLLM_TOKENS.format(prompt=counters["a"], firsts=10, ttft_sum=1.0))
    b = FakePod(lambda: VLLM_TOKENS.format(prompt=counters["b"], firsts=4, ttft_sum=0.4))
    t = target("ns/llama", "vllm", [await serve(a), await serve(b)])
    scraper = PodScraper(session=session, timeout_s=0.3, stale_after_s=5.0)
    await scraper.refresh([t], now=1.0)
    first = scraper.read("ns/llama", now=1.0)
    assert first is not None and first.observed["server_new_prompt_tokens"] == 0.0
    counters["a"], counters["b"] = 4000, 700
    await scraper.refresh([t], now=2.0)
    second = scraper.read("ns/llama", now=2.0)
    assert second is not None and second.observed["server_new_prompt_tokens"] == 3200.0
    # b fails the next refresh: its last gain is not counted a second time.
    b.mode = "error"
    counters["a"] = 4100
    await scraper.refresh([t], now=3.0)
    third = scraper.read("ns/llama", now=3.0)
    assert third is not None and third.observed["server_new_prompt_tokens"] == 100.0


VLLM_TTFT = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} 1
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="1.0",model_name="m"}} {fast}
vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {total}
vllm:time_to_first_token_seconds_count{{model_name="m"}} {total}
vllm:time_to_first_token_seconds_sum{{model_name="m"}} 1.0
"""


async def test_ttft_buckets_new_in_a_refresh_are_summed_over_its_pods(serve, session) -> None:  # type: ignore[no-untyped-def]
    counts = {"a": (10, 12), "b": (3, 3)}
    a = FakePod(lambda: VLLM_TTFT.format(fast=counts["a"][0], total=counts["a"][1]))
    b = FakePod(lambda: VLLM_TTFT.format(fast=counts["b"][0], total=counts["b"][1]))
    t = target("ns/llama", "vllm", [await serve(a), await serve(b)])
    scraper = PodScraper(session=session, timeout_s=0.3, stale_after_s=5.0)
    await scraper.refresh([t], now=1.0)
    counts["a"], counts["b"] = (15, 20), (5, 6)
    await scraper.refresh([t], now=2.0)
    got = scraper.read("ns/llama", now=2.0)
    assert got is not None and got.brought is not None
    assert got.brought.ttft_new == ((1.0, 7.0), (float("inf"), 11.0))
    # Read again before the next refresh: the same counts, which the hub adds once.
    again = scraper.read("ns/llama", now=2.5)
    assert again is not None and again.brought is got.brought
