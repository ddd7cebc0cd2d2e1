"""What the running ``tidal scaler`` refuses: reports without the token, bad annotations.

Covers:
- ``POST /v1/stats`` and ``POST /v1/activate`` without the bearer token, or
  with a wrong one, get 401 from the real process and change nothing: the
  model at zero stays at zero although the report claims heavy load; the
  same report with the token is taken (200) and wakes it;
- a Deployment with an invalid annotation gets an ``InvalidAnnotation``
  Warning Event naming key, value and what is allowed, and its scale is left
  untouched under load (no write to it in the API server's audit log).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadtests.sandbox.stack import StackSettings
from tests.e2e.scaler.helpers import Reporter, apply, events, model, running_stack, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def test_reports_and_activations_need_the_token(tmp_path: Path) -> None:
    example, deployment = model(replicas=0, processes=False, target_concurrency=8)
    settings = StackSettings(example=None, activator=False, scaler_args=("--tick-interval-s", "1"))
    async with running_stack(tmp_path, settings) as stack:
        apply(stack, example, deployment)
        reporter = Reporter([stack.scaler_url], stack.token, example.target)
        reporter.concurrency = 40.0
        report = reporter.body()
        activation = {"activator": "e2e", "target": example.target}
        answers: dict[str, int] = {}
        async with aiohttp.ClientSession() as session:

            async def post(path: str, body: dict[str, Any], auth: str | None) -> int:
                headers = {"Authorization": auth} if auth is not None else {}
                async with session.post(
                    f"{stack.scaler_url}{path}", json=body, headers=headers
                ) as resp:
                    await resp.read()
                    return resp.status

            for name, auth in (("none", None), ("wrong", "Bearer nope"), ("basic", "Basic x")):
                for _ in range(3):
                    answers[f"stats-{name}"] = await post("/v1/stats", report, auth)
                    answers[f"activate-{name}"] = await post("/v1/activate", activation, auth)
                    await asyncio.sleep(0.5)
            assert set(answers.values()) == {401}, answers
            await asyncio.sleep(2)  # two more ticks: nothing may have been woken
            assert stack.deployment_state(example.name)[0] == 0
            async with session.get(f"{stack.scaler_url}/v1/targets") as resp:
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
        async with Reporter([stack.scaler_url], stack.token, example.target) as reporter:
            reporter.concurrency = 40.0  # would want 5 replicas if the config were valid
            await wait_until(
                lambda: any(e["reason"] == "InvalidAnnotation" for e in events(stack, "llama")),
                timeout_s=10,
                what="an InvalidAnnotation Event",
            )
            await asyncio.sleep(3)  # three more ticks under load
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
