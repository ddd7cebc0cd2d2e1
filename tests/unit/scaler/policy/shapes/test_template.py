"""A shape's pod template from the user's: device, nodes, arguments, environment, label.

Covers: the GPU device in the container that asks for one is swapped for
the shape's resource and count (limits, and requests where the container
had them), other resources kept; a sidecar is left alone and a template
with devices in two containers is refused; the user's GPU node-selector
labels give way to the shape's, other selectors stay; args override flags
where they are (``--flag value``, ``--flag=value``, in ``command`` too)
and add the rest; env sets or replaces by name; the pods carry the shape's
label; the user's template is not changed; which listed shape a template
already is.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scaler.policy.shapes.declarations import ChosenShape, ShapeTable, parse_shape_table
from scaler.policy.shapes.template import SHAPE_LABEL, shape_template, template_shape

Obj = dict[str, Any]
H100 = "NVIDIA-H100-80GB-HBM3"


def table() -> ShapeTable:
    parsed, problems = parse_shape_table(
        {
            "h100": f"resource=nvidia.com/gpu, gpu-product={H100}, on-demand=12.29",
            "h100-x2": f"resource=nvidia.com/gpu, count=2, gpu-product={H100}, on-demand=24.58",
            "mig-3g.40gb": f"resource=nvidia.com/mig-3g.40gb, gpu-product={H100}, on-demand=5.27",
            "l4": "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4, select.pool=inference,"
            " on-demand=0.8",
        }
    )
    assert problems == ()
    return parsed


def chosen(
    name: str, *, args: tuple[str, ...] = (), env: tuple[tuple[str, str], ...] = ()
) -> ChosenShape:
    return ChosenShape(table().shapes[name], args, env)


def user_template(**container: Any) -> Obj:
    main: Obj = {
        "name": "vllm",
        "image": "vllm/vllm-openai",
        "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "32768"],
        "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}}],
        "resources": {
            "limits": {"nvidia.com/gpu": "1", "memory": "64Gi"},
            "requests": {"nvidia.com/gpu": "1", "cpu": "8"},
        },
    }
    main.update(container)
    return {
        "metadata": {"labels": {"app": "llama"}},
        "spec": {
            "nodeSelector": {
                "nvidia.com/gpu.product": H100,
                "karpenter.sh/capacity-type": "on-demand",
            },
            "containers": [main, {"name": "proxy", "image": "envoy"}],
        },
    }


def test_the_device_nodes_and_label_follow_the_shape() -> None:
    template = user_template()
    before = copy.deepcopy(template)
    out = shape_template(template, chosen("mig-3g.40gb"))
    assert template == before  # the user's is not changed
    main, sidecar = out["spec"]["containers"]
    assert main["resources"] == {
        "limits": {"memory": "64Gi", "nvidia.com/mig-3g.40gb": "1"},
        "requests": {"cpu": "8", "nvidia.com/mig-3g.40gb": "1"},
    }
    assert sidecar == {"name": "proxy", "image": "envoy"}
    assert out["spec"]["nodeSelector"] == {
        "karpenter.sh/capacity-type": "on-demand",
        "nvidia.com/gpu.product": H100,
    }
    assert out["metadata"]["labels"] == {"app": "llama", SHAPE_LABEL: "mig-3g.40gb"}


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param(
            {"limits": {"nvidia.com/mig-1g.10gb": 1}},
            {"limits": {"nvidia.com/gpu": "2"}},
            id="limits-only",
        ),
        pytest.param(
            {"limits": {"nvidia.com/gpu.shared": "1", "cpu": "4"}, "requests": {"cpu": "2"}},
            {"limits": {"cpu": "4", "nvidia.com/gpu": "2"}, "requests": {"cpu": "2"}},
            id="time-sliced-and-no-device-request",
        ),
        pytest.param({}, {"limits": {"nvidia.com/gpu": "2"}}, id="none-asked"),
    ],
)
def test_resource_swap(resources: Obj, expected: Obj) -> None:
    out = shape_template(user_template(resources=resources), chosen("h100-x2"))
    assert out["spec"]["containers"][0]["resources"] == expected


def test_the_container_that_asks_for_the_device_gets_the_shape() -> None:
    template = user_template(resources={})
    template["spec"]["containers"][1]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    out = shape_template(template, chosen("l4"))
    assert out["spec"]["containers"][1]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert out["spec"]["containers"][0]["resources"] == {}
    assert out["spec"]["nodeSelector"] == {
        "karpenter.sh/capacity-type": "on-demand",
        "nvidia.com/gpu.product": "NVIDIA-L4",
        "pool": "inference",
    }


def test_devices_in_two_containers_are_refused() -> None:
    template = user_template()
    template["spec"]["containers"][1]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    with pytest.raises(ValueError, match="containers vllm, proxy all ask for GPU devices"):
        shape_template(template, chosen("l4"))


@pytest.mark.parametrize(
    ("container", "args", "expected"),
    [
        pytest.param(
            {"args": ["--model", "m", "--max-model-len", "32768", "--port", "8000"]},
            ("--max-model-len", "8192", "--gpu-memory-utilization=0.95"),
            {"args": ["--model", "m", "--max-model-len", "8192", "--port", "8000",
                      "--gpu-memory-utilization=0.95"]},
            id="replace-and-add",
        ),
        pytest.param(
            {"args": ["--max-model-len=32768", "--enforce-eager"]},
            ("--max-model-len", "4096", "--enforce-eager"),
            {"args": ["--max-model-len", "4096", "--enforce-eager"]},
            id="equals-form-and-a-bare-flag",
        ),
        pytest.param(
            {"command": ["vllm", "serve", "m", "--max-num-seqs", "256"], "args": ["--port", "80"]},
            ("--max-num-seqs", "64"),
            {"command": ["vllm", "serve", "m", "--max-num-seqs", "64"], "args": ["--port", "80"]},
            id="in-the-command",
        ),
        pytest.param(
            {"args": []},
            ("--max-model-len", "8192"),
            {"args": ["--max-model-len", "8192"]},
            id="no-args-yet",
        ),
    ],
)  # fmt: skip
def test_args_override(container: Obj, args: tuple[str, ...], expected: Obj) -> None:
    out = shape_template(user_template(**container), chosen("h100", args=args))
    main = out["spec"]["containers"][0]
    assert {k: main[k] for k in expected} == expected


def test_env_sets_or_replaces_by_name() -> None:
    env = (("HF_TOKEN", "plain"), ("VLLM_ATTENTION_BACKEND", "FLASHINFER"))
    out = shape_template(user_template(), chosen("l4", env=env))
    assert out["spec"]["containers"][0]["env"] == [
        {"name": "HF_TOKEN", "value": "plain"},
        {"name": "VLLM_ATTENTION_BACKEND", "value": "FLASHINFER"},
    ]


def test_which_listed_shape_a_template_already_is() -> None:
    listed = [chosen("mig-3g.40gb"), chosen("h100"), chosen("h100-x2")]
    assert template_shape(user_template(), listed) == "h100"
    two = user_template(resources={"limits": {"nvidia.com/gpu": "2"}})
    assert template_shape(two, listed) == "h100-x2"
    elsewhere = user_template()
    elsewhere["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-L4"}
    assert template_shape(elsewhere, listed) is None
    for shape in listed:
        built = shape_template(user_template(), shape)
        assert template_shape(built, [shape]) == shape.shape.name
