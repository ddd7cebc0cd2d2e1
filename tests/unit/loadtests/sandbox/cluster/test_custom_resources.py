"""Custom kinds from bundled CRDs: loading, schema conversion, defaults, rules, columns.

Covers: every bundled CRD loads and declares no validation rule the sandbox
cannot check; a manifest that is not a v1 CRD, or has a bad scope, is refused
by name; the OpenAPI-to-JSON-Schema conversion (closing objects only in the
strict set and not where unknown fields are preserved, ``nullable``,
boolean exclusive bounds, int-or-string) as seen through validation;
defaults fill absent fields at any depth, in lists and maps, and leave given
ones; a CRD rule is skipped where the value has the wrong type; printer
columns: the default Age column, and declared columns by type (JSON for a
map in a string column, nothing for a missing path or a wrong type).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from loadtests.sandbox.cluster import crd_columns, crd_rules, custom_resources
from loadtests.sandbox.cluster.custom_resources import CustomKind, load_crd

NOW = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)


def crd(schema: dict[str, Any], **version: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": True, "schema": {"openAPIV3Schema": schema}, **version},
                {"name": "v0", "served": False, "schema": {"openAPIV3Schema": schema}},
            ],
        },
    }


def widget(schema: dict[str, Any], **version: Any) -> CustomKind:
    (kind,) = load_crd(crd(schema, **version), source="test")
    return kind


def test_bundled_crds_load_and_every_rule_is_known() -> None:
    kinds = custom_resources.bundled_kinds()
    assert ("inference.networking.k8s.io", "v1", "InferencePool") in [
        (k.group, k.version, k.kind) for k in kinds
    ]
    for kind in kinds:
        assert crd_rules.unknown_rules(kind.schema) == [], kind.source


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"kind": "Deployment"}, "not a CustomResourceDefinition", id="kind"),
        pytest.param({"apiVersion": "apiextensions.k8s.io/v1beta1"}, "allowed:", id="version"),
    ],
)
def test_a_manifest_that_is_not_a_v1_crd_is_refused(change: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_crd({**crd({"type": "object"}), **change}, source="bad.yaml")


def test_a_bad_scope_is_refused() -> None:
    document = crd({"type": "object"})
    document["spec"]["scope"] = "Global"
    with pytest.raises(
        ValueError, match=re.escape("bad.yaml: scope 'Global'; allowed: Namespaced, Cluster")
    ):
        load_crd(document, source="bad.yaml")


def test_only_served_versions_become_kinds() -> None:
    kinds = load_crd(crd({"type": "object"}), source="test")
    assert [k.version for k in kinds] == ["v1"]
    assert kinds[0].list_kind == "WidgetList" and kinds[0].singular == "widget"
    assert kinds[0].definition_name == "com.example.v1.Widget"


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                "port": {"x-kubernetes-int-or-string": True},
                "note": {"type": "string", "nullable": True},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        }
    },
}


def test_conversion_closes_objects_only_when_strict_and_not_preserved() -> None:
    kind = widget(SCHEMA)
    strict = kind.definitions(strict=True)["com.example.v1.Widget"]
    loose = kind.definitions(strict=False)["com.example.v1.Widget"]
    spec = strict["properties"]["spec"]
    assert spec["additionalProperties"] is False
    assert "additionalProperties" not in spec["properties"]["free"]
    assert "additionalProperties" not in loose["properties"]["spec"]
    assert strict["properties"]["metadata"] == {
        "$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    }
    assert spec["properties"]["size"] == {"type": "integer", "exclusiveMinimum": 0}
    assert spec["properties"]["port"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert spec["properties"]["note"]["type"] == ["string", "null"]


def test_defaults_fill_what_is_absent_at_any_depth() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "mode": {"type": "string", "default": "fast"},
                    "ref": {
                        "type": "object",
                        "default": {},
                        "properties": {"kind": {"type": "string", "default": "Service"}},
                    },
                    "ports": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"protocol": {"type": "string", "default": "TCP"}},
                        },
                    },
                    "byName": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "object",
                            "properties": {"weight": {"type": "integer", "default": 1}},
                        },
                    },
                },
            }
        },
    }
    obj: dict[str, Any] = {
        "spec": {"mode": "slow", "ports": [{}, {"protocol": "UDP"}], "byName": {"a": {}}}
    }
    widget(schema).fill_defaults(obj)
    assert obj["spec"] == {
        "mode": "slow",
        "ref": {"kind": "Service"},
        "ports": [{"protocol": "TCP"}, {"protocol": "UDP"}],
        "byName": {"a": {"weight": 1}},
    }


def test_a_rule_is_not_run_over_a_value_of_the_wrong_type() -> None:
    pool = custom_resources.find("inference.networking.k8s.io", "v1", "InferencePool")
    assert pool is not None
    assert crd_rules.broken_rules({"spec": {"targetPorts": "8000"}}, pool.schema) == []
    twice = {"spec": {"targetPorts": [{"number": 1}, {"number": 1}]}}
    assert crd_rules.broken_rules(twice, pool.schema) == [
        ("spec.targetPorts", 'Invalid value: "array": port number must be unique')
    ]


def test_default_columns_are_name_and_age() -> None:
    printer = crd_columns.custom_printer(
        "inference.networking.k8s.io", "v1", "InferencePool", age=lambda v, now: f"age({v})"
    )
    assert printer is not None
    header, row = printer
    assert [c[0] for c in header] == ["Name", "Age"]
    created = {"metadata": {"name": "p", "creationTimestamp": "2026-09-01T11:00:00Z"}}
    assert row(created, NOW) == ["p", "age(2026-09-01T11:00:00Z)"]
    assert crd_columns.custom_printer("apps", "v1", "Deployment", age=lambda v, now: "") is None


@pytest.mark.parametrize(
    ("column_type", "path", "value", "cell"),
    [
        pytest.param("string", ".spec.selector", {"app": "x"}, '{"app":"x"}', id="map-as-json"),
        pytest.param("string", ".spec.ports[1].name", None, None, id="missing-index"),
        pytest.param("integer", ".spec.replicas", "3", None, id="wrong-type"),
        pytest.param("integer", "{.spec.replicas}", 3, 3, id="braced-path"),
        pytest.param("boolean", ".spec.on", True, True, id="boolean"),
    ],
)
def test_declared_columns_by_type(column_type: str, path: str, value: Any, cell: Any) -> None:
    column = custom_resources.PrinterColumn("X", column_type, path)
    header, row = crd_columns.printer_for((column,), age=lambda v, now: "")
    assert header == [("Name", "string", "name", 0), ("X", column_type, "", 0)]
    spec = {"selector": value, "replicas": value, "on": value, "ports": [{"name": "a"}]}
    assert row({"metadata": {"name": "w"}, "spec": spec}, NOW) == ["w", cell]
