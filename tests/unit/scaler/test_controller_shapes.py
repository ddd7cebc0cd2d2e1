"""The controller and the actuator with GPU shapes, fakes at every seam.

Covers, for a model whose template is an H100 and which lists ``h100`` and
``mig-3g.40gb``: what runs stays for the first stable window (too little
seen to compare shapes on); then at a light load the leader creates the slice companion and
keeps the H100 until the slice is Ready, then lets it go (ShapesChanged),
writing the replicas per shape and their hourly cost in the status, and
telling the activators each endpoint's shape and weight; when
the slices stay Pending past the pending-timeout the H100 covers in the same
decision (ShapeUnavailable, a Warning) and the companion goes to zero; a
bad shape declaration gets an InvalidAnnotation Warning naming the key and
what is allowed while the model scales on the shapes declared well; the
table's changes are read again; a shape companion whose Deployment is no
longer opted in is deleted; a follower writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from prometheus_client import CollectorRegistry

from groundwork.rules.stats_report import ShapeRoute
from scaler.actuator import Actuator
from scaler.app import target_view
from scaler.controller import Controller, ControllerSettings
from scaler.kube.cluster import deployment_from_raw
from scaler.kube.types import CompanionInfo, NodeInfo, PodInfo, ScaleState
from scaler.metrics import Metrics
from scaler.placement.placer import Placer
from scaler.placement.shape_actuation import ShapeActuation
from scaler.placement.shaper import Shaper
from scaler.policy.invalid_annotation import AnnotationProblem
from scaler.policy.placement.providers import PRESETS
from scaler.policy.protocol import PurePolicy
from scaler.policy.shapes.declarations import ShapeTable, parse_shape_table
from scaler.policy.shapes.template import SHAPE_LABEL
from scaler.signals.base import COUNTS, SourceReading
from scaler.signals.hub import SignalHub
from scaler.targets.book import TargetBook
from tests.unit.scaler.fakes import FakeCluster, FakeEvents, FakeLeader, reading

KEY = "default/llama"
SLICE = "mig-3g.40gb"
COMPANION = "llama-mig-3g.40gb"
PRODUCT = "NVIDIA-H100-80GB-HBM3"
WALL = 1_800_000_000.0
TABLE = {
    "h100": f"resource=nvidia.com/gpu, gpu-product={PRODUCT}, on-demand=12.29",
    SLICE: f"resource=nvidia.com/mig-3g.40gb, gpu-product={PRODUCT}, on-demand=5.27",
}
RAW: dict[str, Any] = {
    "metadata": {
        "name": "llama",
        "namespace": "default",
        "uid": "uid-llama",
        "labels": {"autoscaling.tidal.dev/enabled": "true"},
        "annotations": {
            "autoscaling.tidal.dev/target-concurrency": "10",
            "autoscaling.tidal.dev/engine": "generic",
            "autoscaling.tidal.dev/window": "6s",
            "placement.tidal.dev/shapes": f"h100,{SLICE}",
            "placement.tidal.dev/pending-timeout": "30s",
        },
    },
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "llama"}},
        "template": {
            "metadata": {"labels": {"app": "llama"}},
            "spec": {
                "nodeSelector": {"nvidia.com/gpu.product": PRODUCT},
                "containers": [{"name": "v", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
        },
    },
    "status": {"readyReplicas": 1},
}


class Table:
    """The shape watch's table: a revision that moves when it changes."""

    def __init__(self, data: Mapping[str, str]) -> None:
        self.revision = 0
        self.set(data)

    def set(self, data: Mapping[str, str]) -> None:
        self._table, self._problems = parse_shape_table(data)
        self.revision += 1

    def table(self) -> tuple[int, ShapeTable]:
        return self.revision, self._table

    @property
    def problems(self) -> tuple[AnnotationProblem, ...]:
        return self._problems


