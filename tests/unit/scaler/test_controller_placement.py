"""The controller and the actuator with spot placement, fakes at every seam.

Covers, for a ``spot-with-on-demand-baseline`` target (baseline 1) loaded to
four replicas: the leader scales its Deployment to the on-demand share,
creates the companion with the spot share, pins the Deployment (Event
OnDemandPinned), announces the pair's total (ScaledUp 1 -> 4) and writes
the split into the status annotation; the live view serves the split and
the cost, and the desired/ready gauges are by capacity type; a notice on
the spot node covers in the next decision (on-demand 2, SpotFallback as a
Warning), and once the node is gone and the
replacement Ready, after the hold, SpotRecovered and back to the baseline;
a change whose status write conflicts is announced once;
a follower plans the same but writes nothing; a companion whose
Deployment is no longer opted in is unpinned and deleted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from prometheus_client import CollectorRegistry

from groundwork.kube.errors import Conflict, KubeError
from scaler.actuator import Actuator
from scaler.app import target_view
from scaler.controller import Controller, ControllerSettings
from scaler.gpu_ledger import GpuLedger
from scaler.kube.objects import deployment_from_raw
from scaler.kube.types import CompanionInfo, NodeInfo, PodInfo, ScaleState
from scaler.metrics import Metrics
from scaler.placement.actuation import PlacementActuation
from scaler.placement.placer import Placer
from scaler.policy.placement.companion import ON_DEMAND_PIN, template_hash
from scaler.policy.placement.cost import DEFAULT_PRICES
from scaler.policy.placement.providers import PRESETS
from scaler.policy.protocol import PurePolicy
from scaler.signals.base import COUNTS, SourceReading
from scaler.signals.hub import SignalHub
from scaler.targets.book import TargetBook
from tests.unit.scaler.fakes import FakeCluster, FakeEvents, FakeLeader, reading

KEY = "default/llama"
KARPENTER = PRESETS["karpenter"]
WALL = 1_800_000_000.0
RAW: dict[str, Any] = {
    "metadata": {
        "name": "llama",
        "namespace": "default",
        "uid": "uid-llama",
        "labels": {"autoscaling.tidal.dev/enabled": "true"},
        "annotations": {
            "placement.tidal.dev/policy": "spot-with-on-demand-baseline",
            "autoscaling.tidal.dev/target-concurrency": "10",
            "autoscaling.tidal.dev/engine": "generic",
        },
    },
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "llama"}},
        "template": {
            "metadata": {"labels": {"app": "llama"}},
            "spec": {"containers": [{"name": "v", "image": "vllm:1"}]},
        },
    },
    "status": {"readyReplicas": 1},
}


class World:
    """The user's Deployment, its companion and nodes, as the watches would show them."""

    def __init__(self, *, leader: bool = True) -> None:
        self.cluster = FakeCluster()
        self.raw = json.loads(json.dumps(RAW))
        self.raw["metadata"]["resourceVersion"] = "1"
        self.pods: list[PodInfo] = [self.pod("od-0", "od-1")]
        self.node_map = {
            "od-1": NodeInfo("od-1", {"karpenter.sh/capacity-type": "on-demand"}),
            "spot-1": NodeInfo("spot-1", {"karpenter.sh/capacity-type": "spot"}),
            "spot-2": NodeInfo("spot-2", {"karpenter.sh/capacity-type": "spot"}),
        }
        self.companion_map: dict[str, CompanionInfo] = {}
        self.log: list[tuple[Any, ...]] = []
        self.fail_status: list[KubeError] = []  # the next status writes fail so, in order
        self.events = FakeEvents()
        self.now = 1000.0
        self.wall = WALL
        self.version = 1
        self.metrics = Metrics(CollectorRegistry())
        self.activator = _Source()
        self.publish()
        policy = PurePolicy()
        book = TargetBook(self.cluster, policy)
        self.signals = SignalHub(sources=[self.activator], catalog=book)
        self.placer = Placer(view=self, preset=KARPENTER, hold_s=10.0)
        # As the service runs it: beside the loop, on the tick interval.
        self.book = book
        self.ledger = GpuLedger(
            prices=DEFAULT_PRICES, metrics=self.metrics, facts=self.placer.facts
        )
        self.leader = FakeLeader(is_leader=leader)
        actuator = Actuator(
            scale_target=self,
            events=self.events,
            leader=self.leader,
            metrics=self.metrics,
            wall_time=lambda: "t",
            placement=PlacementActuation(
                companions=self, scale_target=self, events=self.events, preset=KARPENTER
            ),
        )
        self.controller = Controller(
            targets=book,
            signals=self.signals,
            actuator=actuator,
            policy=policy,
            metrics=self.metrics,
            clock=lambda: self.now,
            settings=ControllerSettings(tick_interval_s=2.0),
            placer=self.placer,
            wall_clock=lambda: self.wall,
            ledger=self.ledger,
        )

    def pod(self, name: str, node: str, *, spot: bool = False, ready: bool = True) -> PodInfo:
        labels = {"app": "llama"}
        if spot:
            labels["placement.tidal.dev/capacity-type"] = "spot"
        return PodInfo(
            namespace="default",
            name=name,
            labels=labels,
            ip="10.0.0.1",
            ready=ready,
            terminating=False,
            node=node,
            phase="Running",
            created_at=WALL,
            gpus=1,
        )

    def publish(self) -> None:
        d = deployment_from_raw(self.raw)
        self.cluster.put(d, tuple(self.pods))

    # PlacementView
    def nodes(self) -> Mapping[str, NodeInfo]:
        return self.node_map

    def companions(self) -> Mapping[str, CompanionInfo]:
        return self.companion_map

    # CompanionWrites
    async def read_deployment(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.raw if name == "llama" else None

    async def ensure_companion(self, body: Mapping[str, Any]) -> str:
        self.log.append(("ensure", body["spec"]["replicas"]))
        self.companion_map[KEY] = CompanionInfo(
            "default",
            "llama-spot",
            "llama",
            body["spec"]["replicas"],
            0,
            body["metadata"]["annotations"]["placement.tidal.dev/template-hash"],
        )
        return "created"

    async def delete_companion(self, namespace: str, name: str) -> bool:
        self.log.append(("delete", name))
        keys = [k for k, c in self.companion_map.items() if c.name == name]
        for key in keys:
            del self.companion_map[key]
        return bool(keys)

    async def patch_deployment(self, namespace: str, name: str, patch: Mapping[str, Any]) -> str:
        pin = patch["metadata"]["annotations"][ON_DEMAND_PIN]
        self.log.append(("pin" if pin else "unpin",))
        annotations = self.raw["metadata"]["annotations"]
        if pin:
            annotations[ON_DEMAND_PIN] = pin
        else:
            annotations.pop(ON_DEMAND_PIN, None)
        return self.bump()

    def bump(self) -> str:
        """A write moved the user's Deployment on: a new resourceVersion, as the API does."""
        self.version += 1
        self.raw["metadata"]["resourceVersion"] = str(self.version)
        self.publish()
        return str(self.version)

    # ScaleTarget (with resourceVersion preconditions, as the fenced actuator writes)
    async def read_scale(self, namespace: str, name: str) -> ScaleState:
        if name == "llama-spot":
            return ScaleState(self.companion_map[KEY].spec_replicas, "spot-rv")
        return ScaleState(int(self.raw["spec"]["replicas"]), str(self.version))

    async def scale(
        self, namespace: str, name: str, replicas: int, *, resource_version: str
    ) -> str:
        if name == "llama-spot":
            assert resource_version == "spot-rv"
            c = self.companion_map[KEY]
            self.companion_map[KEY] = replace(c, spec_replicas=replicas)
            self.log.append(("scale-spot", replicas))
            return "spot-rv"
        assert resource_version == str(self.version), "a stale resourceVersion"
        self.raw["spec"]["replicas"] = replicas
        self.log.append(("scale", replicas))
        return self.bump()

    async def set_deletion_costs(self, namespace: str, costs: Mapping[str, int | None]) -> None:
        self.log.append(("costs",))

    async def write_status(
        self,
        namespace: str,
        name: str,
        status_json: str,
        *,
        replicas: int,
        has_annotations: bool = True,
    ) -> str:
        assert replicas == self.raw["spec"]["replicas"], "a status for another scale"
        if self.fail_status:
            raise self.fail_status.pop(0)
        self.raw["metadata"]["annotations"]["autoscaling.tidal.dev/status"] = status_json
        self.log.append(("status", json.loads(status_json)))
        return self.bump()

    async def tick(self, seconds: float = 2.0) -> None:
        self.now += seconds
        self.wall += seconds
        self.signals.arrived("activator", now=self.now)
        await self.controller.tick(self.now)
        self.ledger.account(self.now, self.book.snapshots())

    def statuses(self) -> list[dict[str, Any]]:
        return [entry[1] for entry in self.log if entry[0] == "status"]


class _Source:
    name = "activator"
    feeds = COUNTS

    def __init__(self) -> None:
        self.concurrency = 40.0

    def read(self, key: str, *, now: float) -> SourceReading | None:
        return reading(
            fresh=True,
            reporters=1,
            concurrency=self.concurrency,
            queue_depth=0.0,
            busy=self.concurrency > 0,
        )


async def test_spot_pair_cover_and_recovery() -> None:
    w = World()
    for _ in range(3):
        await w.tick()
    assert ("ensure", 3) in w.log and ("pin",) in w.log
    assert w.companion_map[KEY].spec_replicas == 3
    assert w.raw["spec"]["replicas"] == 1
    assert w.statuses()[-1]["desired"] == 4
    assert (w.statuses()[-1]["onDemand"], w.statuses()[-1]["spot"]) == (1, 3)
    assert "OnDemandPinned" in w.events.reasons()
    scaled = [e for e in w.events.events if e[1] == "ScaledUp"]
    assert scaled and "from 1 to 4" in scaled[0][2]
    # The companion is created at its spot share, then the user's Deployment pinned.
    assert w.log.index(("ensure", 3)) < w.log.index(("pin",))
    assert ("scale-spot", 3) not in w.log  # created at 3: nothing to scale

    # Three spot replicas Ready on spot-1 and spot-2.
    w.pods += [w.pod(f"s{i}", "spot-1" if i < 2 else "spot-2", spot=True) for i in range(3)]
    w.companion_map[KEY] = replace(w.companion_map[KEY], ready_replicas=3)
    w.publish()
    await w.tick()
    view = target_view(w.controller.target_states()[0])
    assert view["placement"]["spot_ready"] == 3 and view["placement"]["on_demand"] == 1
    registry = w.metrics.registry
    for capacity, desired, ready in (("on-demand", 1, 1), ("spot", 3, 3)):
        labels = {"target": KEY, "capacity_type": capacity}
        assert registry.get_sample_value("tidal_scaler_desired_replicas", labels) == desired
        assert registry.get_sample_value("tidal_scaler_ready_replicas", labels) == ready
    assert view["cost"]["dollars_per_hour"] > 0 and view["cost"]["saving_dollars_per_hour"] > 0

    # spot-1 gets a notice: on-demand covers its two replicas in the next decision.
    w.node_map["spot-1"] = replace(
        w.node_map["spot-1"], taints=({"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},)
    )
    await w.tick(0.1)
    assert w.raw["spec"]["replicas"] == 3
    fallback = [e for e in w.events.events if e[1] == "SpotFallback"]
    assert fallback and fallback[0][3] is True  # a Warning
    assert "2 node under interruption notice" in fallback[0][2]
    assert (w.statuses()[-1]["onDemand"], w.statuses()[-1]["spot"]) == (3, 3)
    assert w.statuses()[-1]["desired"] == 4

    # The node goes; replacements start on spot-2 (cover kept), then are Ready.
    del w.node_map["spot-1"]
    w.pods = [p for p in w.pods if p.node != "spot-1"]
    w.pods += [w.pod(f"r{i}", "spot-2", spot=True, ready=False) for i in range(2)]
    w.publish()
    await w.tick()
    assert w.raw["spec"]["replicas"] == 3
    w.pods = [replace(p, ready=True) for p in w.pods]
    w.publish()
    await w.tick()
    assert w.raw["spec"]["replicas"] == 3  # the hold
    for _ in range(6):
        await w.tick()
    assert w.raw["spec"]["replicas"] == 1
    assert "SpotRecovered" in w.events.reasons()


async def test_a_change_is_announced_once_when_its_status_write_conflicts() -> None:
    w = World()
    for _ in range(3):
        await w.tick()
    assert w.statuses()[-1]["desired"] == 4
    # More load; the status write after the pair's scale conflicts once (someone
    # wrote the Deployment): the decision made again on the re-read Deployment
    # must not announce the same change a second time.
    w.activator.concurrency = 60.0
    w.fail_status.append(Conflict("the object has been modified", status=409))
    await w.tick()
    await w.tick()
    scaled = [e[2] for e in w.events.events if e[1] == "ScaledUp"]
    assert len(scaled) == len(set(scaled)), scaled
    assert w.statuses()[-1]["desired"] == 6


async def test_follower_plans_but_writes_nothing() -> None:
    w = World(leader=False)
    for _ in range(3):
        await w.tick()
    assert w.log == []
    view = target_view(w.controller.target_states()[0])
    assert (view["placement"]["on_demand"], view["placement"]["spot"]) == (1, 3)


async def test_orphan_companion_is_removed() -> None:
    w = World()
    await w.tick()
    w.companion_map["default/old"] = CompanionInfo(
        "default", "old-spot", "old", 1, 1, template_hash(w.raw, KARPENTER)
    )
    w.log.clear()
    await w.tick()
    assert ("delete", "old-spot") in w.log
    assert set(w.companion_map) == {KEY}  # the spot target's own companion stays
