"""GPU utilization through a real Prometheus: the scaler sizes a model on DCGM data.

Covers (Debian's ``prometheus``, started with a temporary config, its own
TSDB directory, a 1 s scrape interval, on the sandbox's loopback block):
- the sandbox's DCGM-like exporter publishes ``DCGM_FI_DEV_GPU_UTIL`` with the
  ``pod`` and ``namespace`` of each running fake-vLLM pod, and Prometheus has
  it;
- a Deployment with ``target-gpu-utilization`` and no other target set (the
  concurrency target stays at its default, 16) scales out on GPU utilization
  while its concurrency alone would keep it at one replica: the scaler's view
  shows the GPU signal asking for more than concurrency does.
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

from loadtests.sandbox.stack import StackSettings
from tests.e2e.scaler.helpers import apply, model, reasons, running_stack, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def test_scales_out_on_gpu_utilization_from_prometheus(
    tmp_path: Path, tool_path: Callable[[str], str]
) -> None:
    example, deployment = model(
        replicas=1,
        startup_delay_s=0.5,
        min_scale=1,
        max_scale=2,
        window_s=6.0,
        scale_down_delay_s=30.0,
        extra_annotations={"autoscaling.tidal.dev/target-gpu-utilization": "50"},
        drop=("autoscaling.tidal.dev/target-concurrency",),
    )
    settings = StackSettings(
        example=None,
        prometheus=tool_path("prometheus"),
        scaler_args=("--tick-interval-s", "1"),
        scaler_env={"TIDAL_SCALER_PROMETHEUS__INTERVAL_S": "1"},
    )
    async with running_stack(tmp_path, settings) as stack:
        assert stack.prometheus is not None
        apply(stack, example, deployment)
        await wait_until(
            lambda: stack.deployment_state(example.name)[1] == 1,
            timeout_s=20,
            what="one ready replica",
        )
        url = f"{stack.addresses.activator_url}/v1/completions"
        body = {"model": example.model, "prompt": "hi", "max_tokens": 100, "ignore_eos": True}
        stop = asyncio.Event()
        statuses: list[int] = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:

            async def client() -> None:
                # Back to back: the GPU is always busy, yet only 2 requests run.
                while not stop.is_set():
                    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                        async with session.post(url, json=body) as resp:
                            await resp.read()
                            statuses.append(resp.status)

            async def query(q: str) -> list[dict[str, Any]]:
                async with session.get(
                    f"{stack.prometheus.url}/api/v1/query",  # type: ignore[union-attr]
                    params={"query": q},
                ) as resp:
                    got: dict[str, Any] = await resp.json()
                result: list[dict[str, Any]] = got["data"]["result"]
                return result

            clients = [asyncio.create_task(client()) for _ in range(2)]
            try:
                await wait_until(
                    lambda: stack.deployment_state(example.name)[0] == 2,
                    timeout_s=40,
                    what="scaled out to 2 on GPU utilization",
                )
                series = await query("DCGM_FI_DEV_GPU_UTIL")
                async with session.get(f"{stack.addresses.scaler_url}/v1/targets") as resp:
                    view = (await resp.json())["targets"][0]
            finally:
                stop.set()
                await asyncio.gather(*clients, return_exceptions=True)
        assert statuses
        assert set(statuses) == {200}
        pods = {s["metric"]["pod"] for s in series}
        assert any(p.startswith(f"{example.name}-") for p in pods)
        assert {s["metric"]["namespace"] for s in series} == {"default"}
        assert "ScaledUp" in reasons(stack, example.name)
        wanted = view["per_signal_desired"]
        assert wanted["gpu_utilization"] >= 2
        assert wanted["concurrency"] == 1
        assert view["observed"]["dcgm_gpu_utilization"] > 0.5
