"""Checking objects against the official schemas, and a few semantic rules.

Two kinds of finding, as on the real server:

- **unknown fields** (a key the schema does not declare). With
  ``fieldValidation=Strict`` the write fails with 400 ``BadRequest``
  (``Deployment in version "v1" cannot be handled as a Deployment: strict
  decoding error: unknown field "spec.x"``); with ``Warn`` (the default) it
  succeeds and each field comes back in a ``Warning`` header; with
  ``Ignore`` nothing is said. The unknown fields are dropped before storing,
  as decoding into Go types drops them.
- **invalid values**: wrong types, bad enum values, values outside a schema's
  bounds (worded as the real server words them), the semantic rules the
  real validators enforce that a schema cannot say (replicas not negative,
  selector matching the template's labels, names as RFC 1123 subdomains,
  required fields), and a custom resource's CRD rules (``crd_rules``).
  These are 422 ``Invalid`` naming each field. (The real
  server rejects a wrong JSON type earlier, while decoding, with a 400; here
  it is a 422 with the field named, which is what clients need to act on.)

Validation uses the ``-strict`` schema set so one pass finds both kinds.
Compiling a validator costs ~9 ms and running a compiled one ~0.2 ms, so
validators are built once per kind and kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from referencing import Registry, Resource

from loadtests.sandbox.cluster.crd_rules import rule_findings
from loadtests.sandbox.cluster.errors import BadRequest, Invalid
from loadtests.sandbox.cluster.schemas import definitions

__all__ = ["FieldValidation", "Findings", "validate_object"]

_DEFS_URI = "https://kubernetes.io/api/_definitions.json"
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)

FieldValidation = str  # "Strict", "Warn", "Ignore"


@dataclass(slots=True)
class Findings:
    unknown: list[str] = field(default_factory=list)  # dotted field paths
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (field, message)


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number"}


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return _JSON_TYPES.get(type(value), "null")


@cache
def _validator(group: str, version: str, kind: str) -> jsonschema.protocols.Validator | None:
    defs = definitions(strict=True)
    name = defs.name_for(group, version, kind)
    if name is None:
        return None
    registry: Registry[Any] = Registry().with_resource(
        _DEFS_URI, Resource.from_contents(defs.document)
    )
    root = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://kubernetes.io/api/root/{name}",
        "$ref": f"/api/_definitions.json#/$defs/{name}",
    }
    validator: jsonschema.protocols.Validator = jsonschema.Draft202012Validator(
        root, registry=registry
    )
    return validator


def _schema_findings(obj: dict[str, Any], group: str, version: str, kind: str) -> Findings:
    findings = Findings()
    validator = _validator(group, version, kind)
    if validator is None:
        return findings
    for error in validator.iter_errors(obj):
        _classify(error, findings)
    return findings


def _classify(error: jsonschema.ValidationError, findings: Findings) -> None:
    where = list(error.absolute_path)
    if error.validator == "additionalProperties":
        declared = set((error.schema or {}).get("properties", {}) or {})
        instance = error.instance if isinstance(error.instance, dict) else {}
        for key in instance:
            if key not in declared:
                findings.unknown.append(_path([*where, key]))
        return
    if error.validator in ("oneOf", "anyOf") and error.context:
        # IntOrString / Quantity: report the value, not every branch.
        allowed = sorted({str(c.validator_value) for c in error.context if c.validator == "type"})
        findings.invalid.append(
            (
                _path(where),
                f"Invalid value: {_go_value(error.instance)}: {_path(where)} in body must be "
                f"of type {' or '.join(allowed) or 'a valid value'}: "
                f'"{_type_name(error.instance)}"',
            )
        )
        return
    if error.validator == "type":
        wanted = error.validator_value
        wanted_list = [t for t in (wanted if isinstance(wanted, list) else [wanted]) if t != "null"]
        findings.invalid.append(
            (
                _path(where),
                f"Invalid value: {_go_value(error.instance)}: {_path(where)} in body must be of "
                f'type {wanted_list[0] if wanted_list else "null"}: "{_type_name(error.instance)}"',
            )
        )
        return
    if error.validator == "enum":
        supported = ", ".join(_go_value(v) for v in error.validator_value)
        findings.invalid.append(
            (
                _path(where),
                f"Unsupported value: {_go_value(error.instance)}: supported values: {supported}",
            )
        )
        return
    if error.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        for name in missing or ["?"]:
            findings.invalid.append((_path([*where, name]), "Required value"))
        return
    bound = _bound_message(error.validator, error.validator_value, error.instance, _path(where))
    findings.invalid.append(
        (_path(where), bound or f"Invalid value: {_go_value(error.instance)}: {error.message}")
    )


# How the real server words a value outside a schema's bounds (kube-openapi's
# validate errors, as apiextensions-apiserver turns them into field errors):
# the bounds custom resources' schemas use (``minimum: 1``, ``maxItems: 8``).
_BOUNDS = {
    "minimum": "should be greater than or equal to {limit}",
    "exclusiveMinimum": "should be greater than {limit}",
    "maximum": "should be less than or equal to {limit}",
    "exclusiveMaximum": "should be less than {limit}",
    "minLength": "should be at least {limit} chars long",
    "pattern": "should match '{limit}'",
    "minItems": "should have at least {limit} items",
}


def _bound_message(validator: Any, limit: Any, value: Any, where: str) -> str | None:
    if validator in ("maxItems", "maxProperties"):
        size = len(value) if isinstance(value, list | dict) else value
        return f"Too many: {size}: must have at most {limit} items"
    if validator == "maxLength":
        return f"Too long: may not be more than {limit} bytes"
    if validator == "minProperties":
        # kube-openapi reports the bound itself as the value here.
        return f"Invalid value: {limit}: {where} in body should have at least {limit} properties"
    shown = len(value) if validator == "minItems" and isinstance(value, list) else value
    template = _BOUNDS.get(str(validator))
    if template is None:
        return None
    return f"Invalid value: {_go_value(shown)}: {where} in body {template.format(limit=limit)}"


def _semantic_findings(obj: dict[str, Any], kind: str, *, namespaced: bool) -> Findings:
    findings = Findings()
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if (
        isinstance(name, str)
        and name
        and kind != "Event"
        and (len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name))
    ):
        findings.invalid.append(
            ("metadata.name", f"Invalid value: {_go_value(name)}: {_DNS1123_MESSAGE}")
        )
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    if kind in ("Deployment", "ReplicaSet", "Scale"):
        replicas = spec.get("replicas")
        if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas < 0:
            findings.invalid.append(
                (
                    "spec.replicas",
                    f"Invalid value: {replicas}: must be greater than or equal to 0",
                )
            )
    if kind in ("Deployment", "ReplicaSet"):
        _check_workload(spec, findings)
    if kind == "Deployment":
        _check_enum(spec, "strategy.type", ("Recreate", "RollingUpdate"), "spec", findings)
    if kind == "Service":
        types = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
        _check_enum(spec, "type", types, "spec", findings)
    if kind == "Pod":
        _check_pod_spec(spec, "spec", findings)
    if kind == "PodDisruptionBudget":
        _check_disruption_budget(spec, findings)
    if kind == "NetworkPolicy":
        _check_network_policy(spec, findings)
    return findings


def _check_disruption_budget(spec: dict[str, Any], findings: Findings) -> None:
    """What policy/v1's validation adds to the schema: one bound, each valid."""
    if "minAvailable" in spec and "maxUnavailable" in spec:
        findings.invalid.append(
            ("spec", "Invalid value: minAvailable and maxUnavailable cannot be both set")
        )
    for bound in ("minAvailable", "maxUnavailable"):
        value = spec.get(bound)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and value < 0:
            findings.invalid.append(
                (f"spec.{bound}", f"Invalid value: {value}: must be greater than or equal to 0")
            )
        elif isinstance(value, str) and not re.fullmatch(r"(100|[1-9]?[0-9])%", value):
            findings.invalid.append(
                (f"spec.{bound}", f'Invalid value: "{value}": must be an integer or percentage')
            )


