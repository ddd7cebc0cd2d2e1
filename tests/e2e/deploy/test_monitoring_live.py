"""deploy/monitoring against a live sandbox: a real Prometheus scrapes Tidal under load.

Covers (Debian's ``prometheus`` with a temporary config, its own TSDB, 1 s
scrape and rule evaluation, on the sandbox's loopback block; it scrapes the
scaler's ``/metrics`` and the activator's admin ``/metrics`` and loads the
rules of ``deploy/monitoring/rules.yaml`` as they are, except that each
``for`` is cut to 1 s so the test does not wait minutes):
- a model at zero with ``max-buffered: 4`` and a 15 s cold start gets 6
  requests at once: 4 are held, 2 get a 503 ``buffer_full``, and the alert
  ``TidalActivatorBufferNearFull`` fires for that model while they wait;
- once the replica is ready, the held requests get 200 and the alert
  resolves;
- every metric that the rules and the Grafana dashboard read has a series
  in that Prometheus.
A missing ``prometheus`` binary fails the test with the install hint.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from loadtests.sandbox.prometheus import PrometheusProcess
from loadtests.sandbox.stack import StackSettings
from tests.e2e.scaler.helpers import apply, model, running_stack
from tests.integration.deploy.manifests import referenced_metrics, rule_groups

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ALERT = "TidalActivatorBufferNearFull"


def _fast_rules(path: Path) -> Path:
    groups = rule_groups()
    for group in groups["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "1s"
    path.write_text(yaml.safe_dump(groups))
    return path


async def _get(session: aiohttp.ClientSession, url: str, **params: str) -> Any:
    async with session.get(url, params=params) as resp:
        assert resp.status == 200, await resp.text()
        return (await resp.json())["data"]


async def _eventually(
    check: Callable[[], Any], *, timeout_s: float, what: str, every_s: float = 0.5
) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        got = await check()
        if got:
            return got
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f}s: {what}")
        await asyncio.sleep(every_s)


async def test_alert_fires_and_every_referenced_metric_has_a_series(
    tmp_path: Path, tool_path: Callable[[str], str]
) -> None:
    example, deployment = model(
        startup_delay_s=15.0,
        max_scale=2,
        window_s=6.0,
        grace_s=600.0,
        extra_annotations={"routing.tidal.dev/max-buffered": "4"},
    )
    settings = StackSettings(example=None, scaler_args=("--tick-interval-s", "1"))
    async with running_stack(tmp_path / "stack", settings) as stack:
        apply(stack, example, deployment)
        host = stack.addresses.scaler_host().rsplit(".", 1)[0] + ".4"
        prometheus = PrometheusProcess(
            tool_path("prometheus"),
            tmp_path / "prometheus",
            host=host,
            jobs={
                "tidal-scaler": [f"{stack.addresses.scaler_host()}:{settings.scaler_port}"],
                "tidal-activator": [stack.addresses.activator_admin_url.removeprefix("http://")],
            },
            rule_files=[_fast_rules(tmp_path / "tidal.rules.yml")],
        )
        await prometheus.start()
        try:
            await _drive(
                stack.addresses.activator_url, prometheus.url, example.model, example.target
            )
        finally:
            await prometheus.stop()


async def _drive(activator: str, prometheus: str, model_name: str, target: str) -> None:
    body = {"model": model_name, "prompt": "hi", "max_tokens": 8}
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        # The activator must know the target before the burst, or the
        # requests are 404s rather than held.
        await _eventually(
            lambda: _has_series(session, prometheus, "tidal_activator_buffer_capacity", target),
            timeout_s=30,
            what="the activator exports the target's buffer capacity",
        )

        async def send() -> int:
            async with session.post(f"{activator}/v1/completions", json=body) as resp:
                await resp.read()
                return resp.status

        burst = [asyncio.create_task(send()) for _ in range(6)]
        try:
            alerts = await _eventually(
                lambda: _firing(session, prometheus),
                timeout_s=14,
                what=f"{ALERT} firing while 4 of 4 requests are held",
            )
            statuses = sorted(await asyncio.gather(*burst))
        finally:
            for task in burst:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*burst, return_exceptions=True)
        assert [a["labels"]["target"] for a in alerts] == [target]
        assert statuses == [200, 200, 200, 200, 503, 503]

        # More traffic once warm, so rates and durations have samples too.
        assert set(await asyncio.gather(*(send() for _ in range(8)))) == {200}
        await _eventually(
            lambda: _not_firing(session, prometheus),
            timeout_s=15,
            what=f"{ALERT} resolved once the requests were served",
        )
        names = set(await _get(session, f"{prometheus}/api/v1/label/__name__/values"))
        missing = sorted(
            name
            for name in referenced_metrics()
            if name not in names and f"{name}_bucket" not in names
        )
        assert missing == [], f"no series in Prometheus for {missing}"


async def _has_series(
    session: aiohttp.ClientSession, prometheus: str, name: str, target: str
) -> bool:
    data = await _get(session, f"{prometheus}/api/v1/query", query=f'{name}{{target="{target}"}}')
    return bool(data["result"])


async def _firing(session: aiohttp.ClientSession, prometheus: str) -> list[dict[str, Any]]:
    data = await _get(session, f"{prometheus}/api/v1/alerts")
    return [
        a for a in data["alerts"] if a["labels"]["alertname"] == ALERT and a["state"] == "firing"
    ]


async def _not_firing(session: aiohttp.ClientSession, prometheus: str) -> bool:
    return not await _firing(session, prometheus)
