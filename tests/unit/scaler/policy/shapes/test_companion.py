"""A shape's companion Deployment and a shape step's plan (scaler.policy.shapes.companion, .plan).

Covers: the companion is owned by the user's Deployment, runs the shape's
template, selects only its own pods, carries no opt-in label or user
annotation, and its hash moves with the user's template and the shape's
declaration but not with the scale or the on-demand pin; names too long are
refused. The plan: the user's Deployment takes the shape its template is,
a companion is made only for a shape bought, rebuilt when outdated, and a
companion of a shape no longer listed goes once the rest is Ready; Events
for a cap, a recovery and a change of shapes; without shapes nothing, or
leftover companions deleted once the user's Deployment serves.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scaler.policy.placement.companion import COMPANION_OF, OPT_IN_LABEL, TEMPLATE_HASH
from scaler.policy.shapes.availability import Turn
from scaler.policy.shapes.companion import (
    build_shape_companion,
    shape_companion_name,
    shape_template_hash,
)
from scaler.policy.shapes.declarations import ChosenShape, parse_shape_table
from scaler.policy.shapes.mix import Mix
from scaler.policy.shapes.plan import CompanionSeen, plan_shapes, plan_without_shapes
from scaler.policy.shapes.template import SHAPE_LABEL

PRODUCT = "NVIDIA-H100-80GB-HBM3"


def chosen(name: str = "mig-3g.40gb", args: tuple[str, ...] = ()) -> ChosenShape:
    resource = f"nvidia.com/{name}" if name.startswith("mig") else "nvidia.com/gpu"
    table, _ = parse_shape_table(
        {name: f"resource={resource}, gpu-product={PRODUCT}, on-demand=5.27"}
    )
    return ChosenShape(table.shapes[name], args)


def deployment() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "llama",
            "namespace": "models",
            "uid": "u-1",
            "labels": {"app": "llama", OPT_IN_LABEL: "true"},
            "annotations": {"placement.tidal.dev/shapes": "h100,mig-3g.40gb"},
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "llama"}},
            "strategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"app": "llama"}},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": PRODUCT},
                    "containers": [
                        {
                            "name": "vllm",
                            "args": ["--max-model-len", "131072"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


def test_the_companion_runs_the_shape_and_belongs_to_the_user() -> None:
    d = deployment()
    body = build_shape_companion(d, chosen(args=("--max-model-len", "32768")), replicas=3)
    meta, spec = body["metadata"], body["spec"]
    assert meta["name"] == "llama-mig-3g.40gb" and meta["namespace"] == "models"
    assert meta["ownerReferences"][0]["uid"] == "u-1"
    assert OPT_IN_LABEL not in meta["labels"] and meta["labels"][SHAPE_LABEL] == "mig-3g.40gb"
    assert meta["annotations"][COMPANION_OF] == "llama"
    assert "placement.tidal.dev/shapes" not in meta["annotations"]
    assert spec["replicas"] == 3 and spec["strategy"] == {"type": "RollingUpdate"}
    assert spec["selector"]["matchLabels"] == {"app": "llama", SHAPE_LABEL: "mig-3g.40gb"}
    pod = spec["template"]
    assert pod["metadata"]["labels"] == {"app": "llama", SHAPE_LABEL: "mig-3g.40gb"}
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/mig-3g.40gb": "1"}
    assert container["args"] == ["--max-model-len", "32768"]
    assert d == deployment()  # the user's is not changed


def test_the_hash_follows_the_template_and_the_shape_only() -> None:
    d = deployment()
    base = shape_template_hash(d, chosen())
    scaled = copy.deepcopy(d)
    scaled["spec"]["replicas"] = 9
    assert shape_template_hash(scaled, chosen()) == base
    assert shape_template_hash(d, chosen(args=("--max-num-seqs", "64"))) != base
    changed = copy.deepcopy(d)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm:v2"
    assert shape_template_hash(changed, chosen()) != base
    body = build_shape_companion(d, chosen(), replicas=0)
    assert body["metadata"]["annotations"][TEMPLATE_HASH] == base


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="too long"):
        shape_companion_name("x" * 250, "mig-3g.40gb")
    with pytest.raises(ValueError, match="replicas"):
        build_shape_companion(deployment(), chosen(), replicas=-1)
    broken = deployment()
    del broken["metadata"]["uid"]
    with pytest.raises(ValueError, match="uid"):
        build_shape_companion(broken, chosen(), replicas=1)


MIX = Mix({"mig-3g.40gb": 3}, 15.81, "3 x mig-3g.40gb at $15.81/h")


def test_the_plan_makes_companions_only_for_shapes_bought() -> None:
    plan = plan_shapes(
        asks={"h100": 1, "mig-3g.40gb": 3},
        listed=("h100", "mig-3g.40gb", "l4"),
        template_shape="h100",
        seen={},
        mix=MIX,
        before=MIX,
        all_ready=False,
    )
    assert plan.user_replicas == 1
    assert dict(plan.companions) == {"mig-3g.40gb": 3}  # no Deployment for the L4
    assert plan.ensure == ("mig-3g.40gb",) and plan.delete == ()
    assert plan.needs_writes({})
    current = {"mig-3g.40gb": CompanionSeen(3, 3, current=True)}
    steady = plan_shapes(
        asks={"mig-3g.40gb": 3},
        listed=("h100", "mig-3g.40gb"),
        template_shape="h100",
        seen=current,
        mix=MIX,
        before=MIX,
        all_ready=True,
    )
    assert steady.user_replicas == 0 and steady.ensure == ()
    assert not steady.needs_writes(current)
    outdated = {"mig-3g.40gb": CompanionSeen(3, 3, current=False)}
    rebuilt = plan_shapes(
        asks={"mig-3g.40gb": 3},
        listed=("h100", "mig-3g.40gb"),
        template_shape=None,
        seen=outdated,
        mix=MIX,
        before=MIX,
        all_ready=True,
    )
    assert rebuilt.ensure == ("mig-3g.40gb",)


def test_a_shape_no_longer_listed_goes_once_the_rest_is_ready() -> None:
    seen = {"l4": CompanionSeen(2, 2, current=True)}
    kwargs: dict[str, Any] = {
        "asks": {"h100": 2},
        "listed": ("h100",),
        "template_shape": "h100",
        "seen": seen,
        "mix": MIX,
        "before": MIX,
    }
    assert plan_shapes(**kwargs, all_ready=False).delete == ()
    assert plan_shapes(**kwargs, all_ready=True).delete == ("l4",)


def test_events_for_a_cap_a_recovery_and_a_change_of_shapes() -> None:
    before = Mix({"h100": 2}, 24.58, "2 x h100 at $24.58/h")
    plan = plan_shapes(
        asks={"mig-3g.40gb": 3},
        listed=("h100", "mig-3g.40gb"),
        template_shape="h100",
        seen={},
        mix=MIX,
        before=before,
        turns=(Turn("l4", out=True, why="stuck"), Turn("h100", out=False, why="1 ready")),
        all_ready=False,
    )
    assert plan.events == (
        ("ShapeUnavailable", "l4: stuck; the mix is now 3 x mig-3g.40gb at $15.81/h", True),
        ("ShapeRecovered", "h100 serves again (1 ready)", False),
        (
            "ShapesChanged",
            "now 3 x mig-3g.40gb at $15.81/h (was 2 x h100 at $24.58/h)",
            False,
        ),
    )


def test_without_shapes_leftover_companions_go_once_the_user_serves() -> None:
    assert plan_without_shapes(desired=2, user_ready=0, seen={}) is None
    seen = {"l4": CompanionSeen(1, 1, current=True)}
    waiting = plan_without_shapes(desired=2, user_ready=1, seen=seen)
    assert waiting is not None and waiting.delete == () and waiting.user_replicas == 2
    done = plan_without_shapes(desired=2, user_ready=2, seen=seen)
    assert done is not None and done.delete == ("l4",)