def _check_network_policy(spec: dict[str, Any], findings: Findings) -> None:
    """What networking/v1's validation adds to the schema: enums and port ranges."""
    types = spec.get("policyTypes")
    if isinstance(types, list):
        for i, value in enumerate(types):
            if isinstance(value, str) and value not in ("Ingress", "Egress"):
                findings.invalid.append(
                    (
                        f"spec.policyTypes[{i}]",
                        f'Unsupported value: "{value}": supported values: "Ingress", "Egress"',
                    )
                )
    for direction in ("ingress", "egress"):
        rules = spec.get(direction)
        if not isinstance(rules, list):
            continue
        for i, rule in enumerate(rules):
            ports = rule.get("ports") if isinstance(rule, dict) else None
            if not isinstance(ports, list):
                continue
            for j, port in enumerate(ports):
                if not isinstance(port, dict):
                    continue
                where = f"spec.{direction}[{i}].ports[{j}]"
                _check_enum(port, "protocol", ("SCTP", "TCP", "UDP"), where, findings)
                number = port.get("port")
                if (
                    isinstance(number, int)
                    and not isinstance(number, bool)
                    and not 1 <= number <= 65535
                ):
                    findings.invalid.append(
                        (
                            f"{where}.port",
                            f"Invalid value: {number}: must be between 1 and 65535, inclusive",
                        )
                    )


