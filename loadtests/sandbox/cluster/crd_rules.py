"""The validation rules of the bundled CRDs (``x-kubernetes-validations``), checked.

A CRD may attach CEL rules to any node of its schema; the real server runs
them after the schema's own checks and reports a failing one as
``<path>: Invalid value: "<schema type>": <the rule's message>`` (422). The
sandbox has no CEL engine: each rule a bundled CRD declares is written here
once, as a Python predicate over the value the rule calls ``self``, keyed by
the rule's exact text. :func:`unknown_rules` lists the rules of a schema
that have no predicate, and a unit test runs it over every bundled CRD, so
a CRD updated with a new rule fails that test instead of going unchecked.

Main decision: as on the real server, the rules run only over an object
that passed the schema's blocking checks (type, enum, required, too long,
too many); when one failed, the rules are skipped and one fieldless cause
says so (``<nil>: Invalid value: "null": some validation rules were not
checked...``), so a client sees the same list of causes here as there.
And a rule is checked only where the value has the type its schema node
says (an object rule on an object).

The rules, by the CRD that declares them:

- InferencePool (``inference.networking.k8s.io/v1``), ``spec.endpointPickerRef``:
  ``self.kind != 'Service' || has(self.port)`` (a Service reference needs a port);
- the same, ``spec.targetPorts``:
  ``self.all(p1, self.exists_one(p2, p1.number==p2.number))`` (port numbers unique).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from loadtests.sandbox.cluster.custom_resources import find

__all__ = ["NOT_CHECKED", "RULES", "broken_rules", "rule_findings", "unknown_rules"]

Schema = dict[str, Any]

NOT_CHECKED = (
    "<nil>",
    'Invalid value: "null": some validation rules were not checked because the object was '
    "invalid; correct the existing errors to complete validation",
)
_BLOCKING = ("Unsupported value", "Required value", "Too long", "Too many")

_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
}


def _port_given_for_service(ref: dict[str, Any]) -> bool:
    return ref.get("kind") != "Service" or "port" in ref


def _unique_numbers(ports: list[Any]) -> bool:
    numbers = [p.get("number") for p in ports if isinstance(p, dict)]
    return len(numbers) == len(set(map(repr, numbers)))


RULES: dict[str, Callable[[Any], bool]] = {
    "self.kind != 'Service' || has(self.port)": _port_given_for_service,
    "self.all(p1, self.exists_one(p2, p1.number==p2.number))": _unique_numbers,
}


def _nodes(schema: Any, path: str) -> Iterator[tuple[str, Schema]]:
    """Every schema node with the path of the value it describes (``[*]`` for items)."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key, field in (schema.get("properties") or {}).items():
        yield from _nodes(field, f"{path}.{key}" if path else key)
    yield from _nodes(schema.get("items"), f"{path}[*]")
    yield from _nodes(schema.get("additionalProperties"), f"{path}[*]")


def unknown_rules(schema: Schema) -> list[str]:
    """The rules under ``schema`` that have no predicate here, each with its path."""
    return [
        f"{path or '<root>'}: {rule.get('rule')!r}"
        for path, node in _nodes(schema, "")
        for rule in node.get("x-kubernetes-validations") or ()
        if rule.get("rule") not in RULES
    ]


def _check(value: Any, schema: Any, path: str, out: list[tuple[str, str]]) -> None:
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    wanted = _JSON_TYPES.get(kind) if isinstance(kind, str) else None
    if (
        wanted is None
        or not isinstance(value, wanted)
        or isinstance(value, bool) != (kind == "boolean")
    ):
        return
    for rule in schema.get("x-kubernetes-validations") or ():
        predicate = RULES.get(rule.get("rule"))
        if predicate is not None and not predicate(value):
            message = rule.get("message") or f"failed rule: {rule.get('rule')}"
            out.append((path, f'Invalid value: "{kind}": {message}'))
    if isinstance(value, dict):
        declared = schema.get("properties") or {}
        for key, item in value.items():
            field = declared.get(key, schema.get("additionalProperties"))
            _check(item, field, f"{path}.{key}" if path else key, out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, schema.get("items"), f"{path}[{index}]", out)


def _blocking(message: str) -> bool:
    return message.startswith(_BLOCKING) or " must be of type " in message


def rule_findings(
    obj: dict[str, Any],
    *,
    group: str,
    version: str,
    kind: str,
    earlier: list[tuple[str, str]],
) -> list[tuple[str, str]]:
    """(field, message) for every rule ``obj`` breaks (none for a built-in kind);
    ``earlier`` are the schema's findings, which may keep the rules from running."""
    custom = find(group, version, kind)
    if custom is None or not any(
        node.get("x-kubernetes-validations") for _, node in _nodes(custom.schema, "")
    ):
        return []
    if any(_blocking(message) for _, message in earlier):
        return [NOT_CHECKED]
    return broken_rules(obj, custom.schema)


def broken_rules(obj: Any, schema: Schema) -> list[tuple[str, str]]:
    """(field, message) for every rule under ``schema`` that ``obj`` breaks."""
    out: list[tuple[str, str]] = []
    _check(obj, schema, "", out)
    return out
