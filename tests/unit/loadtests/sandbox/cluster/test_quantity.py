"""Quantities written as a real API server writes them (``resource.Quantity``).

Covers: ``canonical_quantity`` gives Kubernetes' canonical string for numbers
and for every suffix family (decimal SI, binary SI, exponent), including the
cases where the format falls back (a binary value under 1024 or not whole
is written in decimal SI), rounding below one nano-unit, zero and negative
values, and refuses what is not a quantity with a message naming the value;
``canonicalize_quantities`` finds quantity fields through the official schema
in pod templates, pod overhead, volumes and Node status, leaves other fields
alone, and reports a bad value as a 400 naming the field.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadtests.sandbox.cluster.errors import BadRequest
from loadtests.sandbox.cluster.quantity import canonical_quantity, parse_quantity
from loadtests.sandbox.cluster.quantity_fields import canonicalize_quantities

# The canonical forms a Kubernetes 1.32 API server returns for these inputs
# (resource.MustParse(x).String()).
CANONICAL = [
    (1, "1"),
    (8, "8"),
    (0.5, "500m"),
    (2.0, "2"),
    (0, "0"),
    ("1", "1"),
    ("1.0", "1"),
    ("1000m", "1"),
    ("1500m", "1500m"),
    ("0.1", "100m"),
    ("100m", "100m"),
    ("1000", "1k"),
    ("1500", "1500"),
    ("1000000", "1M"),
    ("1500000", "1500k"),
    ("2048", "2048"),
    ("1k", "1k"),
    ("1Gi", "1Gi"),
    ("16Gi", "16Gi"),
    ("1024Mi", "1Gi"),
    ("1536Mi", "1536Mi"),
    ("1.5Gi", "1536Mi"),
    ("0.5Ki", "512"),
    ("1.5Ki", "1536"),
    ("1e3", "1e3"),
    ("1.5e3", "1500"),
    ("100e-3", "100e-3"),
    ("0.1n", "1n"),
    ("-1", "-1"),
    ("-1500m", "-1500m"),
    ("1E", "1E"),
]


@pytest.mark.parametrize(("value", "canonical"), CANONICAL)
def test_canonical_quantity_matches_kubernetes(value: str | float, canonical: str) -> None:
    assert canonical_quantity(value) == canonical


@pytest.mark.parametrize(("value", "canonical"), CANONICAL)
def test_canonical_form_keeps_the_amount_and_is_stable(value: str | float, canonical: str) -> None:
    if value != "0.1n":  # rounded up to one nano-unit on purpose
        assert parse_quantity(canonical) == pytest.approx(parse_quantity(value))
    assert canonical_quantity(canonical) == canonical


@pytest.mark.parametrize("value", ["lots", "", "1Qi", "1.2.3", "--1", True])
def test_not_a_quantity_is_refused_naming_it(value: Any) -> None:
    with pytest.raises(ValueError, match=r"quantity .* (is not valid|is not a number)"):
        canonical_quantity(value)


def _deployment(resources: dict[str, Any], **pod: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama", "annotations": {"note": "1000"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "llama"}},
            "template": {
                "metadata": {"labels": {"app": "llama"}},
                "spec": {
                    "containers": [{"name": "vllm", "image": "v:1", "resources": resources}],
                    "initContainers": [
                        {"name": "fetch", "image": "f:1", "resources": {"limits": {"cpu": 2.0}}}
                    ],
                    **pod,
                },
            },
        },
    }


def test_quantity_fields_of_a_deployment_are_canonical_and_others_untouched() -> None:
    obj = _deployment(
        {"limits": {"nvidia.com/gpu": 1, "memory": "1024Mi"}, "requests": {"cpu": 0.5}},
        overhead={"cpu": "250m", "memory": 1000},
        volumes=[{"name": "cache", "emptyDir": {"sizeLimit": "2048Mi"}}],
    )
    canonicalize_quantities(obj, group="apps", version="v1", kind="Deployment")
    pod = obj["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"] == {
        "limits": {"nvidia.com/gpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "500m"},
    }
    assert pod["initContainers"][0]["resources"] == {"limits": {"cpu": "2"}}
    assert pod["overhead"] == {"cpu": "250m", "memory": "1k"}
    assert pod["volumes"][0]["emptyDir"]["sizeLimit"] == "2Gi"
    # Not quantities: left exactly as sent.
    assert obj["spec"]["replicas"] == 1
    assert obj["metadata"]["annotations"] == {"note": "1000"}


def test_node_capacity_and_allocatable_are_canonical() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n"},
        "status": {
            "capacity": {"cpu": 96, "memory": "1179648Mi", "nvidia.com/gpu": 8},
            "allocatable": {"pods": 110, "cpu": "95500m"},
        },
    }
    canonicalize_quantities(node, group="", version="v1", kind="Node")
    assert node["status"] == {
        "capacity": {"cpu": "96", "memory": "1152Gi", "nvidia.com/gpu": "8"},
        "allocatable": {"pods": "110", "cpu": "95500m"},
    }


@pytest.mark.parametrize("bad", ["lots", True, {"n": 1}])
def test_a_bad_quantity_is_a_400_naming_the_field(bad: Any) -> None:
    obj = _deployment({"limits": {"cpu": bad}})
    with pytest.raises(BadRequest) as refused:
        canonicalize_quantities(obj, group="apps", version="v1", kind="Deployment")
    message = refused.value.message
    assert message.startswith('Deployment in version "v1" cannot be handled as a Deployment:')
    assert "spec.template.spec.containers[0].resources.limits.cpu" in message


def test_a_kind_without_a_schema_is_left_alone() -> None:
    obj = {"spec": {"resources": {"limits": {"cpu": 1}}}}
    canonicalize_quantities(obj, group="example.com", version="v1", kind="Widget")
    assert obj == {"spec": {"resources": {"limits": {"cpu": 1}}}}