def _check_enum(
    spec: dict[str, Any], path: str, allowed: tuple[str, ...], prefix: str, findings: Findings
) -> None:
    """Enumerations the schemas only describe in prose."""
    value: Any = spec
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, str) and value not in allowed:
        shown = ", ".join(f'"{a}"' for a in allowed)
        findings.invalid.append(
            (f"{prefix}.{path}", f'Unsupported value: "{value}": supported values: {shown}')
        )


def _check_workload(spec: dict[str, Any], findings: Findings) -> None:
    from loadtests.sandbox.cluster.selectors import selector_from_object

    selector = spec.get("selector")
    template: dict[str, Any] = spec["template"] if isinstance(spec.get("template"), dict) else {}
    if not selector:
        findings.invalid.append(("spec.selector", "Required value"))
    elif isinstance(selector, dict):
        labels = (template.get("metadata") or {}).get("labels") or {}
        sel = selector_from_object(selector)
        if sel.empty:
            findings.invalid.append(
                ("spec.selector", "Invalid value: v1.LabelSelector{}: empty selector is invalid")
            )
        elif not sel.matches(labels):
            shown = ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items()))
            findings.invalid.append(
                (
                    "spec.template.metadata.labels",
                    f"Invalid value: map[string]string{{{shown}}}: "
                    "`selector` does not match template `labels`",
                )
            )
    _check_pod_spec(template.get("spec") or {}, "spec.template.spec", findings)


def _check_pod_spec(spec: Any, prefix: str, findings: Findings) -> None:
    if not isinstance(spec, dict):
        return
    containers = spec.get("containers")
    if not containers:
        findings.invalid.append((f"{prefix}.containers", "Required value"))
        return
    if not isinstance(containers, list):
        return
    for i, container in enumerate(containers):
        if not isinstance(container, dict):
            continue
        if not container.get("name"):
            findings.invalid.append((f"{prefix}.containers[{i}].name", "Required value"))
        if not container.get("image"):
            findings.invalid.append((f"{prefix}.containers[{i}].image", "Required value"))


def _drop(obj: Any, path: str) -> None:
    """Remove the field at a dotted/indexed path (an unknown field)."""
    parts: list[str | int] = []
    for token in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        parts.append(int(token[1:-1]) if token.startswith("[") else token)
    current = obj
    for part in parts[:-1]:
        try:
            current = current[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(current, dict) and isinstance(parts[-1], str):
        current.pop(parts[-1], None)


def validate_object(
    obj: dict[str, Any],
    *,
    group: str,
    version: str,
    kind: str,
    namespaced: bool,
    field_validation: FieldValidation,
    decode_kind: str | None = None,
) -> list[str]:
    """Check ``obj`` in place; returns warnings; raises 400/422 as the real server would.

    Unknown fields are removed from ``obj`` (unless Strict, which refuses them).
    ``decode_kind`` names the kind in the 400 message when it differs from ``kind``.
    """
    if field_validation not in ("Strict", "Warn", "Ignore", ""):
        raise BadRequest(
            f"fieldValidation parameter unsupported: {field_validation!r}: "
            "allowed values are Ignore, Warn and Strict"
        )
    findings = _schema_findings(obj, group, version, kind)
    semantic = _semantic_findings(obj, kind, namespaced=namespaced)
    findings.invalid.extend(c for c in semantic.invalid if c not in findings.invalid)
    findings.invalid.extend(
        rule_findings(obj, group=group, version=version, kind=kind, earlier=findings.invalid)
    )
    warnings: list[str] = []
    if findings.unknown:
        if field_validation == "Strict":
            unknown = ", ".join(f'unknown field "{f}"' for f in findings.unknown)
            shown = decode_kind or kind
            raise BadRequest(
                f'{shown} in version "{version}" cannot be handled as a {shown}: '
                f"strict decoding error: {unknown}"
            )
        if field_validation in ("Warn", ""):
            warnings = [f'unknown field "{f}"' for f in findings.unknown]
        for path in findings.unknown:
            _drop(obj, path)
    if findings.invalid:
        name = str((obj.get("metadata") or {}).get("name") or "")
        raise Invalid.of(kind=kind, group=group, name=name, causes=findings.invalid)
    return warnings
