"""What the running ``tidal scaler`` refuses: reports without the token, bad annotations.

Covers:
- ``POST /v1/stats`` and ``POST /v1/activate`` without the bearer token, or
  with a wrong one, get 401 from the real process and change nothing: the
  model at zero stays at zero although the report claims heavy load; the
  same report with the token is taken (200) and wakes it;
- a Deployment with an invalid annotation gets an ``InvalidAnnotation``
  Warning Event naming key, value and what is allowed, and its scale is left
  untouched under load (no write to it in the API server's audit log).

Nothing sleeps for a fixed time: "nothing happened" is checked after the
scaler has decided a given number of times more (its
``tidal_scaler_tick_duration_seconds`` count), read from ``/metrics``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from loadtests.sandbox.stack import StackSettings
from tests.e2e.scaler.helpers import Reporter, apply, events, model, running_stack, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TICKS = "tidal_scaler_tick_duration_seconds"


async def decisions(session: aiohttp.ClientSession, url: str) -> int:
    """How many ticks the scaler has completed on its synced targets."""
    async with session.get(f"{url}/metrics") as resp:
        text = await resp.text()
    for family in text_string_to_metric_families(text):
        if family.name == TICKS:
            for sample in family.samples:
                if sample.name == TICKS + "_count":
                    return int(sample.value)
    raise AssertionError(f"{TICKS} missing from the scaler's /metrics")


async def more_decisions(
    session: aiohttp.ClientSession, url: str, count: int, *, timeout_s: float = 15.0
) -> None:
    """Wait until the scaler has completed ``count`` more ticks than now (bounded)."""
    loop = asyncio.get_running_loop()
    target = await decisions(session, url) + count
    deadline = loop.time() + timeout_s
    while await decisions(session, url) < target:
        if loop.time() > deadline:
            raise AssertionError(f"the scaler did not tick {count} more times in {timeout_s}s")
        await asyncio.sleep(0.1)


async def test_reports_and_activations_need_the_token(tmp_path: Path) -> None:
    example, deployment = model(replicas=0, processes=False, target_concurrency=8)
    settings = StackSettings(example=None, activator=False, scaler_args=("--tick-interval-s", "1"))
    async with running_stack(tmp_path, settings) as stack:
        apply(stack, example, deployment)
        reporter = Reporter([stack.addresses.scaler_url], stack.token, example.target)
        reporter.concurrency = 40.0
        report = reporter.body()
        activation = {"activator": "e2e", "target": example.target}
        answers: list[tuple[str, int, int]] = []  # (what, attempt, status): every one kept
        async with aiohttp.ClientSession() as session:

            async def post(path: str, body: dict[str, Any], auth: str | None) -> int:
                headers = {"Authorization": auth} if auth is not None else {}
                async with session.post(
                    f"{stack.addresses.scaler_url}{path}", json=body, headers=headers
                ) as resp:
                    await resp.read()
                    return resp.status

            for name, auth in (("none", None), ("wrong", "Bearer nope"), ("basic", "Basic x")):
                for attempt in range(3):
                    answers.append(
                        (f"stats-{name}", attempt, await post("/v1/stats", report, auth))
                    )
                    status = await post("/v1/activate", activation, auth)
                    answers.append((f"activate-{name}", attempt, status))
            assert len(answers) == 18
            assert [a for a in answers if a[2] != 401] == [], answers
            # Two more decisions after the last refusal: nothing may have been woken.
            await more_decisions(session, stack.addresses.scaler_url, 2)
            assert stack.deployment_state(example.name)[0] == 0
            async with session.get(f"{stack.addresses.scaler_url}/v1/targets") as resp:
                view = await resp.json()
            assert view["activators"] == 0
            # The same report with the token is taken, and its load wakes the model.
            assert await post("/v1/stats", report, f"Bearer {stack.token}") == 200
            assert await post("/v1/activate", activation, f"Bearer {stack.token}") == 202
            await wait_until(
                lambda: stack.deployment_state(example.name)[0] >= 1,
                timeout_s=10,
                what="woken by the authenticated activation",
            )


async def test_invalid_annotation_event_and_scale_untouched(tmp_path: Path) -> None:
    example, deployment = model(
        replicas=1,
        processes=False,
        target_concurrency=8,
        extra_annotations={"autoscaling.tidal.dev/max-scale-down-rate": "0.5"},
    )
    settings = StackSettings(example=None, activator=False, scaler_args=("--tick-interval-s", "1"))
    async with running_stack(tmp_path, settings) as stack:
        apply(stack, example, deployment)
        async with (
            Reporter([stack.addresses.scaler_url], stack.token, example.target) as reporter,
            aiohttp.ClientSession() as session,
        ):
            reporter.concurrency = 40.0  # would want 5 replicas if the config were valid
            await wait_until(
                lambda: any(e["reason"] == "InvalidAnnotation" for e in events(stack, "llama")),
                timeout_s=10,
                what="an InvalidAnnotation Event",
            )
            await more_decisions(
                session, stack.addresses.scaler_url, 3
            )  # three more ticks under load
        assert reporter.answers
        assert set(reporter.answers) == {200}, reporter.answers
        [event] = [e for e in events(stack, "llama") if e["reason"] == "InvalidAnnotation"]
        assert event["type"] == "Warning"
        message = event["message"]
        assert "autoscaling.tidal.dev/max-scale-down-rate" in message
        assert "0.5" in message
        assert "allowed" in message
        assert stack.deployment_state(example.name)[0] == 1
        api = stack.cluster.api
        assert api is not None
        touched = [
            f"{r.method} {r.path}"
            for r in api.audit
            if r.user.startswith("tidal-scaler") and "/deployments/" in r.path
        ]
        assert touched == []
