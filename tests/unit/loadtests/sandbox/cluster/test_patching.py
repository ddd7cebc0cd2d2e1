"""Patch semantics of the emulated API server, without HTTP.

Covers: RFC 7386 merge (null deletes, lists replaced); RFC 6902 operations
(add/remove/replace/move/copy/test, ``-`` append, escaped pointers, errors);
strategic merge driven by the official schemas: containers by name, ports by
containerPort, env by name, conditions by type, ownerReferences by uid,
tolerations replaced, finalizers unioned, ``$patch: delete``,
``$patch: replace``, ``$retainKeys``, ``$setElementOrder``,
``$deleteFromPrimitiveList``; the inputs stay untouched.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadtests.sandbox.cluster import errors
from loadtests.sandbox.cluster.patching import (
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from loadtests.sandbox.cluster.schemas import definitions

DEFS = definitions(strict=False)
DEPLOYMENT = DEFS.kind_schema("apps", "v1", "Deployment")


def smp(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = apply_strategic_merge_patch(
        target, patch, defs=DEFS, schema=DEPLOYMENT
    )
    return result


def deployment() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "d",
            "finalizers": ["a"],
            "ownerReferences": [{"uid": "1", "name": "x"}, {"uid": "2", "name": "y"}],
        },
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "v:1",
                            "ports": [{"containerPort": 8000, "name": "http"}],
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        },
                        {"name": "side", "image": "s:1"},
                    ],
                    "tolerations": [{"key": "spot"}],
                    "volumes": [{"name": "v", "emptyDir": {}}],
                }
            },
        },
        "status": {"conditions": [{"type": "Available", "status": "False"}]},
    }


def test_merge_patch() -> None:
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2]}
    assert apply_merge_patch(target, {"a": {"b": None, "d": 3}, "l": [3]}) == {
        "a": {"c": 2, "d": 3},
        "l": [3],
    }
    assert target == {"a": {"b": 1, "c": 2}, "l": [1, 2]}


def test_json_patch_operations() -> None:
    doc = {"a": {"b/c": 1, "m~n": 2}, "l": [1, 2]}
    ops = [
        {"op": "add", "path": "/l/-", "value": 3},
        {"op": "add", "path": "/l/0", "value": 0},
        {"op": "replace", "path": "/a/b~1c", "value": 10},
        {"op": "remove", "path": "/a/m~0n"},
        {"op": "copy", "from": "/a/b~1c", "path": "/x"},
        {"op": "move", "from": "/x", "path": "/y"},
        {"op": "test", "path": "/y", "value": 10},
    ]
    assert apply_json_patch(doc, ops) == {"a": {"b/c": 10}, "l": [0, 1, 2, 3], "y": 10}
    assert doc["l"] == [1, 2]


@pytest.mark.parametrize(
    ("ops", "error"),
    [
        pytest.param([{"op": "test", "path": "/a", "value": 2}], errors.Invalid, id="test-fails"),
        pytest.param([{"op": "remove", "path": "/nope"}], errors.Invalid, id="remove-missing"),
        pytest.param(
            [{"op": "replace", "path": "/nope", "value": 1}], errors.Invalid, id="replace-missing"
        ),
        pytest.param([{"op": "frob", "path": "/a"}], errors.BadRequest, id="unknown-op"),
        pytest.param({"op": "add"}, errors.BadRequest, id="not-a-list"),
        pytest.param([{"op": "add", "path": "a", "value": 1}], errors.BadRequest, id="bad-pointer"),
    ],
)
def test_json_patch_errors(ops: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        apply_json_patch({"a": 1}, ops)


def test_strategic_merge_by_keys() -> None:
    original = deployment()
    patched = smp(
        original,
        {
            "metadata": {"finalizers": ["b"], "ownerReferences": [{"uid": "2", "name": "z"}]},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "vllm",
                                "image": "v:2",
                                "ports": [{"containerPort": 9000}],
                                "env": [{"name": "B", "value": "3"}],
                            }
                        ],
                        "tolerations": [{"key": "gpu"}],
                    }
                }
            },
            "status": {"conditions": [{"type": "Available", "status": "True"}]},
        },
    )
    spec = patched["spec"]["template"]["spec"]
    vllm = spec["containers"][0]
    assert [c["name"] for c in spec["containers"]] == ["vllm", "side"]
    assert vllm["image"] == "v:2"
    assert [p["containerPort"] for p in vllm["ports"]] == [8000, 9000]
    assert vllm["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]
    assert spec["tolerations"] == [{"key": "gpu"}]  # atomic list: replaced
    assert patched["metadata"]["finalizers"] == ["a", "b"]
    assert patched["metadata"]["ownerReferences"] == [
        {"uid": "1", "name": "x"},
        {"uid": "2", "name": "z"},
    ]
    assert patched["status"]["conditions"] == [{"type": "Available", "status": "True"}]
    assert original == deployment()


def test_strategic_merge_directives() -> None:
    patched = smp(
        deployment(),
        {
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {
                "template": {
                    "spec": {
                        "$setElementOrder/containers": [{"name": "side"}, {"name": "vllm"}],
                        "containers": [
                            {"name": "vllm", "env": [{"name": "A", "$patch": "delete"}]},
                        ],
                        "volumes": [
                            {
                                "name": "v",
                                "hostPath": {"path": "/x"},
                                "$retainKeys": ["name", "hostPath"],
                            }
                        ],
                    }
                }
            },
        },
    )
    spec = patched["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["side", "vllm"]
    assert spec["containers"][1]["env"] == [{"name": "B", "value": "2"}]
    assert spec["volumes"] == [{"name": "v", "hostPath": {"path": "/x"}}]
    assert patched["metadata"]["finalizers"] == []
    replaced = smp(
        deployment(),
        {
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "only", "image": "o"}, {"$patch": "replace"}]}
                }
            }
        },
    )
    assert replaced["spec"]["template"]["spec"]["containers"] == [{"name": "only", "image": "o"}]
    whole = smp(
        deployment(), {"spec": {"template": {"$patch": "replace", "spec": {"containers": []}}}}
    )
    assert whole["spec"]["template"] == {"spec": {"containers": []}}


def test_strategic_merge_needs_merge_key() -> None:
    with pytest.raises(errors.BadRequest, match="does not contain declared merge key: name"):
        smp(deployment(), {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}})
