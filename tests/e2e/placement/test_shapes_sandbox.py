"""GPU shapes end to end: the real ``tidal scaler`` and activator on a modelled GPU cluster.

The cluster has one node of two whole H100s and one H100 node cut into four
``3g.40gb`` slices; the table prices an H100 at $12.29/h and a slice at
$5.27/h. The model's template asks for an H100; it lists ``h100`` and
``mig-3g.40gb`` (with ``--max-model-len 32768`` on the slice, without which
an 8B model's vLLM refuses to start there), a concurrency target of 10 per
H100 and a pending-timeout of 10 s. A synthetic activator reports the load
(8, then 12 in flight) while a client sends real completions through the
activator the whole time.

Covers the issue's sandbox bar:
- at 8 in flight the model scales out on the cheaper shape: two slices
  ($10.54/h against one H100's $12.29), and the user's H100 Deployment stays
  at zero; the status annotation says so, with the hourly cost;
- another tenant takes the two free slices and the load rises to 12: the
  third slice stays Pending, and at the pending-timeout the shape is capped
  (``ShapeUnavailable``, a Warning) and an H100 covers, within a tick or two
  of the timeout;
- the other tenant leaves: once the cap is lifted (twice the timeout) the
  model moves back to three slices, and the H100 goes once they are Ready;
- a bad shape declaration (an unknown shape, an override of an unlisted one)
  gets one ``InvalidAnnotation`` Event naming the keys and what is allowed,
  and the model keeps scaling on the shapes declared well (to four slices
  at 16 in flight);
- no completion sent through the activator fails along the way.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadtests.demo.shapes_story import CONFIGMAPS, H100, SLICE, blocker, shape_table
from loadtests.sandbox.cluster.controllers.base import PODS
from loadtests.sandbox.cluster.defaults import apply_defaults
from loadtests.sandbox.cluster.nodes import parse_nodes
from loadtests.sandbox.stack import SandboxStack, StackSettings
from tests.e2e.scaler.helpers import (
    DEPLOYMENTS,
    Reporter,
    apply,
    events,
    model,
    running_stack,
    status,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

COMPANION = "llama-mig-3g.40gb"
TICK_S = 1.0
PENDING_S = 10.0
NODES = parse_nodes(
    [
        {"name": "h100", "gpu": "H100-80GB", "gpus": 2, "zone": "us-east-1a"},
        {"name": "h100-mig", "gpu": "H100-80GB", "gpus": 4, "mig": {"3g.40gb": 1},
         "zone": "us-east-1a"},
    ]
)  # fmt: skip
SHAPES = {
    "placement.tidal.dev/shapes": f"h100,{SLICE}",
    f"placement.tidal.dev/shape-args.{SLICE}": "--max-model-len 32768",
    "placement.tidal.dev/pending-timeout": f"{PENDING_S:g}s",
}


def deploy(stack: SandboxStack, name: str) -> dict[str, Any]:
    assert DEPLOYMENTS is not None
    return stack.cluster.store.peek(DEPLOYMENTS, "default", name) or {}


def replicas(stack: SandboxStack, name: str) -> int:
    return int((deploy(stack, name).get("spec") or {}).get("replicas") or 0)


def ready(stack: SandboxStack, name: str) -> int:
    return int((deploy(stack, name).get("status") or {}).get("readyReplicas") or 0)


def shaped_model() -> tuple[Any, dict[str, Any]]:
    example, deployment = model(
        max_scale=6, target_concurrency=10, window_s=6.0, scale_down_delay_s=600.0,
        startup_delay_s=2.0, extra_annotations=dict(SHAPES),
    )  # fmt: skip
    pod = deployment["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"nvidia.com/gpu.product": H100}
    return example, deployment


def running_on(stack: SandboxStack, app: str) -> int:
    items, _ = stack.cluster.store.list(PODS, namespace="default")
    return sum(
        1
        for p in items
        if p["metadata"]["labels"].get("app") == app
        and p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
    )


def scaler_events(stack: SandboxStack, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in events(stack, "llama")
        if e["reason"] == reason and e.get("source", {}).get("component") == "tidal-scaler"
    ]


async def routed(stack: SandboxStack, model_name: str) -> None:
    """Until the activator lists the model (it has seen the Deployment): before it, a
    request is answered 404, which is the activator not knowing the model yet."""
    async with aiohttp.ClientSession() as session:

        async def listed() -> bool:
            async with session.get(f"{stack.addresses.activator_url}/v1/models") as resp:
                body = await resp.json()
            return any(m.get("id") == model_name for m in body.get("data") or ())

        deadline = time.monotonic() + 20
        while not await listed():
            assert time.monotonic() < deadline, "the activator never listed the model"
            await asyncio.sleep(0.2)


class Client:
    """Completions through the activator, one every 0.3 s, each answer's status kept."""

    def __init__(self, url: str, model_name: str) -> None:
        self.url = url
        self.model = model_name
        self.statuses: list[int | str] = []
        self._task: asyncio.Task[None] | None = None

    async def _one(self, session: aiohttp.ClientSession) -> None:
        body = {"model": self.model, "prompt": "hello " * 20, "max_tokens": 8}
        try:
            async with session.post(self.url, json=body) as resp:
                await resp.read()
                self.statuses.append(resp.status)
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.statuses.append(type(exc).__name__)

    async def _run(self) -> None:
        pending: set[asyncio.Task[None]] = set()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
            try:
                while True:
                    task = asyncio.create_task(self._one(session))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                    await asyncio.sleep(0.3)
            finally:
                await asyncio.gather(*pending, return_exceptions=True)

    async def __aenter__(self) -> Client:
        self._task = asyncio.create_task(self._run(), name="e2e-shapes-client")
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def test_cheap_shape_then_cover_then_back(tmp_path: Path) -> None:
    settings = StackSettings(
        example=None, nodes=NODES, scaler_args=("--tick-interval-s", str(TICK_S))
    )
    async with running_stack(tmp_path / "stack", settings) as stack:
        assert DEPLOYMENTS is not None
        stack.cluster.store.create(CONFIGMAPS, shape_table())
        example, deployment = shaped_model()
        apply(stack, example, deployment)
        url = f"{stack.addresses.activator_url}/v1/completions"
        await routed(stack, example.model)
        async with (
            Reporter([stack.addresses.scaler_url], stack.token, example.target) as reporter,
            Client(url, example.model) as client,
        ):
            # 1. Eight in flight: two slices, no H100.
            reporter.concurrency = 8.0
            await wait_until(
                lambda: ready(stack, COMPANION) == 2 and replicas(stack, "llama") == 0,
                timeout_s=60,
                what="two slices Ready and no H100",
            )
            doc = status(stack, "llama")
            assert doc is not None and doc["shapes"] == {SLICE: 2}, doc
            assert doc["costPerHour"] == 10.54

            # 2. Another tenant takes the two free slices; twelve in flight want a third.
            other = blocker(2)
            apply_defaults(other, "Deployment", creating=True)
            stack.cluster.store.create(DEPLOYMENTS, other)
            await wait_until(lambda: running_on(stack, "other") == 2, timeout_s=20,
                             what="the other tenant on the slices")  # fmt: skip
            reporter.concurrency = 12.0
            await wait_until(lambda: replicas(stack, COMPANION) == 3, timeout_s=30,
                             what="a third slice asked for")  # fmt: skip
            asked = time.monotonic()
            took = await wait_until(
                lambda: replicas(stack, "llama") >= 1, timeout_s=40, what="an H100 covering"
            )
            assert took <= PENDING_S + 3 * TICK_S, f"cover after {took:.1f}s"
            assert time.monotonic() - asked >= PENDING_S - 1, "covered before the timeout"
            await wait_until(lambda: bool(scaler_events(stack, "ShapeUnavailable")), timeout_s=5,
                             what="the ShapeUnavailable Event, after the scale")  # fmt: skip
            unavailable = scaler_events(stack, "ShapeUnavailable")
            assert unavailable[0]["type"] == "Warning"
            assert (
                f"{SLICE}: 1 replica Pending past the pending-timeout"
                in (unavailable[0]["message"])
            )
            await wait_until(lambda: ready(stack, "llama") == 1, timeout_s=30,
                             what="the H100 Ready")  # fmt: skip
            assert replicas(stack, COMPANION) == 2  # capped at what it has

            # 3. The other tenant leaves: back to three slices, and the H100 goes.
            stack.cluster.store.delete(DEPLOYMENTS, "default", "other")
            await wait_until(
                lambda: ready(stack, COMPANION) == 3 and replicas(stack, "llama") == 0,
                timeout_s=60,
                what="three slices and no H100 again",
            )
            await wait_until(lambda: bool(scaler_events(stack, "ShapeRecovered")), timeout_s=5,
                             what="the ShapeRecovered Event")  # fmt: skip

            # 4. A bad declaration: one Warning naming the keys; scaling goes on.
            obj = deploy(stack, "llama")
            annotations = dict(obj["metadata"]["annotations"])
            annotations["placement.tidal.dev/shapes"] = f"h100,{SLICE},l4"
            annotations["placement.tidal.dev/shape-env.a100"] = "X=1"
            stack.cluster.store.update(
                DEPLOYMENTS, {**obj, "metadata": {**obj["metadata"], "annotations": annotations}}
            )
            await wait_until(lambda: bool(scaler_events(stack, "InvalidAnnotation")),
                             timeout_s=20, what="the InvalidAnnotation Event")  # fmt: skip
            message = scaler_events(stack, "InvalidAnnotation")[0]["message"]
            assert "placement.tidal.dev/shapes" in message and "l4 is not one" in message
            assert "h100, mig-3g.40gb" in message  # the table's shapes: what is allowed
            assert "placement.tidal.dev/shape-env.a100" in message
            reporter.concurrency = 16.0  # four slices ($21.08) against two H100s ($24.58)
            await wait_until(lambda: replicas(stack, COMPANION) == 4, timeout_s=30,
                             what="still scaling on the shapes declared well")  # fmt: skip
            await client.stop()
        assert client.statuses, "no completion was sent"
        failed = [s for s in client.statuses if s != 200]
        assert not failed, f"{len(failed)} of {len(client.statuses)} failed: {failed[:5]}"
