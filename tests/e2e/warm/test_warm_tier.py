"""The warm tier through the real processes: sleep when idle, wake in about a second.

Covers (sandbox cluster, ``tidal scaler`` and ``tidal activator`` processes,
fake vLLM servers with ``--enable-sleep-mode`` and ``VLLM_SERVER_DEV_MODE=1``),
with three models on one time-sliced GPU whose memory fits two:
- a model idle past ``sleep-after`` sleeps (``Slept`` Event); a request then
  is answered after about the modelled wake time, far below the cold start
  (``Woke`` Event, the scaler's view counts wakes and sleeps);
- a client's ``POST /sleep`` through the activator is refused with 403;
- requests alternating between the three are all answered, and each wake
  that needs room puts the idlest awake model to sleep.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadtests.sandbox.cluster.nodes import NodeSpec
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.stack import SandboxStack, StackSettings
from tests.e2e.scaler.helpers import apply, events, running_stack, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

COLD_START_S = 8.0
SERVER_ARGS = "--enable-sleep-mode --weights-mib 16000 --kv-cache-mib 8000"
# Awake: 600 + 16000 + 8000 = 24600 MiB; asleep: 600. Two awake and one asleep fit.
GPU_MIB = 50_000
# level 1: 0.1 s + 16000 MiB / 20 GiB/s = 0.88 s, plus a 12 ms warm-up.
WAKE_S = 0.1 + 16_000 / 1024 / 20
# The activator reports every second by default: one second of handoff is enough here.
HANDOFF = {"TIDAL_SCALER_SLEEP_HANDOFF_S": "1"}
PROMETHEUS = shutil.which("prometheus")
# Requests to the shared GPU this far apart: "least recently used" is only as
# sharp as the activators' report period and the scaler's tick (1 s each here).
GAP_S = 2.0


def warm_model(
    name: str, model: str, *, sleep_after: str, replicas: int
) -> tuple[ExampleModel, dict[str, Any]]:
    example = ExampleModel(
        name=name,
        model=model,
        startup_delay_s=COLD_START_S,
        max_scale=1,
        window_s=6.0,
        scale_down_delay_s=0.0,
        grace_s=600.0,
        cold_start_timeout_s=60.0,
        extra_annotations={
            "autoscaling.tidal.dev/sleep-after": sleep_after,
            "autoscaling.tidal.dev/sleep-level": "1",
        },
    )
    deployment = example.deployment()
    deployment["spec"]["replicas"] = replicas
    template = deployment["spec"]["template"]
    template["metadata"]["annotations"]["sandbox.tidal.dev/args"] = SERVER_ARGS
    template["spec"]["containers"][0]["env"] = [{"name": "VLLM_SERVER_DEV_MODE", "value": "1"}]
    return example, deployment


async def complete(session: aiohttp.ClientSession, url: str, model: str) -> tuple[int, float]:
    body = {"model": model, "prompt": "hello", "max_tokens": 4, "ignore_eos": True}
    started = time.monotonic()
    async with session.post(f"{url}/v1/completions", json=body) as resp:
        await resp.read()
        return resp.status, time.monotonic() - started


def slept(stack: SandboxStack, name: str) -> list[str]:
    return [e["message"] for e in events(stack, name) if e["reason"] == "Slept"]


def woke(stack: SandboxStack, name: str) -> list[str]:
    return [e["message"] for e in events(stack, name) if e["reason"] == "Woke"]


async def ready_pods(stack: SandboxStack, name: str) -> int:
    return stack.deployment_state(name)[1]


@pytest.mark.parametrize(
    "prometheus",
    [
        pytest.param(None, id="reactive"),
        pytest.param(
            PROMETHEUS or "prometheus",
            id="learned-memory",
            marks=pytest.mark.skipif(
                PROMETHEUS is None, reason="no prometheus binary (scripts/ensure-debian-packages)"
            ),
        ),
    ],
)
@pytest.mark.timeout(180)  # about a minute alone, more beside other tests
async def test_three_models_share_a_gpu_that_fits_two(
    tmp_path: Path, prometheus: str | None
) -> None:
    """Reactive: each wake that finds no room fails for memory once, then evicts.
    Learned memory (DCGM through Prometheus): room is made before the wake.
    Either way, the first request finds every model asleep and room on the GPU:
    a plain wake, about the modelled time."""
    node = NodeSpec(
        "gpu-shared", "on-demand", "us-east-1a", gpus=1, gpu_replicas=3, gpu_memory_mib=GPU_MIB
    )
    names = ("alpha", "beta", "gamma")
    # Long enough that no model sleeps on its own during the alternation below:
    # every sleep there is one made to make room.
    models = [warm_model(n, f"{n}-8b", sleep_after="15s", replicas=1) for n in names]
    settings = StackSettings(
        example=None,
        nodes=(node,),
        scaler_args=("--tick-interval-s", "1"),
        scaler_env=HANDOFF,
        prometheus=prometheus,
    )
    async with running_stack(tmp_path, settings) as stack:
        for example, deployment in models:
            apply(stack, example, deployment)
        await wait_until(
            lambda: all(stack.deployment_state(n)[1] == 1 for n in names),
            timeout_s=60,
            what="three replicas ready on the shared GPU",
        )
        # Cold starts are not checked against memory: all three come up awake,
        # then sleep once idle past sleep-after.
        await wait_until(
            lambda: all(slept(stack, n) for n in names), timeout_s=60, what="all three asleep"
        )
        await asyncio.sleep(1.5)
        timeout = aiohttp.ClientTimeout(total=60)
        statuses: list[int] = []
        tooks: list[float] = []
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for round_ in range(2):
                for example, _ in models:
                    status, took = await complete(
                        session, stack.addresses.activator_url, example.model
                    )
                    statuses.append(status)
                    tooks.append(took)
                    assert took < COLD_START_S, (example.name, round_, took)
                    await asyncio.sleep(GAP_S)
            # Through the activator, a client may not put a model to sleep.
            async with session.post(f"{stack.addresses.activator_url}/sleep?level=1") as resp:
                assert resp.status == 403
                body = await resp.json()
            assert body["error"]["code"] == "denied_endpoint"
        assert statuses == [200] * 6
        # About the modelled wake (plus handoffs of a few ticks), far below a cold start.
        assert WAKE_S * 0.8 <= tooks[0] < COLD_START_S / 2, tooks
        assert all(woke(stack, n) for n in names), [events(stack, n) for n in names]
        # The third wake found two awake: it put the idlest to sleep first, and so on
        # round the cycle (A B C A B C: C evicts A, A evicts B, B evicts C, C evicts A).
        made_room = sorted(
            (int(e["metadata"]["resourceVersion"]), e["involvedObject"]["name"])
            for n in names
            for e in events(stack, n)
            if e["reason"] == "Slept" and "make room" in e["message"]
        )
        if prometheus is None:
            assert [n for _, n in made_room] == ["alpha", "beta", "gamma", "alpha"], made_room
        else:
            # The scaler also keeps room: an idle model beside a sleeping one sleeps
            # once idle, so each wake finds room; the sleeps still go round.
            assert {n for _, n in made_room} == set(names), made_room
        # Nothing cold-started a second replica: every model woke from sleep.
        assert all(stack.deployment_state(n)[0] == 1 for n in names)
        failed = [m for n in names for e in events(stack, n) if e["reason"] == "WakeFailed"
                  for m in [e["message"]]]  # fmt: skip
        assert not failed, failed
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{stack.addresses.scaler_url}/v1/targets") as resp,
        ):
            views = {t["target"]: t["warm"] for t in (await resp.json())["targets"]}
        assert all(v["wakes"] >= 1 and v["sleeps"] >= 1 for v in views.values()), views
        retries = sum(v["outOfMemoryRetries"] for v in views.values())
        if prometheus is None:
            assert retries == 4  # one per eviction
        else:
            assert retries == 0  # the room was made first
