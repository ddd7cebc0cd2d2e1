"""The actuator's writes over real HTTP, against the small fake Kubernetes API.

Covers:
- a scale-down plan: deletion costs on the pods first, then ``/scale``, then
  a ``ScaledDown`` Event and the status annotation, in that order; the
  outcome carries the status written and the change time;
- a plan for a rejected config writes one Warning Event and nothing else;
- a decision that keeps the scale writes only the status, keeping the
  previous reason and time; :func:`plan_writes` plans nothing when neither
  would change;
- with the API server down, the outcome says not ok, the previous status is
  kept, and the failure is counted.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import pytest_asyncio
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from scaler.actuator import Actuator, kube_actuator, plan_writes
from scaler.kube.client import KubeAccess
from scaler.metrics import Metrics
from scaler.policy.api import Decision, Mode, Reason
from tests.integration.scaler.fake_kube_api import FakeKubeApi, start
from tests.unit.scaler.fakes import deployment, pod

STATUS = "autoscaling.tidal.dev/status"
COST = "controller.kubernetes.io/pod-deletion-cost"


@pytest_asyncio.fixture
async def kube() -> AsyncIterator[tuple[FakeKubeApi, Actuator, Metrics]]:
    fake = FakeKubeApi()
    fake.add_deployment("default", "llama", replicas=3)
    for n in (1, 2, 3):
        fake.add_pod("default", f"p{n}", app="llama", ip=f"10.0.0.{n}")
    gen = start(fake)
    url = await gen.__anext__()
    api = client.ApiClient(client.Configuration(host=url))
    metrics = Metrics(CollectorRegistry())
    actuator = kube_actuator(
        KubeAccess(api=api, namespace="default", source="test"),
        identity="scaler-0",
        metrics=metrics,
    )
    try:
        yield fake, actuator, metrics
    finally:
        await api.close()
        with contextlib.suppress(StopAsyncIteration):
            await gen.__anext__()


def _decision(desired: int, reason: Reason, mode: Mode = Mode.STABLE) -> Decision:
    return Decision(desired=desired, reason=reason, mode=mode, message="signals want it")


async def test_scale_down_plan_in_order(kube: tuple[FakeKubeApi, Actuator, Metrics]) -> None:
    fake, actuator, _ = kube
    pods = (pod("p1", ip="10.0.0.1"), pod("p2", ip="10.0.0.2"), pod("p3", ip="10.0.0.3"))
    plan = plan_writes(
        deployment=deployment(replicas=3),
        pods=pods,
        decision=_decision(2, Reason.SCALED_DOWN),
        pod_load={"p1": 3.0, "p2": 0.0, "p3": 1.0},
    )
    assert plan is not None
    assert plan.deletion_costs == {"p1": 3, "p2": 0, "p3": 1}
    outcome = await actuator.carry_out(plan)
    assert outcome.ok
    paths = [path for path, _, _ in fake.patches]
    assert paths[:3] == [f"/api/v1/namespaces/default/pods/p{n}" for n in (1, 2, 3)]
    assert paths[3].endswith("/deployments/llama/scale")
    assert paths[4].endswith("/deployments/llama")
    assert fake.deployments["default/llama"]["spec"]["replicas"] == 2
    assert fake.pods["default/p2"]["metadata"]["annotations"][COST] == "0"
    [event] = fake.events
    assert (event["reason"], event["type"]) == ("ScaledDown", "Normal")
    assert event["message"] == "scaled from 3 to 2: signals want it"
    written = json.loads(fake.deployments["default/llama"]["metadata"]["annotations"][STATUS])
    assert written == outcome.status
    assert written["reason"] == "ScaledDown"
    assert outcome.last_change_wall == written["lastChangeTime"]


async def test_problem_plan_writes_one_warning(
    kube: tuple[FakeKubeApi, Actuator, Metrics],
) -> None:
    fake, actuator, _ = kube
    plan = plan_writes(
        deployment=deployment(replicas=3),
        pods=(),
        decision=None,
        problem='autoscaling.tidal.dev/max-scale: "0" is not allowed; allowed: 1..1000',
    )
    assert plan is not None
    outcome = await actuator.carry_out(plan)
    assert outcome.problem_reported
    [event] = fake.events
    assert (event["reason"], event["type"]) == ("InvalidAnnotation", "Warning")
    assert fake.patches == []
    assert (
        plan_writes(
            deployment=deployment(replicas=3),
            pods=(),
            decision=None,
            problem="same problem",
            problem_reported=True,
        )
        is None
    )


async def test_unchanged_scale_writes_status_only(
    kube: tuple[FakeKubeApi, Actuator, Metrics],
) -> None:
    fake, actuator, _ = kube
    previous = {
        "desired": 3,
        "mode": "stable",
        "onDemand": 3,
        "spot": 0,
        "reason": "ScaledUp",
        "lastChangeTime": "then",
    }
    same = plan_writes(
        deployment=deployment(replicas=3),
        pods=(),
        decision=_decision(3, Reason.STEADY),
        status=previous,
    )
    assert same is None
    plan = plan_writes(
        deployment=deployment(replicas=3),
        pods=(),
        decision=_decision(3, Reason.STEADY, Mode.PANIC),
        status=previous,
    )
    assert plan is not None
    outcome = await actuator.carry_out(plan)
    assert outcome.status == dict(previous, mode="panic")
    assert [p for p, _, _ in fake.patches] == ["/apis/apps/v1/namespaces/default/deployments/llama"]
    assert fake.events == []


async def test_outage_keeps_previous_status_and_counts(
    kube: tuple[FakeKubeApi, Actuator, Metrics],
) -> None:
    fake, actuator, metrics = kube
    fake.unavailable = True
    plan = plan_writes(
        deployment=deployment(replicas=3), pods=(), decision=_decision(5, Reason.SCALED_UP)
    )
    assert plan is not None
    outcome = await actuator.carry_out(plan)
    assert not outcome.ok
    assert outcome.status is None
    failures = metrics.registry.get_sample_value(
        "tidal_scaler_write_failures_total", {"target": "default/llama"}
    )
    assert failures == 1
    assert fake.deployments["default/llama"]["spec"]["replicas"] == 3
