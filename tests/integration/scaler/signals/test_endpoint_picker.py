"""The endpoint-picker source against the router's series served over loopback HTTP.

The picker's page is written by the fake EPP's own writer of the router's
series (loadtests.sandbox.epp.router_metrics), driven by the test.

Covers: a pool with requests queued and no ready endpoint reads as
concurrency and queue depth, busy, and held for a wake; the first full
reading brings nothing (its counters hold the picker's past), the next
brings the requests that entered flow control since and those turned away
for want of an endpoint as first tokens past any objective, and shows the
mean queue waits and TTFT since; while the pool has no ready replica the
waiting room is read at every poll (only its queue and endpoints), and a
pool with replicas is read only every full interval; a picker that fails
keeps its last values and turns stale; a target without a picker is not
this source's; a bearer token file is sent; a counter that went back (the
picker restarted) counts nothing.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import generate_latest

from loadtests.sandbox.epp.router_metrics import RequestLabels, RouterMetrics
from scaler.policy.api import SignalKind
from scaler.signals.base import PickerEndpoint, PodEndpoint, TargetPods
from scaler.signals.endpoint_picker import EppSource
from scaler.signals.epp_metrics import DISPATCHED, EVICTED_NO_ENDPOINTS

POOL = "llama"
KEY = "ml/llama"
REQUEST = RequestLabels(pool=POOL, model="llama-3-8b", fairness_id="default-flow", priority=0)
URGENT = RequestLabels(pool=POOL, model="llama-3-8b", fairness_id="team-a", priority=10)


@dataclass
class Picker:
    metrics: RouterMetrics = field(default_factory=RouterMetrics)
    status: int = 200
    gets: int = 0
    authorization: list[str | None] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.gets += 1
        self.authorization.append(request.headers.get("Authorization"))
        if self.status != 200:
            return web.Response(status=self.status)
        return web.Response(body=generate_latest(self.metrics.registry), content_type="text/plain")


@pytest.fixture
async def picker() -> AsyncIterator[tuple[Picker, str]]:
    state = Picker()
    state.metrics.pool(POOL, ready_endpoints=0, saturation=1.0)
    app = web.Application()
    app.router.add_get("/metrics", state.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield state, f"http://127.0.0.1:{server.port}/metrics"
    finally:
        await server.close()


def target(url: str, *, pods: int = 0) -> TargetPods:
    return TargetPods(
        key=KEY,
        namespace="ml",
        engine="vllm",
        pods=[PodEndpoint(f"llama-{i}", "10.0.0.1", 8000) for i in range(pods)],
        picker=PickerEndpoint(pool=POOL, metrics_url=url),
    )


async def test_a_cold_pool_with_queued_requests_is_held_for_a_wake(
    picker: tuple[Picker, str],
) -> None:
    state, url = picker
    state.metrics.entered(REQUEST, 400)
    state.metrics.entered(URGENT, 500)
    async with aiohttp.ClientSession() as session:
        source = EppSource(session=session)
        await source.refresh([target(url), TargetPods("ml/other", "ml", "vllm", ())], now=0.0)
    got = source.read(KEY, now=0.5)
    assert got is not None and got.fresh
    assert got.signals == {SignalKind.CONCURRENCY: 2.0, SignalKind.QUEUE_DEPTH: 2.0}
    assert (got.busy, got.held_for_wake, got.brought) == (True, 2.0, None)
    assert got.observed["epp_queued_bytes"] == 900
    assert got.observed["epp_queued_requests_priority_10"] == 1
    assert got.observed["epp_ready_endpoints"] == 0
    assert source.read("ml/other", now=0.5) is None  # no picker: not this source's


async def test_the_next_full_reading_brings_arrivals_misses_and_waits(
    picker: tuple[Picker, str],
) -> None:
    state, url = picker
    m = state.metrics
    m.entered(REQUEST, 400)
    async with aiohttp.ClientSession() as session:
        source = EppSource(session=session, interval_s=1.0)
        await source.refresh([target(url)], now=0.0)
        # One request waited 4 s and went; one was evicted after 60 s; one new is queued.
        m.left(REQUEST, 400, outcome=DISPATCHED, waited_s=4.0)
        m.first_token(REQUEST, streaming=True, seconds=4.5)
        for _ in range(2):
            m.entered(REQUEST, 400)
        m.left(REQUEST, 400, outcome=EVICTED_NO_ENDPOINTS, waited_s=60.0)
        m.pool(POOL, ready_endpoints=1, saturation=0.2)
        await source.refresh([target(url, pods=1)], now=1.0)
    got = source.read(KEY, now=1.0)
    assert got is not None and got.brought is not None
    # Entered since the first reading: the two that left plus the queue's change (1 -> 1).
    assert got.brought.arrivals == 2.0
    assert got.brought.ttft_new == ((math.inf, 1.0),)
    assert got.observed["epp_queue_wait_dispatched_s"] == 4.0
    assert got.observed["epp_queue_wait_evicted_s"] == 60.0
    assert got.observed["epp_ttft_mean_s"] == 4.5
    assert got.observed["epp_no_endpoint_misses"] == 1.0
    assert got.held_for_wake == 0.0  # an endpoint is ready now


async def test_cadence_the_waiting_room_at_every_poll_a_warm_pool_each_interval(
    picker: tuple[Picker, str],
) -> None:
    state, url = picker
    async with aiohttp.ClientSession() as session:
        source = EppSource(session=session, interval_s=1.0)
        for step in range(4):  # polls 250 ms apart, no ready replica
            await source.refresh([target(url)], now=step * 0.25)
        assert state.gets == 4
        state.metrics.entered(REQUEST, 400)
        await source.refresh([target(url)], now=1.0)
        got = source.read(KEY, now=1.0)
        assert got is not None and got.held_for_wake == 1.0
        state.metrics.pool(POOL, ready_endpoints=1, saturation=0.5)
        state.gets = 0
        for step in range(1, 9):  # 2 s of polls with a replica
            await source.refresh([target(url, pods=1)], now=1.0 + step * 0.25)
        # The waiting room once more (the last reading said cold), then the full
        # readings at 2 s and 3 s only.
        assert state.gets == 3


async def test_a_failing_picker_keeps_its_values_and_turns_stale(
    picker: tuple[Picker, str],
) -> None:
    state, url = picker
    state.metrics.entered(REQUEST, 400)
    async with aiohttp.ClientSession() as session:
        source = EppSource(session=session, interval_s=1.0, timeout_s=1.0)
        await source.refresh([target(url)], now=0.0)
        state.status = 503
        await source.refresh([target(url)], now=1.0)
        await source.refresh([target(url)], now=2.0)
    got = source.read(KEY, now=2.0)
    assert got is not None
    assert (got.fresh, got.signals[SignalKind.QUEUE_DEPTH]) == (True, 1.0)
    got = source.read(KEY, now=2.6)  # past 1.5 intervals plus the timeout
    assert got is not None and not got.fresh and got.signals[SignalKind.QUEUE_DEPTH] == 1.0


async def test_the_token_is_sent_and_a_restart_counts_nothing(
    picker: tuple[Picker, str], tmp_path: Path
) -> None:
    state, url = picker
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    for _ in range(3):
        state.metrics.entered(REQUEST, 400)
        state.metrics.left(REQUEST, 400, outcome=DISPATCHED, waited_s=1.0)
    async with aiohttp.ClientSession() as session:
        source = EppSource(session=session, token_file=token)
        await source.refresh([target(url, pods=1)], now=0.0)
        state.metrics = RouterMetrics()  # the picker restarted: its counters start again
        state.metrics.pool(POOL, ready_endpoints=1, saturation=0.5)
        await source.refresh([target(url, pods=1)], now=1.0)
    assert state.authorization == ["Bearer s3cret", "Bearer s3cret"]
    got = source.read(KEY, now=1.0)
    assert got is not None and got.brought is None
