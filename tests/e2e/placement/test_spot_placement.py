"""Spot and on-demand placement end to end: real ``tidal scaler`` on the emulated cluster.

Covers issue 11's "Done when" in the sandbox:
- load to four replicas with a baseline of one gives one on-demand replica
  (the user's Deployment, pinned to on-demand nodes, Event OnDemandPinned)
  and three spot replicas (the companion ``llama-spot``) spread over zones;
  the status annotation carries the split;
- a preemption with a 10 s notice of a spot node brings on-demand cover in
  the decision the notice triggers (well within one tick), with a
  SpotFallback Event; when the replacement spot replica is Ready, and only
  then, on-demand goes back to the baseline (SpotRecovered);
- changing the user's pod template rolls the companion;
- going back to ``on-demand`` deletes the companion and takes the pin off;
  deleting the user's Deployment removes both;
- a full spot pool (the cloud gives out no spot GPU) leaves spot Pending and
  on-demand takes the load after ``pending-timeout``; spot coming back
  returns on-demand to the baseline;
- under continuous streaming load through the activator, a preemption with
  a 10 s notice fails no request, and once the noticed replica's streams
  in flight are done it gets no new request before its eviction.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadtests.sandbox.cluster.controllers.base import NODES, PODS
from loadtests.sandbox.stack import SandboxStack, StackSettings
from tests.e2e.scaler.helpers import (
    DEPLOYMENTS,
    Reporter,
    apply,
    model,
    reasons,
    running_stack,
    status,
    wait_until,
)

pytestmark = [pytest.mark.e2e]

SPOT = {
    "placement.tidal.dev/policy": "spot-with-on-demand-baseline",
    "placement.tidal.dev/on-demand-baseline": "1",
    "placement.tidal.dev/pending-timeout": "10s",
}
TICK_S = 1.0
SETTINGS: dict[str, Any] = {
    "scaler_args": ("--tick-interval-s", str(TICK_S)),
    "scaler_env": {"TIDAL_SCALER_PLACEMENT__RELEASE_HOLD_S": "2"},
}


def deploy(stack: SandboxStack, name: str) -> dict[str, Any]:
    assert DEPLOYMENTS is not None
    return stack.cluster.store.peek(DEPLOYMENTS, "default", name) or {}


def replicas(stack: SandboxStack, name: str) -> int | None:
    got = deploy(stack, name)
    return got["spec"].get("replicas") if got else None


def ready(stack: SandboxStack, name: str) -> int:
    return int((deploy(stack, name).get("status") or {}).get("readyReplicas") or 0)


def pods_of(stack: SandboxStack, spot: bool) -> list[dict[str, Any]]:
    items, _ = stack.cluster.store.list(PODS, namespace="default")
    return [
        p
        for p in items
        if p["metadata"]["labels"].get("app") == "llama"
        and (p["metadata"]["labels"].get("placement.tidal.dev/capacity-type") == "spot") is spot
        and not p["metadata"].get("deletionTimestamp")
    ]


def ready_spot_pods(stack: SandboxStack) -> list[dict[str, Any]]:
    """Spot pods that are Ready and not going away (not on a node under notice)."""
    out = []
    for pod in pods_of(stack, spot=True):
        node = stack.cluster.store.peek(NODES, "", pod["spec"].get("nodeName") or "") or {}
        noticed = any(
            t.get("key") == "karpenter.sh/disrupted"
            for t in node.get("spec", {}).get("taints") or ()
        )
        conditions = pod.get("status", {}).get("conditions") or ()
        if not noticed and any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
        ):
            out.append(pod)
    return out


def node_labels(stack: SandboxStack, node: str) -> dict[str, str]:
    got = stack.cluster.store.peek(NODES, "", node) or {}
    return dict(got.get("metadata", {}).get("labels") or {})


def patch_annotations(stack: SandboxStack, name: str, annotations: dict[str, str | None]) -> None:
    assert DEPLOYMENTS is not None
    obj = deploy(stack, name)
    current = dict(obj["metadata"].get("annotations") or {})
    for key, value in annotations.items():
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value
    stack.cluster.store.update(
        DEPLOYMENTS, {**obj, "metadata": {**obj["metadata"], "annotations": current}}
    )


def spot_model(**knobs: Any) -> tuple[Any, dict[str, Any]]:
    example, deployment = model(
        processes=False, max_scale=4, target_concurrency=10, window_s=6.0,
        scale_down_delay_s=600.0, extra_annotations=dict(SPOT), **knobs,
    )  # fmt: skip
    pod_annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    pod_annotations["sandbox.tidal.dev/startup-delay"] = "3s"
    return example, deployment


async def test_pair_notice_recovery_template_and_cleanup(tmp_path: Path) -> None:
    example, deployment = spot_model()
    async with running_stack(
        tmp_path / "stack", StackSettings(example=None, activator=False, **SETTINGS)
    ) as stack:
        apply(stack, example, deployment)
        async with Reporter([stack.addresses.scaler_url], stack.token, example.target) as reporter:
            reporter.concurrency = 40.0  # four replicas of 10
            await wait_until(
                lambda: (
                    replicas(stack, "llama") == 1
                    and replicas(stack, "llama-spot") == 3
                    and ready(stack, "llama-spot") == 3
                    and ready(stack, "llama") == 1
                ),
                timeout_s=60,
                what="one on-demand and three spot replicas ready",
            )
            user = deploy(stack, "llama")
            assert user["spec"]["template"]["spec"]["nodeSelector"] == {
                "karpenter.sh/capacity-type": "on-demand"
            }
            assert reasons(stack, "llama").count("OnDemandPinned") == 1  # one rollout
            doc = status(stack, "llama")
            assert doc is not None and (doc["onDemand"], doc["spot"]) == (1, 3)
            spot_pods = pods_of(stack, spot=True)
            assert {node_labels(stack, p["spec"]["nodeName"])["karpenter.sh/capacity-type"]
                    for p in spot_pods} == {"spot"}  # fmt: skip
            zones = Counter(
                node_labels(stack, p["spec"]["nodeName"])["topology.kubernetes.io/zone"]
                for p in spot_pods
            )
            assert len(zones) == 2, zones  # spread over both zones
            for p in pods_of(stack, spot=False):
                assert (
                    node_labels(stack, p["spec"]["nodeName"])["karpenter.sh/capacity-type"]
                    == "on-demand"
                )

            # Preempt a spot node: cover comes with the notice, not a tick later.
            node = spot_pods[0]["spec"]["nodeName"]
            assert stack.cluster.plane is not None
            preempt = asyncio.create_task(stack.cluster.plane.nodes.preempt(node, notice_s=10))
            try:
                await wait_until(
                    lambda: (
                        (stack.cluster.store.peek(NODES, "", node) or {})
                        .get("spec", {})
                        .get("unschedulable", False)
                    ),
                    timeout_s=5,
                    what="the notice",
                )
                took = await wait_until(
                    lambda: (replicas(stack, "llama") or 0) >= 2,
                    timeout_s=10,
                    what="on-demand cover",
                    every_s=0.05,
                )
                assert took <= TICK_S + 0.5, f"cover took {took:.2f}s, a tick is {TICK_S}s"
                await wait_until(
                    lambda: "SpotFallback" in reasons(stack, "llama"),
                    timeout_s=5,
                    what="the SpotFallback Event (written after the scale)",
                )
                # Released only once the replacement spot replica is Ready.
                seen_spot_ready: list[int] = []

                def released() -> bool:
                    if replicas(stack, "llama") == 1:
                        seen_spot_ready.append(len(ready_spot_pods(stack)))
                        return True
                    return False

                await wait_until(released, timeout_s=60, what="back to the baseline")
                assert seen_spot_ready == [3]  # the replacement was Ready first
                await wait_until(
                    lambda: "SpotRecovered" in reasons(stack, "llama"),
                    timeout_s=5,
                    what="the SpotRecovered Event",
                )
            finally:
                await preempt

            # The user changes the template: the companion rolls.
            assert DEPLOYMENTS is not None
            obj = copy.deepcopy(deploy(stack, "llama"))  # peek gives the stored object
            template = obj["spec"]["template"]
            container = template["spec"]["containers"][0]
            container["env"] = [*(container.get("env") or []), {"name": "ROLL", "value": "1"}]
            stack.cluster.store.update(DEPLOYMENTS, obj)
            await wait_until(
                lambda: any(
                    e.get("name") == "ROLL"
                    for e in deploy(stack, "llama-spot")["spec"]["template"]["spec"]["containers"][
                        0
                    ].get("env")
                    or ()
                ),
                timeout_s=20,
                what="the companion follows the template",
            )

            # Back to on-demand: the companion goes and the pin comes off.
            patch_annotations(stack, "llama", {"placement.tidal.dev/policy": "on-demand"})
            await wait_until(
                lambda: (
                    replicas(stack, "llama-spot") is None
                    and replicas(stack, "llama") == 4
                    and "nodeSelector" not in deploy(stack, "llama")["spec"]["template"]["spec"]
                ),
                timeout_s=30,
                what="companion deleted, pin removed, everything on demand",
            )

            # Spot again, then the user deletes the Deployment: both go.
            patch_annotations(stack, "llama", {"placement.tidal.dev/policy": "spot"})
            await wait_until(
                lambda: replicas(stack, "llama-spot") is not None,
                timeout_s=30,
                what="the companion again",
            )
            stack.cluster.store.delete(DEPLOYMENTS, "default", "llama")
            await wait_until(
                lambda: replicas(stack, "llama-spot") is None and replicas(stack, "llama") is None,
                timeout_s=30,
                what="both Deployments gone",
            )


async def test_full_spot_pool_then_spot_returns(tmp_path: Path) -> None:
    example, deployment = spot_model()
    async with running_stack(
        tmp_path / "stack", StackSettings(example=None, activator=False, **SETTINGS)
    ) as stack:
        assert stack.cluster.plane is not None
        stack.cluster.plane.scheduler.set_spot_capacity(0)
        apply(stack, example, deployment)
        async with Reporter([stack.addresses.scaler_url], stack.token, example.target) as reporter:
            reporter.concurrency = 40.0
            await wait_until(
                lambda: replicas(stack, "llama-spot") == 3 and replicas(stack, "llama") == 1,
                timeout_s=30,
                what="the split asked for",
            )
            await wait_until(
                lambda: replicas(stack, "llama") == 4,
                timeout_s=40,
                what="on-demand takes the load",
                every_s=0.05,
            )
            covered_at = time.time()
            created = min(
                datetime.fromisoformat(p["metadata"]["creationTimestamp"]).timestamp()
                for p in pods_of(stack, spot=True)
            )
            # Not before the 10 s pending-timeout (timestamps have 1 s resolution).
            assert covered_at - created >= 9.0, covered_at - created
            assert all(not p["spec"].get("nodeName") for p in pods_of(stack, spot=True))
            await wait_until(
                lambda: "SpotFallback" in reasons(stack, "llama"),
                timeout_s=5,
                what="the SpotFallback Event (written after the scale)",
            )
            stack.cluster.plane.scheduler.set_spot_capacity(None)
            await wait_until(
                lambda: replicas(stack, "llama") == 1 and ready(stack, "llama-spot") == 3,
                timeout_s=60,
                what="spot back, on-demand at the baseline",
            )


async def _stream_forever(url: str, model_name: str, results: Counter[str]) -> None:
    body = {"model": model_name, "prompt": "hello", "max_tokens": 16, "stream": True}
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            try:
                async with session.post(f"{url}/v1/completions", json=body) as resp:
                    text = await resp.text()
                    ok = resp.status == 200 and "[DONE]" in text
                    results["ok" if ok else f"status {resp.status}"] += 1
            except (aiohttp.ClientError, TimeoutError) as exc:
                results[type(exc).__name__] += 1
            await asyncio.sleep(0.05)


async def _vllm_successes(ip: str) -> float:
    """The fake vLLM's own count of finished requests (its port is the example's 8000)."""
    timeout = aiohttp.ClientTimeout(total=5)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(f"http://{ip}:8000/metrics") as resp,
    ):
        text = await resp.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total")
    )


async def test_preemption_under_streaming_load_fails_nothing(tmp_path: Path) -> None:
    example, deployment = model(
        processes=True, max_scale=4, min_scale=4, target_concurrency=100, window_s=6.0,
        startup_delay_s=2.0, speedup=20.0, extra_annotations=dict(SPOT),
    )  # fmt: skip
    async with running_stack(tmp_path / "stack", StackSettings(example=None, **SETTINGS)) as stack:
        apply(stack, example, deployment)
        await wait_until(
            lambda: ready(stack, "llama") == 1 and ready(stack, "llama-spot") == 3,
            timeout_s=90,
            what="one on-demand and three spot replicas ready",
        )
        results: Counter[str] = Counter()
        workers = [
            asyncio.create_task(
                _stream_forever(stack.addresses.activator_url, example.model, results)
            )
            for _ in range(8)
        ]
        try:
            await asyncio.sleep(3)
            noticed = pods_of(stack, spot=True)[0]
            node, ip = noticed["spec"]["nodeName"], noticed["status"]["podIP"]
            assert stack.cluster.plane is not None
            preempt = asyncio.create_task(stack.cluster.plane.nodes.preempt(node, notice_s=10))
            try:
                # Under notice, the activator sends the replica nothing new:
                # once its streams in flight are done, its count of requests
                # stays put until the eviction (the notice is 10 s).
                await wait_until(
                    lambda: bool(
                        (stack.cluster.store.peek(NODES, "", node) or {})
                        .get("spec", {})
                        .get("taints")
                    ),
                    timeout_s=5,
                    what="the notice taint",
                )
                await asyncio.sleep(1.0)  # the activator's watch, and 16-token streams, end
                finished = await _vllm_successes(ip)
                await asyncio.sleep(4.0)
                assert await _vllm_successes(ip) == finished, (
                    "a new request reached a replica under interruption notice"
                )
            finally:
                await preempt
            await wait_until(
                lambda: ready(stack, "llama-spot") == 3,
                timeout_s=60,
                what="the replacement spot replica",
            )
            await asyncio.sleep(3)
        finally:
            for w in workers:
                w.cancel()
            for w in workers:
                with contextlib.suppress(asyncio.CancelledError):
                    await w
        assert results["ok"] > 50, results
        assert set(results) == {"ok"}, json.dumps(results)
