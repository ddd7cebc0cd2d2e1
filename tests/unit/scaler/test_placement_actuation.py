"""Carrying out placement plans (:mod:`scaler.placement_actuation`), with recording fakes.

Covers: a fresh spot target creates the companion from the user's template
at the spot replicas, pins the user's Deployment, scales the companion and
records the Events (SpotFallback as a Warning) in that order; a plan with
nothing to build only scales; going back to on-demand deletes the companion
then unpins; an orphan is unpinned and deleted (owner gone: only deleted);
a lost Event does not raise; a failed write does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from scaler.kube.cluster import deployment_from_raw
from scaler.kube.errors import ApiUnavailable
from scaler.kube.types import CompanionInfo, DeploymentInfo
from scaler.placement_actuation import PlacementActuation
from scaler.policy import Split
from scaler.policy.availability import SpotCounts
from scaler.policy.companion import ON_DEMAND_PIN, pin_patch
from scaler.policy.fallback import FallbackState
from scaler.policy.placement_plan import PlacementPlan
from scaler.policy.providers import PRESETS

KARPENTER = PRESETS["karpenter"]
RAW: dict[str, Any] = {
    "metadata": {"name": "llama", "namespace": "ml", "uid": "u1", "annotations": {}},
    "spec": {
        "selector": {"matchLabels": {"app": "llama"}},
        "template": {"metadata": {"labels": {"app": "llama"}}, "spec": {"containers": []}},
    },
}


class Recorder:
    """Companion writes, scale writes and Events, in one ordered log."""

    def __init__(self, *, owner: Mapping[str, Any] | None = None) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.owner = owner
        self.fail_events = False
        self.fail_scale = False

    async def read_deployment(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.owner

    async def ensure_companion(self, body: Mapping[str, Any]) -> str:
        self.log.append(("ensure", body["metadata"]["name"], body["spec"]["replicas"]))
        return "created"

    async def delete_companion(self, namespace: str, name: str) -> bool:
        self.log.append(("delete", name))
        return True

    async def patch_deployment(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        pinned = patch["metadata"]["annotations"][ON_DEMAND_PIN] is not None
        self.log.append(("pin" if pinned else "unpin", name))

    async def scale(self, namespace: str, name: str, replicas: int) -> int:
        if self.fail_scale:
            raise ApiUnavailable("down", status=503)
        self.log.append(("scale", name, replicas))
        return 0

    async def set_deletion_costs(self, namespace: str, costs: Mapping[str, int]) -> None:
        raise AssertionError("placement sets no deletion costs")

    async def write_status(self, namespace: str, name: str, status_json: str) -> None:
        raise AssertionError("placement writes no status")

    async def emit(
        self, target: DeploymentInfo, *, reason: str, message: str, warning: bool = False
    ) -> None:
        if self.fail_events:
            raise ApiUnavailable("down", status=503)
        self.log.append(("event", reason, warning))


def actuation(rec: Recorder) -> PlacementActuation:
    return PlacementActuation(companions=rec, scale_target=rec, events=rec, preset=KARPENTER)


def plan(**kw: Any) -> PlacementPlan:
    base: dict[str, Any] = {
        "split": Split(3, 1),
        "state": FallbackState(),
        "counts": SpotCounts(),
        "on_demand_replicas": 1,
        "companion_replicas": 3,
    }
    return PlacementPlan(**{**base, **kw})


async def test_fresh_spot_target() -> None:
    rec = Recorder()
    await actuation(rec).carry_out(
        deployment_from_raw(RAW),
        plan(
            ensure_companion=True,
            pin=True,
            events=(("OnDemandPinned", "rolls"), ("SpotFallback", "covers")),
        ),
    )
    assert rec.log == [
        ("ensure", "llama-spot", 3),
        ("pin", "llama"),
        ("scale", "llama-spot", 3),
        ("event", "OnDemandPinned", False),
        ("event", "SpotFallback", True),
    ]


async def test_steady_state_only_scales() -> None:
    rec = Recorder()
    await actuation(rec).carry_out(deployment_from_raw(RAW), plan(companion_replicas=5))
    assert rec.log == [("scale", "llama-spot", 5)]


async def test_back_to_on_demand() -> None:
    patch = pin_patch(RAW, KARPENTER)
    assert patch is not None
    pinned = {**RAW, "metadata": {**RAW["metadata"], **patch["metadata"]}}
    rec = Recorder()
    await actuation(rec).carry_out(
        deployment_from_raw(pinned),
        plan(companion_replicas=None, delete_companion=True, unpin=True, on_demand_replicas=4),
    )
    assert rec.log == [("delete", "llama-spot"), ("unpin", "llama")]


async def test_orphans() -> None:
    owner = {**RAW, "metadata": {**RAW["metadata"], "annotations": {ON_DEMAND_PIN: "{}"}}}
    rec = Recorder(owner=owner)
    orphan = CompanionInfo("ml", "llama-spot", "llama", 3, 3, "h")
    await actuation(rec).remove_orphan(orphan)
    assert rec.log == [("unpin", "llama"), ("delete", "llama-spot")]
    gone = Recorder(owner=None)
    await actuation(gone).remove_orphan(orphan)
    assert gone.log == [("delete", "llama-spot")]


async def test_failures() -> None:
    rec = Recorder()
    rec.fail_events = True
    await actuation(rec).carry_out(
        deployment_from_raw(RAW), plan(events=(("SpotRecovered", "back"),))
    )
    assert rec.log == [("scale", "llama-spot", 3)]
    rec.fail_scale = True
    with pytest.raises(ApiUnavailable):
        await actuation(rec).carry_out(deployment_from_raw(RAW), plan())
