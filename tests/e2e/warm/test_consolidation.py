"""Sleepers consolidated, through the real processes: a GPU of sleepers alone is emptied
onto a serving one, and a wake there still answers within the objective.

Sandbox cluster, ``tidal scaler`` (with GPU metrics: the DCGM-like exporter
through Prometheus) and ``tidal activator``, fake vLLM servers with sleep
mode, two single-GPU nodes, each GPU time-sliced four ways and fitting two
models awake. ``busy`` serves on the first node (its sleep-after is long);
``quiet`` starts on the second (the scheduler spreads), goes idle and
sleeps, which leaves the second GPU holding a sleeper alone. The scaler
moves it as a cluster moves a pod: ``quiet``'s template comes to prefer the
first node (a ``Moved`` Event), the rollout starts a replacement there and
removes the old pod, the second GPU is given back, and the replacement,
idle, sleeps. A request for ``quiet`` is then a wake beside ``busy``: about
the modelled wake time, far below a cold start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadtests.sandbox.cluster.controllers.base import PODS
from loadtests.sandbox.cluster.nodes import NodeSpec
from loadtests.sandbox.stack import SandboxStack, StackSettings
from tests.e2e.scaler.helpers import apply, events, running_stack, wait_until
from tests.e2e.warm.test_warm_tier import (
    COLD_START_S,
    HANDOFF,
    PROMETHEUS,
    WAKE_S,
    complete,
    slept,
    warm_model,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None, reason="no prometheus binary (scripts/ensure-debian-packages)"
    ),
]

# Two awake (24 600 MiB each) and a few asleep (600 each) fit.
GPU_MIB = 51_000
OBJECTIVE_S = 2.0


def nodes_of(stack: SandboxStack, app: str) -> list[str]:
    """The nodes ``app``'s pods are bound to (not yet bound: '')."""
    pods, _ = stack.cluster.store.list(PODS, namespace="default", copy=False)
    return sorted(
        p.get("spec", {}).get("nodeName", "")
        for p in pods
        if (p["metadata"].get("labels") or {}).get("app") == app
        and not p["metadata"].get("deletionTimestamp")
    )


def moved(stack: SandboxStack, name: str) -> list[dict[str, Any]]:
    return [e for e in events(stack, name) if e["reason"] == "Moved"]


@pytest.mark.timeout(240)
async def test_a_gpu_of_sleepers_alone_is_emptied_and_the_wake_still_answers_in_time(
    tmp_path: Path,
) -> None:
    nodes = tuple(
        NodeSpec(name, "on-demand", "us-east-1a", gpus=1, gpu_replicas=4, gpu_memory_mib=GPU_MIB)
        for name in ("gpu-a", "gpu-b")
    )
    busy = warm_model("busy", "busy-8b", sleep_after="9m", replicas=1)
    quiet = warm_model("quiet", "quiet-8b", sleep_after="3s", replicas=1)
    settings = StackSettings(
        example=None,
        nodes=nodes,
        scaler_args=("--tick-interval-s", "1"),
        scaler_env={**HANDOFF, "TIDAL_SCALER_WARM_MOVE_SETTLE_S": "3"},
        prometheus=PROMETHEUS,
    )
    async with running_stack(tmp_path, settings) as stack:
        apply(stack, *busy)
        await wait_until(
            lambda: stack.deployment_state("busy")[1] == 1, timeout_s=60, what="busy ready"
        )
        apply(stack, *quiet)
        await wait_until(lambda: slept(stack, "quiet"), timeout_s=60, what="quiet asleep")
        (serving,) = nodes_of(stack, "busy")
        (lonely,) = nodes_of(stack, "quiet")
        assert serving != lonely  # the scheduler spread them: a GPU of one sleeper
        # The move: quiet's template prefers busy's node, a replacement starts
        # there, the old pod goes, and the replacement sleeps once idle.
        await wait_until(lambda: moved(stack, "quiet"), timeout_s=90, what="a Moved Event")
        await wait_until(
            lambda: nodes_of(stack, "quiet") == [serving] and len(slept(stack, "quiet")) >= 2,
            timeout_s=60,
            what="quiet moved beside busy and asleep again",
        )
        assert nodes_of(stack, "busy") == [serving]
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            status, took = await complete(session, stack.addresses.activator_url, quiet[0].model)
        assert status == 200
        # A wake beside the serving model (room to wake is there), not a cold start:
        # within the objective, with the wake's own time as the floor.
        assert WAKE_S * 0.8 <= took < OBJECTIVE_S < COLD_START_S, took
        assert any(e["reason"] == "Woke" for e in events(stack, "quiet"))
        assert stack.deployment_state("quiet")[0] == 1
