"""No silent failures: what Tidal will not or cannot do is said at once, on the Deployment.

Covers (sandbox cluster, real ``tidal scaler`` and ``tidal activator``):
- a request for a model at zero whose ``autoscaling.tidal.dev/`` annotation
  is invalid is answered within a few seconds (not held to its 10-minute
  cold-start timeout) with a 503 whose OpenAI-shaped error names the
  Deployment and the annotation;
- a ``routing.tidal.dev/`` typo raises one ``InvalidRouting`` Warning;
- ``sleep-after`` on a server without sleep mode raises one
  ``SleepModeUnavailable`` Warning, not one per tick;
- ``tidal status`` names both, and a Deployment labelled
  ``autoscaling.tidal.dev/enabled: "yes"``, which opts nothing in.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.stack import SandboxStack, StackSettings
from tests.e2e.scaler.helpers import apply, reasons, running_stack, wait_until

pytestmark = [pytest.mark.e2e]


def broken_model() -> tuple[ExampleModel, dict[str, Any]]:
    example = ExampleModel(
        name="broken",
        model="broken-8b",
        startup_delay_s=1.0,
        extra_annotations={
            "autoscaling.tidal.dev/window": "5x",
            "routing.tidal.dev/model": "broken-8b",  # a typo of routing.tidal.dev/models
        },
    )
    deployment = example.deployment()
    deployment["spec"]["replicas"] = 0
    return example, deployment


def sleepless_model() -> tuple[ExampleModel, dict[str, Any]]:
    """A vLLM server started without sleep mode, with the warm tier asked for."""
    example = ExampleModel(
        name="sleepless",
        model="sleepless-8b",
        startup_delay_s=1.0,
        grace_s=600.0,
        extra_annotations={"autoscaling.tidal.dev/sleep-after": "2s"},
    )
    deployment = example.deployment()
    deployment["spec"]["replicas"] = 1
    return example, deployment


def count(stack: SandboxStack, name: str, reason: str) -> int:
    return reasons(stack, name).count(reason)


async def test_refusals_and_problems_are_said_at_once(tmp_path: Path) -> None:
    broken, broken_deployment = broken_model()
    sleepless, sleepless_deployment = sleepless_model()
    settings = StackSettings(
        example=None,
        scaler_args=("--tick-interval-s", "1"),
        scaler_env={"TIDAL_SCALER_SLEEP_HANDOFF_S": "1"},
    )
    async with running_stack(tmp_path / "stack", settings) as stack:
        apply(stack, broken, broken_deployment)
        apply(stack, sleepless, sleepless_deployment)
        body = {"model": broken.model, "prompt": "hello", "max_tokens": 4}
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for _ in range(100):  # the activator learns the target from its watch
                started = time.monotonic()
                async with session.post(
                    f"{stack.addresses.activator_url}/v1/completions", json=body
                ) as resp:
                    status, answer = resp.status, await resp.json(content_type=None)
                took = time.monotonic() - started
                if status != 404:
                    break
                await asyncio.sleep(0.1)
        assert status == 503, answer
        assert took < 5.0
        error = answer["error"]
        assert error["code"] == "not_woken"
        assert "default/broken" in error["message"]
        assert 'autoscaling.tidal.dev/window: "5x"' in error["message"]
        assert stack.deployment_state(broken.name)[0] == 0  # left alone

        await wait_until(
            lambda: count(stack, broken.name, "InvalidRouting") == 1,
            timeout_s=10,
            what="an InvalidRouting Event for the routing typo",
        )
        await wait_until(
            lambda: count(stack, sleepless.name, "SleepModeUnavailable") == 1,
            timeout_s=30,
            what="a SleepModeUnavailable Event for sleep-after without sleep mode",
        )
        await asyncio.sleep(4.0)  # several ticks and sleep attempts' worth
        assert count(stack, broken.name, "InvalidRouting") == 1
        assert count(stack, sleepless.name, "SleepModeUnavailable") == 1
        assert count(stack, broken.name, "InvalidAnnotation") == 1

        # tidal status says all of it, and names a label that opts nothing in.
        opted_out = ExampleModel(name="yes", model="yes-8b")
        opted_out_deployment = opted_out.deployment()
        opted_out_deployment["metadata"]["labels"]["autoscaling.tidal.dev/enabled"] = "yes"
        apply(stack, opted_out, opted_out_deployment)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "scaler", "status", "--kubeconfig", str(stack.kubeconfig),
            "--scaler-url", stack.addresses.scaler_url,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
        text = out.decode()
        assert proc.returncode == 0, err.decode()
        assert 'default/broken: routing.tidal.dev/model: "broken-8b"' in text
        assert "Sleep mode unavailable" in text and "default/sleepless:" in text
        assert 'default/yes: autoscaling.tidal.dev/enabled="yes"' in text
