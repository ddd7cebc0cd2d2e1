"""Reports to the scaler and the routes-file source, over loopback.

Covers:
- ``/v1/stats`` arrives periodically with the bearer token and the
  shape; while requests are held it reports them as buffered with a
  positive concurrency and counts arrivals; per-pod in-flight is keyed by
  the endpoint;
- ``/v1/activate`` repeats with backoff while the target stays cold;
- the routes file: a listed endpoint is ready only while it accepts
  connections (probed), a held request goes out when it starts listening,
  and an edit of the file is picked up (new target routable);
- ``/readyz`` waits for the source's first snapshot: an activator that has
  not listed its targets yet (the API server down when it starts) says it is
  not ready, rather than being sent traffic it can only answer 404.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from activator.app import start
from activator.routing.routes_file import RoutesFileSource
from activator.targets import Discovered, TargetSink
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


async def test_stats_report_shape_and_activation_backoff(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    source = StaticSource(spec("default/llama", f"127.0.0.1:{free_port()}", ready=False))
    async with running_activator(source, settings(scaler)) as act:
        act.reporter.backoff_s = (0.1,)
        url = f"http://127.0.0.1:{act.data_port}/x"
        held = [asyncio.create_task(client.get(url)) for _ in range(3)]
        report = None
        for _ in range(50):
            report = await asyncio.wait_for(scaler.reported.get(), 5)
            if report["targets"]["default/llama"]["buffered"] == 3:
                break
        assert report is not None
        entry = report["targets"]["default/llama"]
        assert report["activator"] == "test-activator"
        assert 0.1 < report["period_s"] < 1.0
        assert entry["in_flight"] == 0
        assert entry["buffered"] == 3
        assert entry["concurrency"] > 0
        assert entry["pods"] == {}
        assert sum(r["targets"]["default/llama"]["arrivals"] for _, r, _ in scaler.stats) == 3
        assert all(auth == "Bearer s3cret" for _, _, auth in scaler.stats)
        await wait_until(lambda: len(scaler.activations) >= 3)
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)


async def test_pods_in_flight_reported(scaler: FakeScaler, client: aiohttp.ClientSession) -> None:
    backend = await Backend(delay_s=0.6).start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint))
        async with running_activator(source, settings(scaler)) as act:
            task = asyncio.create_task(client.get(f"http://127.0.0.1:{act.data_port}/x"))
            while True:
                report = await asyncio.wait_for(scaler.reported.get(), 5)
                if report["targets"]["default/llama"]["in_flight"] == 1:
                    break
            assert report["targets"]["default/llama"]["pods"] == {backend.endpoint: 1}
            assert (await task).status == 200
    finally:
        await backend.stop()


async def test_token_estimates_are_reported_only_for_a_model_sized_in_tokens(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    backend = await Backend().start()
    try:
        source = StaticSource(
            spec(
                "default/slo",
                backend.endpoint,
                path_prefix=None,
                models=("slo",),
                counts_tokens=True,
            ),
            spec("default/plain", backend.endpoint, path_prefix=None, models=("plain",)),
        )
        async with running_activator(source, settings(scaler)) as act:
            url = f"http://127.0.0.1:{act.data_port}/v1/chat/completions"
            message = {"role": "user", "content": "x" * 4000}  # 1000 tokens and 4 of template
            for model in ("slo", "slo", "plain"):
                body = {"model": model, "messages": [message], "max_tokens": 64}
                async with client.post(url, json=body) as resp:
                    assert resp.status == 200
            await wait_until(
                lambda: (
                    sum(
                        r["targets"]["default/slo"].get("prompt_tokens", 0)
                        for _, r, _ in scaler.stats
                    )
                    == 2 * 1004
                )
            )
            entries = [r["targets"] for _, r, _ in scaler.stats]
            assert sum(t["default/slo"]["output_tokens"] for t in entries) == 128
            assert all("prompt_tokens" not in t["default/plain"] for t in entries)
            assert sum(t["default/plain"]["arrivals"] for t in entries) == 1
    finally:
        await backend.stop()


async def test_routes_file_cold_start_and_reload(
    tmp_path: Path, scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    port = free_port()
    routes = tmp_path / "routes.yaml"
    routes.write_text(
        "targets:\n"
        "  - name: default/llama\n"
        "    path_prefix: /llama\n"
        f'    endpoints: ["127.0.0.1:{port}"]\n'
        "    cold_start_timeout: 30s\n"
    )
    cfg = settings(scaler, routes=routes, recheck_ready_s=0.1)
    source = RoutesFileSource(routes, poll_s=0.05)
    backend = Backend(name="late")
    other = await Backend(name="other").start()
    activator = await start(cfg, source=source)
    try:
        base = f"http://127.0.0.1:{activator.data_port}"
        await wait_until(lambda: bool(activator.registry.updates))
        gate = activator.registry.targets["default/llama"].gate
        held = asyncio.create_task(client.get(base + "/llama/v1/models"))
        await wait_until(lambda: gate.buffered >= 1)
        await backend.start(port)
        resp = await asyncio.wait_for(held, 5)
        assert resp.status == 200
        assert (await resp.json())["backend"] == "late"
        # Stops listening: no longer ready once a probe notices.
        await backend.stop()
        await wait_until(lambda: not gate.endpoints.ready)
        # Edit the file: a second target appears.
        routes.write_text(
            routes.read_text()
            + "  - name: default/other\n    path_prefix: /other\n"
            + f'    endpoints: ["{other.endpoint}"]\n'
        )
        await wait_until(lambda: "default/other" in activator.registry.targets)
        async with client.get(base + "/other/x") as resp:
            assert resp.status == 200
            assert (await resp.json())["backend"] == "other"
    finally:
        await activator.close()
        await backend.stop()
        await other.stop()


class LateSource:
    """A TargetSource whose first snapshot waits until the test lets it go."""

    def __init__(self, *targets: Discovered) -> None:
        self.specs = {t.spec.name: t for t in targets}
        self.release = asyncio.Event()

    async def run(self, sink: TargetSink) -> None:
        await self.release.wait()
        sink.apply(self.specs)
        await asyncio.Event().wait()


async def test_not_ready_until_the_first_snapshot(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    source = LateSource(spec("default/llama", f"127.0.0.1:{free_port()}", path_prefix="/v1"))
    act = await start(settings(scaler), source=source)
    try:
        readyz = f"http://127.0.0.1:{act.admin_port}/readyz"
        for _ in range(3):  # the source has had time to run: it is still listing
            await asyncio.sleep(0.05)
            async with client.get(readyz) as resp:
                assert resp.status == 503
        source.release.set()
        await wait_until(lambda: bool(act.registry.updates))
        async with client.get(readyz) as resp:
            assert resp.status == 200
    finally:
        await act.close()
