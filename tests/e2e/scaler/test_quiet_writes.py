"""No false alarms: a wake, a scale-out and a scale-in fail no write and emit each Event once.

Real ``tidal scaler`` on the emulated cluster (whose Deployment controller
updates a Deployment's status right after every scale, as the real one
does), with and without spot placement:
- a wake from zero (``POST /v1/activate``), a scale-out, a scale-in and a
  scale to zero (demand from a synthetic activator) each leave
  ``tidal_scaler_write_failures_total`` at zero and log no ``write failed``;
- each change is one Event, never two of one reason at one instant;
- the status annotation records each change (the wake as ``Activated``,
  the last as ``ScaledToZero`` with ``desired: 0``).
Pods run no process and are ready at once, so the whole test takes seconds.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

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

pytestmark = [pytest.mark.e2e]

SPOT = {
    "placement.tidal.dev/policy": "spot-with-on-demand-baseline",
    "placement.tidal.dev/on-demand-baseline": "1",
}
_FAILURES = re.compile(r"^tidal_scaler_write_failures_total\{[^}]*\} ([0-9.e+]+)$", re.M)


async def write_failures(stack: SandboxStack) -> float:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{stack.addresses.scaler_url}/metrics") as resp,
    ):
        text = await resp.text()
    return sum(float(v) for v in _FAILURES.findall(text))


def total(stack: SandboxStack, name: str) -> int:
    """The pair's replicas: the Deployment and its ``-spot`` companion, if any."""
    assert DEPLOYMENTS is not None
    count = 0
    for n in (name, f"{name}-spot"):
        obj = stack.cluster.store.peek(DEPLOYMENTS, "default", n)
        if obj is not None:
            count += int(obj["spec"].get("replicas") or 0)
    return count


def scale_events(stack: SandboxStack, name: str) -> list[dict[str, Any]]:
    wanted = {"Activated", "ScaledUp", "ScaledDown", "ScaledToZero", "SpotRecovered"}
    return [
        e
        for e in events(stack, name)
        if e.get("source", {}).get("component") == "tidal-scaler" and e["reason"] in wanted
    ]


@pytest.mark.parametrize("spot", [False, True], ids=["on-demand", "spot"])
async def test_wake_scale_out_scale_in_write_no_failure_and_one_event_each(
    tmp_path: Path, spot: bool
) -> None:
    example, deployment = model(
        processes=False,
        max_scale=3,
        target_concurrency=10,
        window_s=6.0,
        scale_down_delay_s=0.0,
        grace_s=1.0,
        extra_annotations=dict(SPOT) if spot else {},
    )
    settings = StackSettings(
        example=None, activator=False, scaler_args=("--tick-interval-s", "0.5")
    )
    async with running_stack(tmp_path / "stack", settings) as stack:
        apply(stack, example, deployment)
        headers = {"Authorization": f"Bearer {stack.token}"}
        async with Reporter([stack.addresses.scaler_url], stack.token, example.target) as reporter:
            reporter.concurrency = 1.0
            async with aiohttp.ClientSession(headers=headers) as session:
                for _ in range(50):  # until the scaler's watch has the Deployment
                    async with session.post(
                        f"{stack.addresses.scaler_url}/v1/activate",
                        json={"activator": "e2e", "target": example.target},
                    ) as resp:
                        if resp.status == 202:
                            break
                    await asyncio.sleep(0.1)
            await wait_until(
                lambda: total(stack, example.name) == 1, timeout_s=10, what="woken to 1"
            )
            await wait_until(
                lambda: (status(stack, example.name) or {}).get("reason") == "Activated",
                timeout_s=5,
                what="status records the wake",
            )
            woke = status(stack, example.name)
            assert woke is not None and woke["desired"] >= 1, woke
            reporter.concurrency = 30.0
            await wait_until(
                lambda: total(stack, example.name) == 3, timeout_s=15, what="scaled out to 3"
            )
            reporter.concurrency = 10.0
            await wait_until(
                lambda: total(stack, example.name) == 1, timeout_s=20, what="scaled in to 1"
            )
            reporter.concurrency = 0.0
            await wait_until(
                lambda: total(stack, example.name) == 0, timeout_s=20, what="scaled to zero"
            )
            await wait_until(
                lambda: (status(stack, example.name) or {}).get("desired") == 0,
                timeout_s=5,
                what="status records the scale to zero",
            )
            assert (status(stack, example.name) or {}).get("reason") == "ScaledToZero"
        got = [(e["reason"], e["message"]) for e in scale_events(stack, example.name)]
        reasons = [r for r, _ in got]
        assert reasons[0] == "Activated", got
        assert "ScaledUp" in reasons and "ScaledDown" in reasons, got
        # A change is announced once: two Events with one message are one change twice.
        assert all(n == 1 for n in Counter(got).values()), got
        assert reasons.count("Activated") == 1 and reasons[-1] == "ScaledToZero", got
        assert "SpotRecovered" not in reasons, got  # spot never failed: nothing recovered
        assert await write_failures(stack) == 0
        assert stack.scaler is not None
        assert "write failed" not in stack.scaler.log.read_text(errors="replace")
