"""Provider presets, the spot companion Deployment and the on-demand pin.

Covers:
- each preset tells spot from on-demand nodes by its labels (the sandbox's
  node labels, which carry every provider's), and sees its own notice
  taints; extra notice taints; a custom provider and its checks;
- the companion: name, owner reference, no opt-in label and none of the
  user's annotations, pod labels = the user's + the capacity-type label
  (also in its selector), the provider's spot selector and tolerations, a
  zone spread constraint, the user's strategy kept, replicas;
- the template hash: the pin and the replica count do not change it; a
  user template change does; a provider change does;
- the pin: nodeSelector for Karpenter/EKS, an affinity ``NotIn`` joined to
  every user term for GKE/AKS; pinning twice is a no-op; unpinning gives
  back the user's template exactly, even when the user had their own
  node affinity;
- bad input.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from loadtests.sandbox.cluster.nodes import DEFAULT_POOL, node_object
from scaler.policy.placement.availability import CapacityType
from scaler.policy.placement.companion import (
    CAPACITY_TYPE_LABEL,
    COMPANION_OF,
    ON_DEMAND_PIN,
    TEMPLATE_HASH,
    build_companion,
    companion_name,
    companion_outdated,
    is_pinned,
    pin_patch,
    template_hash,
    unpin_patch,
    user_template,
)
from scaler.policy.placement.providers import PRESETS, Toleration, custom_preset, preset

KARPENTER = PRESETS["karpenter"]
GKE = PRESETS["gke"]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies it."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def deployment(**pod_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "llama",
            "namespace": "ml",
            "uid": "uid-1",
            "labels": {"autoscaling.tidal.dev/enabled": "true", "team": "ml"},
            "annotations": {"autoscaling.tidal.dev/max-scale": "8"},
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "llama"}},
            "strategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"app": "llama"}},
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm:1",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                    **pod_spec,
                },
            },
        },
    }


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_read_the_sandbox_nodes(name: str) -> None:
    p = PRESETS[name]
    for spec in DEFAULT_POOL:
        labels = node_object(spec, address="127.0.0.1")["metadata"]["labels"]
        assert p.capacity_of(labels) == CapacityType(spec.capacity_type), (name, spec.name)


@pytest.mark.parametrize(
    ("name", "taint", "noticed"),
    [
        pytest.param("karpenter", "karpenter.sh/disrupted", True, id="karpenter"),
        pytest.param("gke", "cloud.google.com/impending-node-termination", True, id="gke"),
        pytest.param("eks", "aws-node-termination-handler/spot-itn", True, id="eks nth"),
        pytest.param("karpenter", "node.kubernetes.io/unschedulable", False, id="a cordon alone"),
        pytest.param("aks", "karpenter.sh/disrupted", False, id="aks: none built in"),
    ],
)
def test_notice_taints(name: str, taint: str, noticed: bool) -> None:
    assert PRESETS[name].under_notice([{"key": taint, "effect": "NoSchedule"}]) is noticed


def test_extra_notice_taints_and_custom() -> None:
    p = preset("aks", extra_notice_taints=["example.com/evicting"])
    assert p.under_notice([{"key": "example.com/evicting"}])
    custom = custom_preset(
        capacity_label="example.com/lifecycle",
        spot_value="spot",
        on_demand_value=None,
        spot_tolerations=[Toleration("example.com/lifecycle", "spot")],
        notice_taints=["example.com/going"],
    )
    assert custom.capacity_of({"example.com/lifecycle": "spot"}) is CapacityType.SPOT
    assert custom.capacity_of({}) is CapacityType.ON_DEMAND
    assert custom.under_notice([{"key": "example.com/going"}])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        pytest.param(lambda: preset("azure"), "unknown provider 'azure'; allowed: ", id="name"),
        pytest.param(
            lambda: custom_preset(capacity_label="a=b", spot_value="s", on_demand_value=None),
            "must be a label key",
            id="label",
        ),
        pytest.param(
            lambda: custom_preset(capacity_label="a", spot_value="x", on_demand_value="x"),
            "must differ",
            id="same values",
        ),
    ],
)
def test_provider_bad_input(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_companion_shape() -> None:
    user = deployment(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    comp = build_companion(user, preset=GKE, replicas=3)
    meta = comp["metadata"]
    assert meta["name"] == companion_name("llama") == "llama-spot"
    assert meta["namespace"] == "ml"
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "llama",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert "autoscaling.tidal.dev/enabled" not in meta["labels"]
    assert meta["labels"]["team"] == "ml"
    assert set(meta["annotations"]) == {COMPANION_OF, TEMPLATE_HASH}
    spec = comp["spec"]
    assert spec["replicas"] == 3
    assert spec["strategy"] == {"type": "RollingUpdate"}
    assert spec["selector"] == {"matchLabels": {"app": "llama", CAPACITY_TYPE_LABEL: "spot"}}
    template = spec["template"]
    assert template["metadata"]["labels"] == {"app": "llama", CAPACITY_TYPE_LABEL: "spot"}
    pod = template["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-spot": "true"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists"},
        {
            "key": "cloud.google.com/gke-spot",
            "operator": "Equal",
            "value": "true",
            "effect": "NoSchedule",
        },
    ]
    assert pod["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": spec["selector"],
        }
    ]
    # The user's object is not modified.
    assert user == deployment(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])


def test_user_zone_constraint_is_kept_not_doubled() -> None:
    own = {
        "maxSkew": 2,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
    }
    comp = build_companion(
        deployment(topologySpreadConstraints=[own]), preset=KARPENTER, replicas=1
    )
    assert comp["spec"]["template"]["spec"]["topologySpreadConstraints"] == [own]


@pytest.mark.parametrize(
    "p", [KARPENTER, GKE, PRESETS["eks"], PRESETS["aks"]], ids=lambda p: p.name
)
def test_pin_and_unpin_round_trip(p: Any) -> None:
    user_affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]},
                    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]},
                ]
            }
        }
    }
    original = deployment(affinity=user_affinity, nodeSelector={"pool": "gpu"})
    pinned = merge_patch(original, pin_patch(original, p))
    assert is_pinned(pinned, p)
    assert pin_patch(pinned, p) is None
    pod = pinned["spec"]["template"]["spec"]
    if p.on_demand.as_selector is not None:
        assert pod["nodeSelector"] == {"pool": "gpu", **p.on_demand.as_selector}
        assert pod["affinity"] == user_affinity
    else:
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert len(terms) == 2
        for term in terms:
            assert term["matchExpressions"][-1] == p.on_demand.as_dict()
    assert json.loads(pinned["metadata"]["annotations"][ON_DEMAND_PIN]) == p.on_demand.as_dict()
    # The companion is built from the user's template, not the pinned one.
    assert user_template(pinned) == user_template(original)
    assert template_hash(pinned, p) == template_hash(original, p)
    unpinned = merge_patch(pinned, unpin_patch(pinned))
    assert unpinned == original
    assert unpin_patch(unpinned) is None


@pytest.mark.parametrize("p", [KARPENTER, GKE], ids=lambda p: p.name)
def test_pin_without_any_user_requirement_leaves_nothing_behind(p: Any) -> None:
    original = deployment()
    pinned = merge_patch(original, pin_patch(original, p))
    assert {"affinity", "nodeSelector"} & set(pinned["spec"]["template"]["spec"])
    unpinned = merge_patch(pinned, unpin_patch(pinned))
    assert unpinned == original
    # Not even an empty map: the patch removes the field itself.
    assert unpin_patch(pinned)["spec"]["template"]["spec"] in (
        {"nodeSelector": None},
        {"affinity": None},
    )


def test_template_hash_rolls_only_on_template_changes() -> None:
    user = deployment()
    comp = build_companion(user, preset=KARPENTER, replicas=2)
    assert not companion_outdated(comp, user, KARPENTER)
    scaled = copy.deepcopy(user)
    scaled["spec"]["replicas"] = 7
    scaled["metadata"]["annotations"]["autoscaling.tidal.dev/status"] = "{}"
    assert not companion_outdated(comp, scaled, KARPENTER)
    pinned = merge_patch(user, pin_patch(user, KARPENTER))
    assert not companion_outdated(comp, pinned, KARPENTER)
    changed = copy.deepcopy(pinned)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm:2"
    assert companion_outdated(comp, changed, KARPENTER)
    assert (
        build_companion(changed, preset=KARPENTER, replicas=2)["spec"]["template"]["spec"][
            "containers"
        ][0]["image"]
        == "vllm:2"
    )
    assert companion_outdated(comp, user, GKE)


@pytest.mark.parametrize(
    ("mutate", "replicas", "match"),
    [
        pytest.param(lambda d: d["metadata"].pop("uid"), 1, "needs metadata.name", id="no uid"),
        pytest.param(lambda d: d["spec"].pop("selector"), 1, "has no spec.selector", id="selector"),
        pytest.param(lambda d: None, -1, "replicas must be >= 0", id="negative replicas"),
        pytest.param(
            lambda d: d["metadata"].update(name="x" * 250),
            1,
            "too long for a spot companion",
            id="name",
        ),
    ],
)
def test_companion_bad_input(mutate: Any, replicas: int, match: str) -> None:
    user = deployment()
    mutate(user)
    with pytest.raises(ValueError, match=match):
        build_companion(user, preset=KARPENTER, replicas=replicas)
