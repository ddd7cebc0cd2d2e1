"""Schema and semantic validation of objects (no HTTP).

Covers: unknown fields refused under Strict with the real 400 wording,
warned and dropped under Warn, dropped silently under Ignore; wrong types
and enum values as 422 naming the field; Deployment rules (replicas >= 0,
selector required and matching the template labels, containers with name and
image); names as RFC 1123 subdomains; several causes bracketed as the real
server aggregates them; a bad fieldValidation value refused; the compiled
validator is compiled once per kind and reused.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadtests.sandbox.cluster import errors
from loadtests.sandbox.cluster.validation import _validator, validate_object


def deployment(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "llama"}},
            "template": {
                "metadata": {"labels": {"app": "llama"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    base["spec"].update(spec)
    return base


def check(obj: dict[str, Any], mode: str = "Strict") -> list[str]:
    return validate_object(
        obj, group="apps", version="v1", kind="Deployment", namespaced=True, field_validation=mode
    )


def test_valid_object_passes() -> None:
    assert check(deployment()) == []


def test_unknown_fields_by_mode() -> None:
    with pytest.raises(errors.BadRequest) as strict:
        check(deployment(bogus=1))
    assert strict.value.message == (
        'Deployment in version "v1" cannot be handled as a Deployment: '
        'strict decoding error: unknown field "spec.bogus"'
    )
    obj = deployment(bogus=1)
    assert check(obj, "Warn") == ['unknown field "spec.bogus"']
    assert "bogus" not in obj["spec"]
    obj = deployment(bogus=1)
    assert check(obj, "Ignore") == [] and "bogus" not in obj["spec"]
    with pytest.raises(errors.BadRequest, match="fieldValidation parameter unsupported"):
        check(deployment(), "Loud")


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        pytest.param(
            {"replicas": -2},
            "spec.replicas",
            "Invalid value: -2: must be greater than or equal to 0",
            id="negative",
        ),
        pytest.param(
            {"replicas": "x"},
            "spec.replicas",
            'Invalid value: "x": spec.replicas in body must be of type integer: "string"',
            id="type",
        ),
        pytest.param({"selector": None}, "spec.selector", "Required value", id="no-selector"),
        pytest.param(
            {"selector": {"matchLabels": {"app": "other"}}},
            "spec.template.metadata.labels",
            'Invalid value: map[string]string{"app":"llama"}: '
            "`selector` does not match template `labels`",
            id="selector-mismatch",
        ),
        pytest.param(
            {"strategy": {"type": "Sometimes"}},
            "spec.strategy.type",
            'Unsupported value: "Sometimes": supported values: "Recreate", "RollingUpdate"',
            id="enum",
        ),
    ],
)
def test_invalid_values(spec: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(errors.Invalid) as invalid:
        check(deployment(**spec))
    causes = invalid.value.details["causes"] if invalid.value.details else []
    assert {"field": field, "message": message} in [
        {"field": c["field"], "message": c["message"]} for c in causes
    ]
    assert invalid.value.message.startswith('Deployment.apps "llama" is invalid: ')


def test_several_causes_are_bracketed_and_names_checked() -> None:
    obj = deployment(replicas=-1)
    obj["metadata"]["name"] = "Bad_Name"
    obj["spec"]["template"]["spec"]["containers"] = [{"name": "c"}]
    with pytest.raises(errors.Invalid) as invalid:
        check(obj)
    message = invalid.value.message
    assert message.startswith('Deployment.apps "Bad_Name" is invalid: [')
    assert 'metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain' in message
    assert "spec.template.spec.containers[0].image: Required value" in message
    reasons = (
        {c["reason"] for c in invalid.value.details["causes"]} if invalid.value.details else set()
    )
    assert reasons == {"FieldValueInvalid", "FieldValueRequired"}


def test_validators_are_cached() -> None:
    _validator.cache_clear()
    for _ in range(5):
        check(deployment())
    info = _validator.cache_info()
    assert (info.misses, info.hits) == (1, 4)