class World:
    """The user's Deployment, its shape companions and pods, as the watches show them."""

    def __init__(self, *, leader: bool = True, annotations: Mapping[str, str] = {}) -> None:
        self.cluster = FakeCluster()
        self.raw = json.loads(json.dumps(RAW))
        self.raw["metadata"]["annotations"].update(annotations)
        self.ips: dict[str, str] = {}
        self.pods: list[PodInfo] = [self.pod("h-0")]
        self.companion_map: dict[str, dict[str, CompanionInfo]] = {}
        self.log: list[tuple[Any, ...]] = []
        self.events = FakeEvents()
        self.now = 1000.0
        self.wall = WALL
        self.metrics = Metrics(CollectorRegistry())
        self.concurrency = 3.0
        self.table = Table(TABLE)
        self.publish()
        policy = PurePolicy()
        self.book = TargetBook(self.cluster, policy, shapes=self.table)
        self.signals = SignalHub(sources=[self], catalog=self.book)
        placer = Placer(view=self, preset=PRESETS["karpenter"])
        self.leader = FakeLeader(is_leader=leader)
        actuator = Actuator(
            scale_target=self,
            events=self.events,
            leader=self.leader,
            metrics=self.metrics,
            wall_time=lambda: "t",
            shapes=ShapeActuation(companions=self, scale_target=self, events=self.events),
        )
        self.controller = Controller(
            targets=self.book,
            signals=self.signals,
            actuator=actuator,
            policy=policy,
            metrics=self.metrics,
            clock=lambda: self.now,
            settings=ControllerSettings(tick_interval_s=2.0),
            placer=placer,
            wall_clock=lambda: self.wall,
            shaper=Shaper(
                view=self, facts=placer.facts, policy=policy, wall_clock=lambda: self.wall
            ),
        )

    def pod(self, name: str, *, shape: str | None = None, ready: bool = True) -> PodInfo:
        labels = {"app": "llama"} | ({SHAPE_LABEL: shape} if shape else {})
        return PodInfo(
            namespace="default",
            name=name,
            labels=labels,
            ip=self.ips.setdefault(name, f"10.0.0.{len(self.ips) + 1}"),
            ready=ready,
            terminating=False,
            node="n1" if ready else None,
            phase="Running" if ready else "Pending",
            created_at=self.wall if hasattr(self, "wall") else WALL,
            gpus=1,
        )

    def publish(self) -> None:
        self.raw["status"]["readyReplicas"] = sum(
            1 for p in self.pods if p.ready and SHAPE_LABEL not in p.labels
        )
        self.cluster.put(deployment_from_raw(self.raw), tuple(self.pods))

    def slices(self, *, ready: bool) -> None:
        """The slice pods, as many as the companion asks for."""
        n = self.companion_map.get(KEY, {}).get(SLICE)
        keep = [p for p in self.pods if SHAPE_LABEL not in p.labels]
        made = [
            self.pod(f"s-{i}", shape=SLICE, ready=ready) for i in range(n.spec_replicas if n else 0)
        ]
        self.pods = keep + made
        if n is not None:
            self.companion_map[KEY][SLICE] = replace(n, ready_replicas=len(made) if ready else 0)
        self.publish()

    def user(self, replicas: int) -> None:
        """The user's pods follow its scale (Ready at once)."""
        shaped = [p for p in self.pods if SHAPE_LABEL in p.labels]
        self.pods = [self.pod(f"h-{i}") for i in range(replicas)] + shaped
        self.publish()

    # The activator view (a DemandSource)
    name = "activator"
    feeds = COUNTS

    def read(self, key: str, *, now: float) -> SourceReading | None:
        c = self.concurrency
        return reading(fresh=True, concurrency=c, queue_depth=0.0, busy=c > 0)

    # PlacementView and ShapeView
    def nodes(self) -> Mapping[str, NodeInfo]:
        return {"n1": NodeInfo("n1", {"nvidia.com/gpu.product": PRODUCT})}

    def companions(self, key: str | None = None) -> Mapping[str, Any]:
        return {} if key is None else self.companion_map.get(key, {})

    def owners(self) -> list[str]:
        return list(self.companion_map)

    # CompanionWrites
    async def read_deployment(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.raw

    async def ensure_companion(self, body: Mapping[str, Any]) -> str:
        meta = body["metadata"]
        shape = meta["labels"][SHAPE_LABEL]
        self.log.append(("ensure", shape, body["spec"]["replicas"]))
        owner = f"default/{meta['annotations']['placement.tidal.dev/companion-of']}"
        self.companion_map.setdefault(owner, {})[shape] = CompanionInfo(
            "default",
            meta["name"],
            meta["annotations"]["placement.tidal.dev/companion-of"],
            body["spec"]["replicas"],
            0,
            meta["annotations"]["placement.tidal.dev/template-hash"],
        )
        return "created"

    async def delete_companion(self, namespace: str, name: str) -> bool:
        self.log.append(("delete", name))
        for owner, mine in list(self.companion_map.items()):
            for shape, c in list(mine.items()):
                if c.name == name:
                    del mine[shape]
            if not mine:
                del self.companion_map[owner]
        return True

    async def patch_deployment(self, namespace: str, name: str, patch: Mapping[str, Any]) -> str:
        raise AssertionError("shapes never patch the user's Deployment")

    # ScaleTarget
    async def read_scale(self, namespace: str, name: str) -> ScaleState:
        if name == COMPANION:
            return ScaleState(self.companion_map[KEY][SLICE].spec_replicas, "c")
        return ScaleState(int(self.raw["spec"]["replicas"]), "u")

    async def scale(
        self, namespace: str, name: str, replicas: int, *, resource_version: str
    ) -> str:
        if name == COMPANION:
            self.companion_map[KEY][SLICE] = replace(
                self.companion_map[KEY][SLICE], spec_replicas=replicas
            )
            self.log.append(("scale-slice", replicas))
            return "c"
        self.raw["spec"]["replicas"] = replicas
        self.log.append(("scale", replicas))
        self.publish()
        return "u"

    async def set_deletion_costs(self, namespace: str, costs: Mapping[str, int | None]) -> None:
        pass

    async def write_status(
        self,
        namespace: str,
        name: str,
        status_json: str,
        *,
        replicas: int,
        has_annotations: bool = True,
    ) -> str:
        self.raw["metadata"]["annotations"]["autoscaling.tidal.dev/status"] = status_json
        self.log.append(("status", json.loads(status_json)))
        self.publish()
        return "u"

    async def tick(self, seconds: float = 2.0) -> None:
        self.now += seconds
        self.wall += seconds
        self.signals.arrived("activator", now=self.now)
        await self.controller.tick(self.now)

    async def settle(self) -> None:
        """Ticks past the first stable window, before which what runs stays."""
        for _ in range(4):
            await self.tick()

    def statuses(self) -> list[dict[str, Any]]:
        return [entry[1] for entry in self.log if entry[0] == "status"]


async def test_a_light_load_moves_to_slices_with_no_gap() -> None:
    w = World()
    await w.tick()
    assert not any(e[0] == "ensure" for e in w.log)  # too little seen yet: what runs stays
    await w.settle()
    # 3 in flight against 10 per H100: one H100 ($12.29) or one slice (4.3: $5.27).
    assert ("ensure", SLICE, 1) in w.log
    assert w.raw["spec"]["replicas"] == 1  # the H100 stays while the slice loads
    assert w.statuses()[-1]["shapes"] == {"h100": 1, SLICE: 1}
    w.slices(ready=True)
    await w.tick()
    assert w.raw["spec"]["replicas"] == 0
    status = w.statuses()[-1]
    assert status["shapes"] == {SLICE: 1} and status["costPerHour"] == 5.27
    assert status["desired"] == 1
    changed = [e for e in w.events.events if e[1] == "ShapesChanged"]
    assert changed and "now 1 x mig-3g.40gb at $5.27/h (was 1 x h100 at $12.29/h)" in changed[0][2]
    view = target_view(w.controller.target_states()[0])
    assert view["shapes"]["mix"] == {SLICE: 1}
    assert view["shapes"]["need"] == {"h100": 1, SLICE: 1}
    # The activators' word: each pod's endpoint, its shape and weight (no objective:
    # no reach; the catalog's ratio of a 3g slice to the whole H100, 3/7).
    assert w.controller.shape_routes() == {
        KEY: {
            f"{w.ips['h-0']}:8000": ShapeRoute("h100", 1.0, None),
            f"{w.ips['s-0']}:8000": ShapeRoute(SLICE, 0.4286, None),
        }
    }


async def test_slices_stuck_pending_are_covered_by_the_h100() -> None:
    w = World()
    await w.settle()
    w.slices(ready=False)  # no slice free: Pending
    w.user(0)  # say the H100 had gone meanwhile
    for _ in range(16):  # past the 30 s pending-timeout
        await w.tick()
    unavailable = [e for e in w.events.events if e[1] == "ShapeUnavailable"]
    assert unavailable and unavailable[0][3] is True  # a Warning
    assert "mig-3g.40gb: 1 replica Pending past the pending-timeout (30s)" in unavailable[0][2]
    assert w.raw["spec"]["replicas"] == 1  # the H100 covers
    assert w.companion_map[KEY][SLICE].spec_replicas == 0
    assert w.statuses()[-1]["shapes"] == {"h100": 1}


async def test_a_bad_declaration_warns_and_the_rest_scales() -> None:
    w = World(
        annotations={
            "placement.tidal.dev/shapes": f"h100,{SLICE},a100",
            "placement.tidal.dev/shape-args.l4": "--max-model-len 8192",
        }
    )
    await w.settle()
    warnings = [e for e in w.events.events if e[1] == "InvalidAnnotation"]
    assert len(warnings) == 1 and warnings[0][3] is True
    message = warnings[0][2]
    assert "placement.tidal.dev/shapes" in message and "a100 is not one" in message
    assert "h100, mig-3g.40gb" in message  # what is allowed
    assert "placement.tidal.dev/shape-args.l4" in message
    assert ("ensure", SLICE, 1) in w.log  # scaling goes on with the valid shapes
    await w.tick()
    assert len([e for e in w.events.events if e[1] == "InvalidAnnotation"]) == 1  # once
    assert "UnknownAnnotation" not in w.events.reasons()
    # The table gains an a100: read again, the warning about it goes.
    w.table.set({**TABLE, "a100": "resource=nvidia.com/gpu, gpu-product=NVIDIA-A100-SXM4-80GB,"
                 " on-demand=4.1"})  # fmt: skip
    await w.tick()
    entry = w.book.get(KEY)
    assert entry is not None and [c.shape.name for c in entry.shapes] == ["h100", SLICE, "a100"]
    assert entry.shape_problem is not None and "a100 is not one" not in entry.shape_problem
    warnings = [e for e in w.events.events if e[1] == "InvalidAnnotation"]
    assert len(warnings) == 2 and "a100 is not one" not in warnings[1][2]


async def test_an_opted_out_models_shape_companions_are_deleted() -> None:
    w = World()
    await w.settle()
    w.companion_map["default/old"] = {
        SLICE: CompanionInfo("default", "old-mig-3g.40gb", "old", 1, 1, "h")
    }
    await w.tick()
    assert ("delete", "old-mig-3g.40gb") in w.log
    assert set(w.companion_map) == {KEY}


async def test_a_follower_writes_nothing() -> None:
    w = World(leader=False)
    for _ in range(3):
        await w.tick()
    assert w.log == []
