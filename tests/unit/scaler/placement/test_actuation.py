"""Carrying out placement plans (:mod:`scaler.placement.actuation`), with recording fakes.

Covers: a fresh spot target creates the companion from the user's template
at the spot replicas, pins the user's Deployment, scales the companion and
records the Events (SpotFallback as a Warning) in that order; a plan with
nothing to build only scales; going back to on-demand deletes the companion
then unpins; an orphan is unpinned and deleted (owner gone: only deleted);
a lost Event does not raise; a failed write does; every write is fenced, the
companion is scaled with the resourceVersion just read, and a pin hands back
the user's Deployment's new resourceVersion; a decision made again on the
same Deployment object (after a conflict) does not pin or announce twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from groundwork.kube.errors import ApiUnavailable
from scaler.kube.objects import deployment_from_raw
from scaler.kube.types import CompanionInfo, DeploymentInfo, ScaleState
from scaler.placement.actuation import PlacementActuation
from scaler.policy import Split
from scaler.policy.placement.availability import SpotCounts
from scaler.policy.placement.companion import ON_DEMAND_PIN, pin_patch
from scaler.policy.placement.fallback import FallbackState
from scaler.policy.placement.plan import PlacementPlan
from scaler.policy.placement.providers import PRESETS

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
        self.spot_scale = 0
        self.fenced = 0

    async def read_deployment(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.owner

    async def ensure_companion(self, body: Mapping[str, Any]) -> str:
        self.log.append(("ensure", body["metadata"]["name"], body["spec"]["replicas"]))
        return "created"

    async def delete_companion(self, namespace: str, name: str) -> bool:
        self.log.append(("delete", name))
        return True

    async def patch_deployment(self, namespace: str, name: str, patch: Mapping[str, Any]) -> str:
        pinned = patch["metadata"]["annotations"][ON_DEMAND_PIN] is not None
        self.log.append(("pin" if pinned else "unpin", name))
        return "rv-pinned"

    async def read_scale(self, namespace: str, name: str) -> ScaleState:
        return ScaleState(replicas=self.spot_scale, resource_version="rv-1")

    async def scale(
        self, namespace: str, name: str, replicas: int, *, resource_version: str
    ) -> str:
        if self.fail_scale:
            raise ApiUnavailable("down", status=503)
        assert resource_version == "rv-1"  # the version just read
        self.log.append(("scale", name, replicas))
        self.spot_scale = replicas
        return "rv-2"

    async def set_deletion_costs(self, namespace: str, costs: Mapping[str, int | None]) -> None:
        raise AssertionError("placement sets no deletion costs")

    async def write_status(
        self,
        namespace: str,
        name: str,
        status_json: str,
        *,
        replicas: int,
        has_annotations: bool = True,
    ) -> str:
        raise AssertionError("placement writes no status")

    def fence(self) -> None:
        self.fenced += 1

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
    version = await actuation(rec).carry_out(
        deployment_from_raw(RAW),
        plan(
            ensure_companion=True,
            pin=True,
            events=(("OnDemandPinned", "rolls"), ("SpotFallback", "covers")),
        ),
        fence=rec.fence,
    )
    assert version == "rv-pinned"  # the pin moved the user's Deployment on
    assert rec.fenced == 5  # before each of the five writes
    assert rec.log == [
        ("ensure", "llama-spot", 3),
        ("pin", "llama"),
        ("scale", "llama-spot", 3),
        ("event", "OnDemandPinned", False),
        ("event", "SpotFallback", True),
    ]


async def test_steady_state_only_scales() -> None:
    rec = Recorder()
    assert (
        await actuation(rec).carry_out(deployment_from_raw(RAW), plan(companion_replicas=5)) is None
    )
    assert rec.log == [("scale", "llama-spot", 5)]
    await actuation(rec).carry_out(deployment_from_raw(RAW), plan(companion_replicas=5))
    assert rec.log == [("scale", "llama-spot", 5)]  # already there: no write


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
    broken = Recorder()
    broken.fail_scale = True
    with pytest.raises(ApiUnavailable):
        await actuation(broken).carry_out(deployment_from_raw(RAW), plan())


async def test_a_decision_made_again_on_the_same_object_pins_once() -> None:
    raw = {**RAW, "metadata": {**RAW["metadata"], "resourceVersion": "7"}}
    rec = Recorder()
    act = actuation(rec)
    pinning = plan(pin=True, events=(("OnDemandPinned", "rolls"),))
    await act.carry_out(deployment_from_raw(raw), pinning)
    # A conflict made the controller decide again, on the same (stale) object.
    await act.carry_out(deployment_from_raw(raw), pinning)
    assert [e for e in rec.log if e[0] in ("pin", "event")] == [
        ("pin", "llama"),
        ("event", "OnDemandPinned", False),
    ]
    # A newer object that still shows no pin (the user took it off): pinned again.
    newer = {**raw, "metadata": {**raw["metadata"], "resourceVersion": "9"}}
    await act.carry_out(deployment_from_raw(newer), pinning)
    assert [e[0] for e in rec.log].count("pin") == 2
