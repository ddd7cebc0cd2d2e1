"""Two ``tidal scaler`` processes on one cluster: one writer, and failover on SIGKILL.

Covers:
- both replicas take reports (a synthetic activator posts to both) and both
  decide, but only the Lease holder writes: every write to the Deployment, its
  pods and its Events in the API server's audit log comes from the holder's
  kubeconfig user, and ``GET /v1/targets`` shows the follower's decision;
- when the leader is SIGKILLed, the other takes the Lease within the lease
  duration plus one retry period (short lease settings through the
  environment) and then scales on its warm windows at once.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadtests.sandbox.stack import SandboxStack, StackSettings
from tests.e2e.scaler.helpers import Reporter, apply, lease_holder, model, running_stack, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LEASE_S, RENEW_S, RETRY_S = 4.0, 3.0, 1.0
LEASE_ENV = {
    "TIDAL_SCALER_LEADER__LEASE_DURATION_S": str(LEASE_S),
    "TIDAL_SCALER_LEADER__RENEW_DEADLINE_S": str(RENEW_S),
    "TIDAL_SCALER_LEADER__RETRY_PERIOD_S": str(RETRY_S),
}
USERS = {"scaler-0": "tidal-scaler-0", "scaler-1": "tidal-scaler-1"}


def _writes_to_model(stack: SandboxStack, since: float = 0.0) -> list[tuple[float, str, str]]:
    """(time, user, path) of every write by a scaler but the Lease's: scale, status, Events."""
    api = stack.cluster.api
    assert api is not None
    return [
        (r.at, r.user, f"{r.method} {r.path}")
        for r in api.audit
        if r.at >= since
        and r.user.startswith("tidal-scaler-")
        and "/leases/" not in r.path
        and not r.path.endswith("/leases")
    ]


async def test_one_writer_and_failover_within_lease_plus_retry(tmp_path: Path) -> None:
    example, deployment = model(
        replicas=1,
        processes=False,
        min_scale=1,
        max_scale=6,
        target_concurrency=8,
        window_s=6.0,
        scale_down_delay_s=0.0,
    )
    settings = StackSettings(
        example=None,
        activator=False,
        scaler_env=LEASE_ENV,
        scaler_args=("--tick-interval-s", "1"),
    )
    async with running_stack(tmp_path, settings) as stack:
        apply(stack, example, deployment)
        await stack.add_scaler()
        await wait_until(
            lambda: lease_holder(stack) in USERS, timeout_s=10, what="a scaler holds the Lease"
        )
        leader = lease_holder(stack)
        assert leader is not None
        follower = "scaler-1" if leader == "scaler-0" else "scaler-0"
        urls = [stack.addresses.scaler_url_of(0), stack.addresses.scaler_url_of(1)]
        async with Reporter(urls, stack.token, example.target) as reporter:
            reporter.concurrency = 24.0  # 8 per replica -> 3
            await wait_until(
                lambda: stack.deployment_state(example.name)[0] == 3,
                timeout_s=15,
                what="the leader scaled to 3",
            )
            # Both decided; only the leader wrote.
            follower_url = urls[int(follower[-1])]
            views: list[dict[str, Any]] = []
            async with aiohttp.ClientSession() as session:

                async def follower_view() -> dict[str, Any]:
                    async with session.get(f"{follower_url}/v1/targets") as resp:
                        body: dict[str, Any] = await resp.json()
                        return body

                for _ in range(50):
                    views.append(await follower_view())
                    if [t["desired"] for t in views[-1]["targets"]] == [3]:
                        break
                    await asyncio.sleep(0.1)
            assert views[-1]["leader"] is False
            assert [t["desired"] for t in views[-1]["targets"]] == [3]
            writes = _writes_to_model(stack)
            assert writes, "the leader wrote nothing"
            assert {user for _, user, _ in writes} == {USERS[leader]}
            assert any("/scale" in path for _, _, path in writes)
            assert any("/events" in path for _, _, path in writes)

            # SIGKILL the leader: no release of the Lease, it must expire.
            loop = asyncio.get_running_loop()
            killed = stack.scalers[int(leader[-1])]
            killed.signal(signal.SIGKILL)
            killed_at = loop.time()
            reporter.concurrency = 40.0  # -> 5
            took = await wait_until(
                lambda: lease_holder(stack) == follower,
                timeout_s=LEASE_S + RETRY_S + 10,
                what="the follower took the Lease",
                every_s=0.05,
            )
            # lease duration + one retry period, plus what one poll and a busy
            # two-core machine add.
            assert took <= LEASE_S + RETRY_S + 1.0, f"failover took {took:.2f}s"
            acted = await wait_until(
                lambda: stack.deployment_state(example.name)[0] == 5,
                timeout_s=10,
                what="the new leader scaled to 5",
            )
            after = _writes_to_model(stack, since=killed_at)
            assert {user for _, user, _ in after} == {USERS[follower]}
            print(f"failover: Lease taken {took:.2f}s after SIGKILL, scaled {acted:.2f}s later")
