"""The Placer: per-target placement state and orphan companions.

Covers, with a fake view of nodes and companions: a fresh spot target plans
the companion and the pin; once the companion exists with the right hash
and the Deployment is pinned, only the split remains; a user template
change makes the companion outdated; the fallback state is kept between
decisions (a notice on a spot node covers, the next plan still does);
orphan companions; forget; a switch from on-demand keeps the running on-demand replicas as
cover until spot is Ready.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from scaler.kube.objects import deployment_from_raw
from scaler.kube.types import CompanionInfo, NodeInfo, PodInfo, TargetSnapshot
from scaler.placement.placer import Placer, pair_counts
from scaler.policy import PlacementConfig
from scaler.policy.placement.companion import pin_patch, template_hash
from scaler.policy.placement.providers import PRESETS

KARPENTER = PRESETS["karpenter"]
SPOT = PlacementConfig(policy="spot-with-on-demand-baseline", on_demand_baseline=1)
T0 = 1_800_000_000.0


def merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


RAW: dict[str, Any] = {
    "metadata": {"name": "llama", "namespace": "ml", "uid": "u1", "annotations": {}},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "llama"}},
        "template": {
            "metadata": {"labels": {"app": "llama"}},
            "spec": {"containers": [{"name": "v", "image": "vllm:1"}]},
        },
    },
}


class View:
    def __init__(self) -> None:
        self.node_map = {
            "spot-1": NodeInfo("spot-1", {"karpenter.sh/capacity-type": "spot"}),
            "od-1": NodeInfo(
                "od-1",
                {
                    "karpenter.sh/capacity-type": "on-demand",
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                },
            ),
        }
        self.companion_map: dict[str, CompanionInfo] = {}

    def nodes(self) -> dict[str, NodeInfo]:
        return self.node_map

    def companions(self) -> dict[str, CompanionInfo]:
        return self.companion_map


def pod(name: str, node: str | None, **kw: Any) -> PodInfo:
    base = PodInfo(
        namespace="ml",
        name=name,
        labels={"app": "llama"},
        ip="10.0.0.1",
        ready=True,
        terminating=False,
        node=node,
        phase="Running",
        created_at=T0,
        gpus=1,
    )
    return replace(base, **kw)


def test_plan_lifecycle_and_state() -> None:
    view = View()
    placer = Placer(view=view, preset=KARPENTER, hold_s=30.0)
    fresh = deployment_from_raw(RAW)
    plan = placer.plan(
        TargetSnapshot(fresh, ()),
        companion=placer.companion(fresh.key),
        placement=SPOT,
        target=4,
        state=None,
        now_wall=T0,
    )
    assert plan.ensure_companion and plan.pin
    assert (plan.on_demand_replicas, plan.companion_replicas) == (1, 3)

    pinned_raw = merge(RAW, pin_patch(RAW, KARPENTER))
    pinned = deployment_from_raw(pinned_raw)
    view.companion_map["ml/llama"] = CompanionInfo(
        "ml", "llama-spot", "llama", 3, 3, template_hash(pinned_raw, KARPENTER)
    )
    spot_pods = [pod(f"s{i}", "spot-1") for i in range(3)]
    plan = placer.plan(
        TargetSnapshot(pinned, tuple(spot_pods)),
        companion=placer.companion(pinned.key),
        placement=SPOT,
        target=4,
        state=plan.state,
        now_wall=T0 + 1,
    )
    assert not (plan.ensure_companion or plan.pin) and plan.events == ()

    # A notice on the spot node: covered now, and still next time (state kept).
    view.node_map["spot-1"] = NodeInfo(
        "spot-1",
        {"karpenter.sh/capacity-type": "spot"},
        ({"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},),
    )
    plan = placer.plan(
        TargetSnapshot(pinned, tuple(spot_pods)),
        companion=placer.companion(pinned.key),
        placement=SPOT,
        target=4,
        state=plan.state,
        now_wall=T0 + 2,
    )
    assert plan.on_demand_replicas == 4 and plan.events[0][0] == "SpotFallback"
    view.node_map["spot-1"] = NodeInfo("spot-1", {"karpenter.sh/capacity-type": "spot"})
    plan = placer.plan(
        TargetSnapshot(pinned, tuple(spot_pods)),
        companion=placer.companion(pinned.key),
        placement=SPOT,
        target=4,
        state=plan.state,
        now_wall=T0 + 3,
    )
    assert plan.on_demand_replicas == 4  # held: released only after the hold

    changed_raw = copy.deepcopy(pinned_raw)
    changed_raw["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm:2"
    plan = placer.plan(
        TargetSnapshot(deployment_from_raw(changed_raw), tuple(spot_pods)),
        companion=placer.companion(deployment_from_raw(changed_raw).key),
        placement=SPOT,
        target=4,
        state=plan.state,
        now_wall=T0 + 4,
    )
    assert plan.ensure_companion and not plan.pin


def test_orphans() -> None:
    view = View()
    placer = Placer(view=view, preset=KARPENTER)
    view.companion_map["ml/llama"] = CompanionInfo("ml", "llama-spot", "llama", 3, 3, "h")
    view.companion_map["ml/old"] = CompanionInfo("ml", "old-spot", "old", 1, 1, "h")
    assert [c.name for c in placer.orphans(["ml/llama"])] == ["old-spot"]


def test_switching_to_spot_keeps_on_demand_until_spot_is_ready() -> None:
    view = View()
    placer = Placer(view=view, preset=KARPENTER, hold_s=30.0)
    on_demand = [pod(f"o{i}", "od-1") for i in range(4)]
    d = deployment_from_raw(RAW)
    plan = placer.plan(
        TargetSnapshot(d, tuple(on_demand)),
        companion=placer.companion(d.key),
        placement=SPOT,
        target=4,
        state=None,
        now_wall=T0,
    )
    assert (plan.on_demand_replicas, plan.companion_replicas) == (4, 3)  # nothing dropped
    spot_ready = [*on_demand, *(pod(f"s{i}", "spot-1") for i in range(3))]
    plan = placer.plan(
        TargetSnapshot(d, tuple(spot_ready)),
        companion=placer.companion(d.key),
        placement=SPOT,
        target=4,
        state=plan.state,
        now_wall=T0 + 60,
    )
    plan = placer.plan(
        TargetSnapshot(d, tuple(spot_ready)),
        companion=placer.companion(d.key),
        placement=SPOT,
        target=4,
        state=plan.state,
        now_wall=T0 + 90,
    )
    assert plan.on_demand_replicas == 1


def test_pair_counts_count_both_halves_and_take_the_last_decided_scale() -> None:
    raw = copy.deepcopy(RAW)
    raw["status"] = {"readyReplicas": 1}
    d = deployment_from_raw(raw)
    companion = CompanionInfo("ml", "llama-spot", "llama", 3, 2, "h")
    # Alone: the Deployment's own counts.
    assert pair_counts(d, None, 7) == (1, 1)
    # With a companion: ready is both halves; current is the last decided
    # scale, not the sum (which includes on-demand cover and spot extras).
    assert pair_counts(d, companion, 3) == (3, 3)
    # No usable status yet (none, or not a count): the sum of both halves.
    assert pair_counts(d, companion, None) == (3, 4)
    assert pair_counts(d, companion, -1) == (3, 4)
    assert pair_counts(d, companion, "3") == (3, 4)
