"""The fake endpoint picker's flow controller, on looptime's clock, read through its metrics.

Covers: a request waits while the pool has no endpoint and goes the moment
one appears, the router's series saying so (queued, then dispatched, ready
endpoints, saturation, in-flight); the sweep sheds a request that waited out
the no-endpoint budget as EvictedNoEndpoints within one sweep interval;
requests beyond an endpoint's concurrency wait and go as answers end; a
client that leaves while held is counted EvictedContextCancelled; shutting
down sheds the rest as EvictedOther. The metrics are read with the scaler's
own reader (scaler.signals.epp_metrics), so writer and reader agree.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from prometheus_client import generate_latest

from loadtests.sandbox.epp.flow_controller import Admission, FlowController
from loadtests.sandbox.epp.pool_view import Endpoint, PoolView
from loadtests.sandbox.epp.router_metrics import RequestLabels, RouterMetrics
from loadtests.sandbox.epp.waiting_room import FlowControlLimits
from scaler.signals.epp_metrics import (
    DISPATCHED,
    EVICTED_CONTEXT_CANCELLED,
    EVICTED_NO_ENDPOINTS,
    EVICTED_OTHER,
    EppPoolReading,
    read_epp_metrics,
)

pytestmark = pytest.mark.looptime

LABELS = RequestLabels(pool="llama", model="m", fairness_id="default-flow", priority=0)
ONE = PoolView("ml", "llama", (Endpoint("a-rank-0", "ml", "127.0.0.2", 8000),))


@contextlib.asynccontextmanager
async def controller(**limits: float) -> AsyncIterator[FlowController]:
    flow = FlowController(
        pool="llama",
        limits=FlowControlLimits(**limits),  # type: ignore[arg-type]
        metrics=RouterMetrics(),
        max_concurrency=1,
        sweep_interval_s=1.0,
    )
    sweeping = asyncio.create_task(flow.run())
    try:
        yield flow
    finally:
        sweeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeping


def reading(flow: FlowController) -> EppPoolReading:
    return read_epp_metrics(generate_latest(flow.metrics.registry).decode(), pool="llama")


def request(flow: FlowController) -> asyncio.Task[Admission]:
    return asyncio.create_task(flow.enqueue_and_wait(LABELS, size_bytes=100, tokens=7))


async def test_held_while_empty_then_sent_when_an_endpoint_appears() -> None:
    async with controller() as flow:
        waiting = request(flow)
        await asyncio.sleep(5)
        assert not waiting.done()
        before = reading(flow)
        assert (before.queued_requests, before.queued_bytes) == (1, 100)
        assert (before.ready_endpoints, before.saturation) == (0, 1.0)
        flow.set_view(ONE)
        admission = await waiting
        assert (admission.outcome, admission.endpoint) == (DISPATCHED, ONE.endpoints[0])
        assert admission.waited_s == 5
        after = reading(flow)
        assert after.queued_requests == 0 and after.left(DISPATCHED) == 1
        assert (after.ready_endpoints, after.saturation) == (1, 1.0)  # 1 of 1 in flight
        assert (after.inflight_requests, after.inflight_tokens) == (1, 7)
        flow.done(admission)
        assert reading(flow).inflight_requests == 0 and reading(flow).saturation == 0.0


async def test_the_waiting_room_sheds_after_its_budget_within_a_sweep() -> None:
    async with controller(no_endpoint_request_ttl_s=30.0) as flow:
        admission = await request(flow)
        assert admission.outcome == EVICTED_NO_ENDPOINTS
        assert 30 <= admission.waited_s <= 31
        assert reading(flow).evicted_no_endpoints == 1


async def test_beyond_an_endpoints_room_requests_wait_for_an_answer_to_end() -> None:
    async with controller() as flow:
        flow.set_view(ONE)
        first = await request(flow)
        second = request(flow)
        await asyncio.sleep(1)
        assert not second.done() and reading(flow).queued_requests == 1
        flow.done(first)
        assert (await second).outcome == DISPATCHED


async def test_a_client_that_leaves_and_shutdown_are_counted() -> None:
    async with controller() as flow:
        gone, stays = request(flow), request(flow)
        await asyncio.sleep(1)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        flow.shut_down()
        assert (await stays).outcome == EVICTED_OTHER
        counted = reading(flow)
        assert counted.left(EVICTED_CONTEXT_CANCELLED) == 1
        assert counted.left(EVICTED_OTHER) == 1
        assert counted.queued_requests == 0
