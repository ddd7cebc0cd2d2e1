"""Reports and activations reach every scaler replica, over loopback.

Covers:
- ``--scaler-url`` with a comma-separated list: every replica gets the
  stats reports and the activation; the container-concurrency share uses
  the largest activator count the replicas answer;
- one URL whose host resolves to two addresses (a headless Service): both
  replicas, listening on the same port at 127.0.0.1 and 127.0.0.2, get
  everything, with ``Host`` kept as the URL's;
- a replica that hangs and one that refuses connections delay neither the
  activation nor the periodic reports of the live one;
- :class:`ScalerPeers`: a failed resolution keeps the last known addresses,
  re-resolution happens after ``refresh_s`` in the background (callers never
  wait), IPv6 addresses are bracketed, IP literals are not resolved; the real
  resolver finds 127.0.0.1 for ``localhost``; bad URL lists are refused with
  a clear message.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from activator.metrics import Metrics
from activator.routing.registry import Registry
from activator.scaler_link.peers import ScalerPeers, parse_scaler_urls, resolve_all
from activator.scaler_link.reporting import Reporter
from activator.scaler_link.wake_queue import WakeQueue
from activator.settings import ActivatorSettings
from tests.integration.activator.helpers import (
    StaticSource,
    free_port,
    running_activator,
    settings,
    spec,
    wait_until,
)


@dataclass
class Replica:
    """A fake scaler replica on a given address; ``hang`` makes it never answer."""

    host: str = "127.0.0.1"
    port: int = 0
    activators: int = 1
    hang: bool = False
    stats: list[float] = field(default_factory=list)
    activations: list[float] = field(default_factory=list)
    hosts_seen: set[str] = field(default_factory=set)
    _release: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.hosts_seen.add(request.headers.get("Host", ""))
        if self.hang:
            await self._release.wait()
            raise web.HTTPServiceUnavailable()
        if request.path == "/v1/activate":
            self.activations.append(time.perf_counter())
            return web.json_response({}, status=202)
        self.stats.append(time.perf_counter())
        return web.json_response({"activators": self.activators})

    async def start(self) -> Replica:
        app = web.Application()
        app.router.add_post("/v1/{what}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()


async def test_comma_list_reaches_every_replica_and_takes_the_largest_count(
    client: aiohttp.ClientSession,
) -> None:
    one, two = await Replica(activators=1).start(), await Replica(activators=3).start()
    try:
        source = StaticSource(
            spec("default/llama", f"127.0.0.1:{free_port()}", ready=False, container_concurrency=9)
        )
        cfg = settings(None, scaler_url=f"{one.url}, {two.url}/")
        async with running_activator(source, cfg) as act:
            await wait_until(lambda: len(one.stats) >= 2 and len(two.stats) >= 2)
            gate = act.registry.targets["default/llama"].gate
            await wait_until(lambda: act.registry.word.activators == 3)
            assert gate.limit == 3  # 9 // 3
            held = asyncio.create_task(client.get(f"http://127.0.0.1:{act.data_port}/x"))
            await wait_until(lambda: bool(one.activations and two.activations))
            held.cancel()
            await asyncio.gather(held, return_exceptions=True)
            # Once the replica answering 3 is gone, its answer goes stale.
            await two.stop()
            await wait_until(lambda: act.registry.word.activators == 1, timeout_s=10)
    finally:
        await one.stop()
        await two.stop()


async def test_one_name_with_two_addresses_fans_out() -> None:
    first = await Replica(host="127.0.0.1").start()
    second = await Replica(host="127.0.0.2", port=first.port).start()
    asked: list[tuple[str, int]] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return ["127.0.0.1", "127.0.0.2"]

    wake = WakeQueue()
    registry = Registry(rng=random.Random(1), wake=wake.put)
    registry.apply({"default/llama": spec("default/llama", "127.0.0.1:9", ready=False)})
    target_name = "default/llama"
    url = f"http://tidal-scaler.tidal-system:{first.port}"
    session = aiohttp.ClientSession()
    reporter = Reporter(
        registry=registry,
        session=session,
        peers=ScalerPeers(parse_scaler_urls(url), resolve=resolve),
        token="t",
        activator="a",
        metrics=Metrics(CollectorRegistry(), targets=lambda: registry.targets),
        period_s=0.1,
        wake=wake,
    )
    task = asyncio.create_task(reporter.run())
    try:
        await wait_until(lambda: len(first.stats) >= 2 and len(second.stats) >= 2)
        reporter.activate(target_name)
        await wait_until(lambda: bool(first.activations and second.activations))
        assert asked[0] == ("tidal-scaler.tidal-system", first.port)
        expected = {f"tidal-scaler.tidal-system:{first.port}"}
        assert first.hosts_seen == expected
        assert second.hosts_seen == expected
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await session.close()
        await first.stop()
        await second.stop()


async def test_a_hanging_and_a_dead_replica_delay_nothing(client: aiohttp.ClientSession) -> None:
    live = await Replica().start()
    hanging = await Replica(hang=True).start()
    dead = f"http://127.0.0.1:{free_port()}"
    try:
        source = StaticSource(spec("default/llama", f"127.0.0.1:{free_port()}", ready=False))
        cfg = settings(
            None,
            scaler_url=f"{hanging.url},{dead},{live.url}",
            report_period_s=0.1,
            timeouts={"scaler_s": 5.0},
        )
        async with running_activator(source, cfg) as act:
            await wait_until(lambda: bool(hanging.stats or hanging.hosts_seen))
            held_at = time.perf_counter()
            held = asyncio.create_task(client.get(f"http://127.0.0.1:{act.data_port}/x"))
            await wait_until(lambda: bool(live.activations))
            # Told at once, although the first replica in the list never answers.
            assert live.activations[0] - held_at < 0.5
            # Reports keep their period at the live replica meanwhile (a
            # serial loop would wait 5 s per report for the hanging one).
            count = len(live.stats)
            await asyncio.sleep(1.0)
            assert len(live.stats) - count >= 5
            assert not hanging.activations
            assert not hanging.stats
            held.cancel()
            await asyncio.gather(held, return_exceptions=True)
    finally:
        await live.stop()
        await hanging.stop()


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_peers_keep_last_known_on_failure_and_refresh_in_background() -> None:
    clock = FakeClock()
    answers: list[Any] = [["10.0.0.1", "10.0.0.2"], OSError("no DNS"), ["fd00::7"]]
    calls = 0

    async def resolve(host: str, port: int) -> list[str]:
        nonlocal calls
        calls += 1
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return list(answer)

    peers = ScalerPeers(
        ["http://scaler.ns:8090", "https://10.9.9.9:443/base"],
        refresh_s=10.0,
        resolve=resolve,
        clock=clock,
    )
    first = await peers.current()
    assert [p.base for p in first] == [
        "http://10.0.0.1:8090",
        "http://10.0.0.2:8090",
        "https://10.9.9.9:443/base",
    ]
    assert first[2].tls
    assert first[2].host_header == "10.9.9.9"
    assert calls == 1  # the IP literal is not resolved
    clock.now = 5.0
    assert await peers.current() == first
    assert calls == 1
    # Due: the caller gets the known peers at once; the refresh fails and keeps them.
    clock.now = 10.0
    assert await peers.current() == first
    await wait_until(lambda: calls == 2 and not peers.refreshing)
    assert peers.known == first
    clock.now = 20.0
    await peers.current()
    await wait_until(lambda: calls == 3 and not peers.refreshing)
    assert [p.base for p in peers.known] == ["http://[fd00::7]:8090", "https://10.9.9.9:443/base"]
    assert peers.known[0].host_header == "scaler.ns:8090"
    await peers.close()


async def test_real_resolver_finds_loopback_for_localhost() -> None:
    assert "127.0.0.1" in await resolve_all("localhost", 8090)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param("tidal-scaler:8090", id="no-scheme"),
        pytest.param("http://ok:1, ftp://x", id="bad-second"),
        pytest.param("http://", id="no-host"),
    ],
)
def test_bad_scaler_urls_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="scaler_url"):
        parse_scaler_urls(value)
    with pytest.raises(ValueError, match="scaler_url"):
        ActivatorSettings(scaler_url=value)


def test_scaler_url_list_parses() -> None:
    assert parse_scaler_urls(" http://a:1/ ,https://b ") == ("http://a:1", "https://b")
