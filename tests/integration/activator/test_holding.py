"""Holding requests through cold starts, over real HTTP on loopback.

Covers:
- a request for a target with no listening replica is held; the scaler gets
  ``/v1/activate`` (with the bearer token) while it waits; the request is
  answered once a replica starts listening (found by the direct probe);
- the buffer bound: past ``max_buffered`` -> 503 with Retry-After and the
  OpenAI error shape; Retry-After is the expected time left to a ready
  replica while the model wakes, the configured default while it is busy;
- a ``503 shed`` says which rule fired (here, sheddable at zero) in its
  body, in the activator's log line and in the metric's ``cause`` label;
- the cold-start timeout -> 504;
- a client that disconnects while held frees its place (a later request fits);
- ``container-concurrency`` is never exceeded under a burst, and it is
  shared out when the scaler counts two activators;
- a killed replica mid-load: every request ends in a 200, those it had
  received (none answered yet) sent once more to the survivor;
- scaling to zero while requests arrive loses none (held, then served by the
  next replica);
- a refused connection sends the request back to waiting (no 502);
- drain: SIGTERM-path finishes in-flight and held requests, /readyz fails,
  new requests get 503; requests still held when the drain timeout ends get
  503 with the JSON body and Retry-After (not a closed connection).

Nothing here bounds latency in real time (the box is shared): how fast the
scaler is told and a held request goes out is measured by
``loadtests/bench/bench_activator_ready.py``. The cold-start timeout runs on
looptime's simulated clock, so its 1 s passes at once and is checked exactly.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest

from activator.holding.wake_clock import FIRST_WAKE_ESTIMATE_S
from tests.integration.activator.helpers import (
    Backend,
    FakeScaler,
    StaticSource,
    free_port,
    running_activator,
    settings,
    spec,
    wait_until,
)


async def test_held_until_replica_listens_and_scaler_told_at_once(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    port = free_port()
    # Not ready per the source: only the probe can find it, as in routes-file mode.
    source = StaticSource(spec("default/llama", f"127.0.0.1:{port}", ready=False))
    backend = Backend(name="cold")
    async with running_activator(source, settings(scaler)) as act:
        url = f"http://127.0.0.1:{act.data_port}/v1/completions"
        pending = asyncio.create_task(client.post(url, json={"prompt": "hi"}))
        await asyncio.wait_for(scaler.activated.wait(), 5)
        assert scaler.activations[0][1] == {
            "activator": "test-activator",
            "target": "default/llama",
        }
        assert scaler.activations[0][2] == "Bearer s3cret"
        assert not pending.done()
        assert act.registry.targets["default/llama"].gate.buffered == 1
        await backend.start(port)
        try:
            resp = await asyncio.wait_for(pending, 5)
            assert resp.status == 200
            assert (await resp.json())["backend"] == "cold"
        finally:
            await backend.stop()


async def test_buffer_full_gives_503_with_retry_after(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    # Busy until released: its one request streams a first chunk, then waits.
    gate_queue: asyncio.Queue[None] = asyncio.Queue()
    backend = await Backend(name="busy", sse_chunks=2, sse_gate=gate_queue).start()
    cold = spec("default/llama", f"127.0.0.1:{free_port()}", ready=False, max_buffered=2)
    busy = spec(
        "default/busy",
        backend.endpoint,
        max_buffered=2,
        container_concurrency=1,
        path_prefix="/busy",
    )
    async with running_activator(
        StaticSource(cold, busy), settings(scaler, retry_after_s=7)
    ) as act:
        base = f"http://127.0.0.1:{act.data_port}"
        held = [asyncio.create_task(client.get(f"{base}/x")) for _ in range(2)]
        held += [asyncio.create_task(client.get(f"{base}/busy")) for _ in range(3)]
        targets = act.registry.targets
        await wait_until(lambda: all(t.gate.buffered >= 2 for t in targets.values()))
        async with client.get(f"{base}/x") as resp:
            assert resp.status == 503
            # The model wakes: come back when a replica is expected (a first wake's
            # estimate, less the moment it has run), not the default 7 s.
            assert FIRST_WAKE_ESTIMATE_S - 5 <= int(resp.headers["Retry-After"]) <= 60
            body = await resp.json()
        assert body["error"]["code"] == "buffer_full"
        assert set(body["error"]) == {"message", "type", "code"}
        async with client.get(f"{base}/busy") as resp:
            assert resp.status == 503
            assert resp.headers["Retry-After"] == "7"  # busy, not waking: the default
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        for _ in range(3):
            gate_queue.put_nowait(None)
    await backend.stop()


async def test_a_shed_names_its_cause_in_the_body_the_log_and_the_metric(
    scaler: FakeScaler, client: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="activator")
    cold = spec(
        "default/batch",
        f"127.0.0.1:{free_port()}",
        ready=False,
        shed_at_zero=True,
        default_priority=-1,
    )
    async with running_activator(StaticSource(cold), settings(scaler)) as act:
        async with client.get(f"http://127.0.0.1:{act.data_port}/x") as resp:
            assert resp.status == 503
            assert FIRST_WAKE_ESTIMATE_S - 5 <= int(resp.headers["Retry-After"]) <= 60
            error = (await resp.json())["error"]
        assert error["code"] == "shed"
        assert "shed-at-zero" in error["message"] and "waking" in error["message"]
        assert f"refused 503 shed (at_zero) (target default/batch): {error['message']}" in (
            caplog.messages
        )
        async with client.get(f"http://127.0.0.1:{act.admin_port}/metrics") as resp:
            text = await resp.text()
        shed = (
            'tidal_activator_shed_total{cause="at_zero",class="sheddable",target="default/batch"}'
        )
        assert f"{shed} 1.0" in text


@pytest.mark.looptime
async def test_cold_start_timeout_gives_504(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    source = StaticSource(
        spec("default/llama", f"127.0.0.1:{free_port()}", ready=False, cold_start_timeout_s=1.0)
    )
    async with running_activator(source, settings(scaler)) as act:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client.get(f"http://127.0.0.1:{act.data_port}/x") as resp:
            assert resp.status == 504
            assert (await resp.json())["error"]["code"] == "cold_start_timeout"
        # Simulated time: I/O takes none of it, so the hold is the 1 s timeout
        # (plus at most one probe interval of the background tasks' timers).
        assert 1.0 <= loop.time() - started < 1.1


async def test_client_disconnect_frees_its_place(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    source = StaticSource(
        spec("default/llama", f"127.0.0.1:{free_port()}", ready=False, max_buffered=1)
    )
    async with running_activator(source, settings(scaler)) as act:
        url = f"http://127.0.0.1:{act.data_port}/x"
        gate = act.registry.targets["default/llama"].gate
        async with aiohttp.ClientSession() as other:
            first = asyncio.create_task(other.get(url))
            await wait_until(lambda: gate.buffered >= 1)
        # Closing the session dropped the connection: the handler is cancelled.
        await asyncio.gather(first, return_exceptions=True)
        await wait_until(lambda: gate.buffered == 0, timeout_s=2.0)
        assert gate.buffered == 0
        second = asyncio.create_task(client.get(url))
        await wait_until(lambda: gate.buffered >= 1)
        assert not second.done()  # held, not refused: the place was freed
        second.cancel()
        await asyncio.gather(second, return_exceptions=True)


@pytest.mark.parametrize(("activators", "expected_limit"), [(1, 3), (2, 1)])
async def test_container_concurrency_never_exceeded(
    scaler: FakeScaler, client: aiohttp.ClientSession, activators: int, expected_limit: int
) -> None:
    scaler.activators = activators
    backends = [await Backend(name=f"b{i}", delay_s=0.05).start() for i in range(2)]
    try:
        source = StaticSource(
            spec("default/llama", *(b.endpoint for b in backends), container_concurrency=3)
        )
        async with running_activator(source, settings(scaler)) as act:
            gate = act.registry.targets["default/llama"].gate
            # Wait for the first report's answer to set this activator's share.
            await wait_until(lambda: gate.limit == expected_limit)
            url = f"http://127.0.0.1:{act.data_port}/x"

            async def one() -> int:
                async with client.get(url) as resp:
                    await resp.read()
                    return resp.status

            statuses = await asyncio.gather(*(one() for _ in range(40)))
        assert statuses == [200] * 40
        assert max(b.peak for b in backends) == expected_limit
        assert sum(len(b.received) for b in backends) == 40
    finally:
        for b in backends:
            await b.stop()


async def test_refused_connection_goes_back_to_waiting(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    dead = free_port()
    live = await Backend(name="live").start()
    try:
        # The source claims both are ready; one refuses connections.
        source = StaticSource(spec("default/llama", f"127.0.0.1:{dead}", live.endpoint))
        async with running_activator(source, settings(scaler)) as act:
            url = f"http://127.0.0.1:{act.data_port}/x"
            for _ in range(20):
                async with client.get(url) as resp:
                    assert resp.status == 200
            gate = act.registry.targets["default/llama"].gate
            assert [t.key for t in gate.endpoints.ready] == [live.endpoint]
    finally:
        await live.stop()


async def test_killed_replica_loses_no_request(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    victim = await Backend(name="victim", delay_s=0.2).start()
    survivor = await Backend(name="survivor", delay_s=0.02).start()
    source = StaticSource(spec("default/llama", victim.endpoint, survivor.endpoint))
    try:
        async with running_activator(source, settings(scaler)) as act:
            url = f"http://127.0.0.1:{act.data_port}/x"

            async def one(i: int) -> tuple[str, int]:
                rid = f"req-{i}"
                async with client.get(url, headers={"X-Request-Id": rid}) as resp:
                    await resp.read()
                    return rid, resp.status

            tasks = [asyncio.create_task(one(i)) for i in range(60)]
            await wait_until(lambda: len(victim.received) >= 5)
            await victim.kill()
            more = [asyncio.create_task(one(i)) for i in range(60, 120)]
            results = await asyncio.gather(*tasks, *more)
        statuses = dict(results)
        # The victim answers after 0.2 s: those in flight at the kill had no
        # byte of answer, so each went out once more, to the survivor.
        assert set(statuses.values()) == {200}, statuses
        assert len(statuses) == 120
        sent_again = set(victim.received) & set(survivor.received)
        assert sent_again, "the kill should have struck requests in flight"
    finally:
        await victim.stop()
        await survivor.stop()


async def test_scale_to_zero_while_requests_arrive_loses_none(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    first = await Backend(name="first").start()
    source = StaticSource(spec("default/llama", first.endpoint))
    second = Backend(name="second")
    try:
        async with running_activator(source, settings(scaler)) as act:
            url = f"http://127.0.0.1:{act.data_port}/x"

            async def one() -> int:
                async with client.get(url) as resp:
                    await resp.read()
                    return resp.status

            before = await asyncio.gather(*(one() for _ in range(10)))
            # Scaled to zero: the endpoint leaves the slice, then the pod goes.
            source.set(spec("default/llama"))
            await first.stop()
            during = [asyncio.create_task(one()) for _ in range(30)]
            await asyncio.wait_for(scaler.activated.wait(), 5)
            # Woken again: a new replica, a new address.
            await second.start()
            source.set(spec("default/llama", second.endpoint))
            after = await asyncio.gather(*during)
        assert before == [200] * 10
        assert after == [200] * 30
        assert len(second.received) == 30
    finally:
        await first.stop()
        await second.stop()


async def test_drain_finishes_in_flight_and_held_work(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    slow = await Backend(name="slow", delay_s=0.5).start()
    cold_port = free_port()
    cold = Backend(name="cold")
    source = StaticSource(
        spec("default/llama", slow.endpoint, path_prefix="/slow"),
        spec("default/cold", f"127.0.0.1:{cold_port}", ready=False, path_prefix="/cold"),
    )
    try:
        act_cm = running_activator(source, settings(scaler))
        act = await act_cm.__aenter__()
        try:
            base = f"http://127.0.0.1:{act.data_port}"
            admin = f"http://127.0.0.1:{act.admin_port}"
            in_flight = [asyncio.create_task(client.get(base + "/slow")) for _ in range(5)]
            held = asyncio.create_task(client.get(base + "/cold"))
            await wait_until(
                lambda: (
                    slow.in_flight >= 5 and act.registry.targets["default/cold"].gate.buffered >= 1
                )
            )
            drain = asyncio.create_task(act.drain())
            await wait_until(lambda: not act.ready)
            async with client.get(admin + "/readyz") as resp:
                assert resp.status == 503
            await cold.start(cold_port)
            responses = await asyncio.gather(*in_flight, held)
            assert [r.status for r in responses] == [200] * 6
            await drain
            with pytest.raises(aiohttp.ClientConnectionError):
                async with client.get(base + "/slow"):
                    pass
        finally:
            await act_cm.__aexit__(None, None, None)
    finally:
        await slow.stop()
        await cold.stop()


async def test_new_requests_are_served_through_the_drain_grace(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    # Endpoints take seconds to drop an activator that fails readiness: what
    # they still send during the grace is served, each answer closing its
    # connection so the client reconnects elsewhere; after it, the port closes.
    backend = await Backend().start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint))
        cfg = settings(scaler, timeouts={"drain_grace_s": 1.0, "drain_s": 1.0})
        async with running_activator(source, cfg) as act:
            url = f"http://127.0.0.1:{act.data_port}/x"
            async with client.get(url) as resp:  # a keep-alive connection, idle at SIGTERM
                assert resp.status == 200
            drain = asyncio.create_task(act.drain())
            await wait_until(lambda: not act.ready)
            async with client.get(f"http://127.0.0.1:{act.admin_port}/readyz") as resp:
                assert resp.status == 503
            for _ in range(3):
                async with client.get(url) as resp:
                    assert resp.status == 200
                    assert resp.headers["Connection"] == "close"
            await drain
            with pytest.raises(aiohttp.ClientConnectionError):
                async with client.get(url):
                    pass
        assert len(backend.received) == 4
    finally:
        await backend.stop()


async def test_draining_answers_new_requests_503(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    backend = await Backend().start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint))
        async with running_activator(source, settings(scaler)) as act:
            act.proxy.draining = True
            async with client.get(f"http://127.0.0.1:{act.data_port}/x") as resp:
                assert resp.status == 503
                assert "Retry-After" in resp.headers
                assert (await resp.json())["error"]["code"] == "draining"
    finally:
        await backend.stop()


async def test_requests_still_held_when_the_drain_ends_get_503(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    source = StaticSource(spec("default/cold", f"127.0.0.1:{free_port()}", ready=False))
    cfg = settings(scaler, retry_after_s=3, timeouts={"drain_s": 0.2, "drain_grace_s": 0.0})
    async with running_activator(source, cfg) as act:
        url = f"http://127.0.0.1:{act.data_port}/x"

        async def one() -> tuple[int, str, dict[str, dict[str, str]]]:
            async with client.get(url) as resp:
                return resp.status, resp.headers.get("Retry-After", ""), await resp.json()

        held = [asyncio.create_task(one()) for _ in range(3)]
        gate = act.registry.targets["default/cold"].gate
        await wait_until(lambda: gate.buffered >= 3)
        await act.drain()
        answers = await asyncio.gather(*held)
    for status, retry_after, body in answers:
        assert (status, retry_after) == (503, "3")
        assert body["error"]["code"] == "draining"
        assert set(body["error"]) == {"message", "type", "code"}
