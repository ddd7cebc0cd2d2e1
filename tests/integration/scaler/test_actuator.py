"""The actuator's writes over real HTTP, against the small fake Kubernetes API.

Covers:
- a scale-down plan: deletion costs on the pods first, then ``/scale`` with
  the decision's resourceVersion, then a ``ScaledDown`` Event and the status
  annotation, in that order, the status written although the Deployment
  controller moved the resourceVersion on right after the scale (as the real
  one does; the status tests ``spec.replicas`` instead); the outcome carries
  the status written;
- a plan for a rejected config writes one Warning Event and nothing else;
- a decision that keeps the scale writes only the status, keeping the
  previous reason and time; :func:`plan_writes` plans nothing when neither
  would change;
- fencing: the Lease is checked before each write, and a replica that lost
  it between two writes stops there;
- half-changed Deployments (issue 13): deletion costs set, then the scale
  fails (409, 422, 500) -> the costs are put back as they were; after a 409
  the scale is re-read for the caller, never re-applied; a status write that
  fails after a successful scale is kept as intended, and the next write
  records that change's reason and time, not the old ones;
- failures other than conflicts back off per target (doubling), an
  activation is not held back, and a ``WritesFailing`` Warning comes after
  three failures in a row, once;
- with the API server down, the outcome says not ok, the previous status is
  kept, and the failure is counted.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import pytest
import pytest_asyncio
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from groundwork.kube.connection import KubeAccess
from scaler.actuator import Actuator, kube_actuator
from scaler.kube.types import DeploymentInfo, PodInfo
from scaler.metrics import Metrics
from scaler.policy.api import Decision, Mode, Reason
from scaler.writes.plan import Decided, plan_writes
from scaler.writes.status_records import StatusRecord
from tests.integration.scaler.fake_kube_api import FakeKubeApi, start
from tests.unit.scaler.fakes import deployment, pod

STATUS = "autoscaling.tidal.dev/status"
COST = "controller.kubernetes.io/pod-deletion-cost"
KEY = "default/llama"


class CountdownLeader:
    """Holds the Lease for ``checks`` more checks (None: for ever)."""

    def __init__(self, checks: int | None = None) -> None:
        self.checks = checks
        self.identity = "scaler-0"

    @property
    def is_leader(self) -> bool:
        if self.checks is None:
            return True
        self.checks -= 1
        return self.checks >= 0


@dataclass
class Kube:
    fake: FakeKubeApi
    actuator: Actuator
    metrics: Metrics
    leader: CountdownLeader

    def deployment(self) -> DeploymentInfo:
        """The Deployment as a fresh watch would show it (its real resourceVersion)."""
        obj = self.fake.deployments[KEY]
        return replace(
            deployment(replicas=obj["spec"]["replicas"]),
            resource_version=obj["metadata"]["resourceVersion"],
        )

    def costs(self) -> dict[str, str | None]:
        return {
            name: self.fake.pods[f"default/{name}"]["metadata"].get("annotations", {}).get(COST)
            for name in ("p1", "p2", "p3")
        }

    def status(self) -> dict[str, object] | None:
        raw = self.fake.deployments[KEY]["metadata"]["annotations"].get(STATUS)
        return json.loads(raw) if raw else None


@pytest_asyncio.fixture
async def kube() -> AsyncIterator[Kube]:
    fake = FakeKubeApi()
    fake.add_deployment("default", "llama", replicas=3)
    for n in (1, 2, 3):
        fake.add_pod("default", f"p{n}", app="llama", ip=f"10.0.0.{n}")
    gen = start(fake)
    url = await gen.__anext__()
    api = client.ApiClient(client.Configuration(host=url))
    metrics = Metrics(CollectorRegistry())
    leader = CountdownLeader()
    actuator = kube_actuator(
        KubeAccess(api=api, namespace="default", source="test"),
        identity="scaler-0",
        leader=leader,
        metrics=metrics,
    )
    try:
        yield Kube(fake, actuator, metrics, leader)
    finally:
        await api.close()
        with contextlib.suppress(StopAsyncIteration):
            await gen.__anext__()


def _decision(desired: int, reason: Reason, mode: Mode = Mode.STABLE) -> Decision:
    return Decision(desired=desired, reason=reason, mode=mode, message="signals want it")


PODS = (pod("p1", ip="10.0.0.1"), pod("p2", ip="10.0.0.2", cost=7), pod("p3", ip="10.0.0.3"))
LOAD = {"p1": 3.0, "p2": 0.0, "p3": 1.0}


def _scale_down(k: Kube, pods: tuple[PodInfo, ...] = PODS) -> object:
    plan = plan_writes(
        k.deployment(), pods, Decided(_decision(2, Reason.SCALED_DOWN), pod_load=LOAD)
    )
    assert plan is not None
    return plan


async def test_scale_down_plan_in_order(kube: Kube) -> None:
    plan = plan_writes(
        kube.deployment(), PODS, Decided(_decision(2, Reason.SCALED_DOWN), pod_load=LOAD)
    )
    assert plan is not None
    assert plan.deletion_costs == {"p1": 3, "p2": 0, "p3": 1}
    assert plan.previous_costs == {"p1": None, "p2": 7, "p3": None}
    rv = kube.deployment().resource_version
    outcome = await kube.actuator.carry_out(plan, now=0.0)
    assert outcome.ok
    paths = [path for path, _, _ in kube.fake.patches]
    assert paths[:3] == [f"/api/v1/namespaces/default/pods/p{n}" for n in (1, 2, 3)]
    assert paths[3].endswith("/deployments/llama/scale")
    assert kube.fake.patches[3][2]["metadata"]["resourceVersion"] == rv
    assert paths[4].endswith("/deployments/llama")
    assert kube.fake.deployments[KEY]["spec"]["replicas"] == 2
    assert kube.costs() == {"p1": "3", "p2": "0", "p3": "1"}
    [event] = kube.fake.events
    assert (event["reason"], event["type"]) == ("ScaledDown", "Normal")
    assert event["message"] == "scaled from 3 to 2: signals want it"
    assert kube.status() == outcome.record.status
    assert outcome.record.status is not None
    assert outcome.record.status["reason"] == "ScaledDown"
    assert outcome.record.last_change_wall == outcome.record.status["lastChangeTime"]
    assert outcome.record.intended is None


async def test_problem_plan_writes_one_warning(kube: Kube) -> None:
    plan = plan_writes(
        kube.deployment(),
        (),
        Decided(
            None, problem='autoscaling.tidal.dev/max-scale: "0" is not allowed; allowed: 1..1000'
        ),
    )
    assert plan is not None
    outcome = await kube.actuator.carry_out(plan, now=0.0)
    assert outcome.record.problem_reported
    [event] = kube.fake.events
    assert (event["reason"], event["type"]) == ("InvalidAnnotation", "Warning")
    assert kube.fake.patches == []
    again = plan_writes(
        kube.deployment(),
        (),
        Decided(None, problem="same problem"),
        StatusRecord(problem_reported=True),
    )
    assert again is None


PREVIOUS = {
    "desired": 3,
    "mode": "stable",
    "onDemand": 3,
    "spot": 0,
    "reason": "ScaledUp",
    "lastChangeTime": "then",
}


async def test_unchanged_scale_writes_status_only(kube: Kube) -> None:
    same = plan_writes(
        kube.deployment(), (), Decided(_decision(3, Reason.STEADY)), StatusRecord(status=PREVIOUS)
    )
    assert same is None
    plan = plan_writes(
        kube.deployment(),
        (),
        Decided(_decision(3, Reason.STEADY, Mode.PANIC)),
        StatusRecord(status=PREVIOUS),
    )
    assert plan is not None
    outcome = await kube.actuator.carry_out(plan, now=0.0)
    assert outcome.record.status == dict(PREVIOUS, mode="panic")
    assert [p for p, _, _ in kube.fake.patches] == [
        "/apis/apps/v1/namespaces/default/deployments/llama"
    ]
    assert kube.fake.events == []


async def test_lease_lost_between_writes_stops_the_sequence(kube: Kube) -> None:
    # The first two checks pass (at the start, before the costs); the one before the scale fails.
    kube.leader.checks = 2
    outcome = await kube.actuator.carry_out(_scale_down(kube), now=0.0)  # type: ignore[arg-type]
    assert outcome.fenced
    assert not outcome.ok
    assert kube.fake.deployments[KEY]["spec"]["replicas"] == 3  # no scale after the loss
    assert [p for p, _, _ in kube.fake.patches if p.endswith("/scale")] == []
    assert kube.fake.events == []
    assert kube.status() is None


@pytest.mark.parametrize("code", [409, 422, 500])
async def test_failed_scale_puts_the_costs_back(kube: Kube, code: int) -> None:
    kube.fake.pods["default/p2"]["metadata"]["annotations"] = {COST: "7"}
    kube.fake.fail_next["scale"] = [code]
    outcome = await kube.actuator.carry_out(_scale_down(kube), now=0.0)  # type: ignore[arg-type]
    assert not outcome.ok
    assert kube.fake.deployments[KEY]["spec"]["replicas"] == 3
    assert kube.costs() == {"p1": None, "p2": "7", "p3": None}  # as they were
    assert kube.status() is None
    if code == 409:
        # Re-read for a new decision; the old value is not re-applied.
        assert outcome.fresh is not None
        assert outcome.fresh.replicas == 3
        assert not kube.actuator.backing_off(KEY, 0.1)
    else:
        assert outcome.fresh is None
        assert kube.actuator.backing_off(KEY, 1.9)


async def test_stale_resource_version_is_a_conflict_not_a_blind_retry(kube: Kube) -> None:
    plan = _scale_down(kube)
    kube.fake.conflicts_to_inject = 1  # a new leader wrote the Deployment meanwhile
    outcome = await kube.actuator.carry_out(plan, now=0.0)  # type: ignore[arg-type]
    assert outcome.fresh is not None
    scale_patches = [p for p, _, _ in kube.fake.patches if p.endswith("/scale")]
    assert len(scale_patches) == 1
    assert kube.fake.deployments[KEY]["spec"]["replicas"] == 3


async def test_unwritten_status_after_a_scale_is_written_next(kube: Kube) -> None:
    kube.fake.fail_next["status"] = [500]
    up = plan_writes(
        kube.deployment(),
        (),
        Decided(_decision(5, Reason.SCALED_UP)),
        StatusRecord(status=PREVIOUS),
    )
    assert up is not None
    first = await kube.actuator.carry_out(up, now=0.0)
    assert not first.ok
    assert kube.fake.deployments[KEY]["spec"]["replicas"] == 5
    assert first.record.status == PREVIOUS  # what the annotation still holds
    assert first.record.intended is not None
    assert first.record.intended["reason"] == "ScaledUp"
    assert first.record.intended["lastChangeTime"] == first.record.last_change_wall != "then"
    # The next decision keeps the scale: it must record the change, not the old status.
    steady = plan_writes(kube.deployment(), (), Decided(_decision(5, Reason.STEADY)), first.record)
    assert steady is not None
    second = await kube.actuator.carry_out(steady, now=10.0)
    assert second.ok
    written = kube.status()
    assert written == first.record.intended
    assert written is not None
    assert written["desired"] == 5
    assert second.record.intended is None


async def test_failures_back_off_and_warn_once(kube: Kube) -> None:
    kube.fake.unavailable = True
    plan = plan_writes(kube.deployment(), (), Decided(_decision(5, Reason.SCALED_UP)))
    assert plan is not None
    now = 0.0
    delays = []
    for _ in range(4):
        outcome = await kube.actuator.carry_out(plan, now=now)
        assert not outcome.ok
        assert not outcome.deferred
        assert await kube.actuator.carry_out(plan, now=now + 0.5) == replace(outcome, deferred=True)
        retry = now
        while kube.actuator.backing_off(KEY, retry):
            retry += 0.5
        delays.append(retry - now)
        now = retry
    assert delays == [2.0, 4.0, 8.0, 16.0]
    # An activation is not held back by a backoff.
    wake = plan_writes(
        replace(kube.deployment(), spec_replicas=0), (), Decided(_decision(1, Reason.ACTIVATED))
    )
    assert wake is not None
    assert not (await kube.actuator.carry_out(wake, now=now - 1)).deferred
    # The Warning could not be written while the API was down; the next streak gets one.
    kube.fake.unavailable = False
    assert (await kube.actuator.carry_out(plan, now=now + 100)).ok
    kube.fake.fail_next["scale"] = [422, 422, 422, 422]
    plan = plan_writes(kube.deployment(), (), Decided(_decision(7, Reason.SCALED_UP)))
    assert plan is not None
    for n in range(4):
        await kube.actuator.carry_out(plan, now=1000.0 + 100 * n)
    warnings = [e for e in kube.fake.events if e["reason"] == "WritesFailing"]
    assert len(warnings) == 1
    assert warnings[0]["type"] == "Warning"
    assert "3 writes in a row failed" in warnings[0]["message"]
    assert "422" in warnings[0]["message"]


async def test_outage_keeps_previous_status_and_counts(kube: Kube) -> None:
    kube.fake.unavailable = True
    plan = plan_writes(kube.deployment(), (), Decided(_decision(5, Reason.SCALED_UP)))
    assert plan is not None
    outcome = await kube.actuator.carry_out(plan, now=0.0)
    assert not outcome.ok
    assert outcome.record.status is None
    failures = kube.metrics.registry.get_sample_value(
        "tidal_scaler_write_failures_total", {"target": KEY}
    )
    assert failures == 1
    assert kube.fake.deployments[KEY]["spec"]["replicas"] == 3
