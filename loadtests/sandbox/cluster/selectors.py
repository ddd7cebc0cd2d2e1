"""Label and field selectors, with the real API server's syntax and semantics.

Label selectors come as query strings (``app=x,tier!=db,env in (a,b),!gpu``)
or as ``LabelSelector`` objects (``matchLabels`` + ``matchExpressions``, as in
a Deployment's ``spec.selector``); both parse to the same requirements. Field
selectors support ``=``, ``==`` and ``!=`` on dotted paths
(``metadata.name``, ``spec.nodeName``, ``involvedObject.uid``); a missing
field reads as the empty string, as it does on the real server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loadtests.sandbox.cluster.errors import BadRequest

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "field_value",
    "parse_field_selector",
    "parse_label_selector",
    "selector_from_object",
    "selector_string",
]

_SET_OPS = {"in", "notin"}
_REQ = re.compile(
    r"""\s*(?:
        (?P<notexists>!\s*(?P<nkey>[^\s,=!()]+))
      | (?P<key>[^\s,=!()]+)\s*(?:
            (?P<op>==|=|!=)\s*(?P<value>[^\s,()]*)
          | \s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\)
        )?
    )\s*(?:,|$)""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # in, notin, exists, notexists  (= and == are "in" one value, != is "notin")
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "notexists":
            return not present
        if self.op == "in":
            return present and labels[self.key] in self.values
        # notin: matches when the label is absent, as the real server does.
        return not present or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return LabelSelector()
    requirements: list[Requirement] = []
    pos = 0
    while pos < len(text):
        m = _REQ.match(text, pos)
        if m is None or m.end() == pos:
            raise BadRequest(f"unable to parse requirement: invalid label selector {text!r}")
        pos = m.end()
        if m.group("notexists"):
            requirements.append(Requirement(m.group("nkey"), "notexists"))
        elif m.group("op"):
            op = "notin" if m.group("op") == "!=" else "in"
            requirements.append(Requirement(m.group("key"), op, frozenset([m.group("value")])))
        elif m.group("setop"):
            values = frozenset(v.strip() for v in m.group("values").split(",") if v.strip())
            requirements.append(Requirement(m.group("key"), m.group("setop"), values))
        else:
            requirements.append(Requirement(m.group("key"), "exists"))
    return LabelSelector(tuple(requirements))


def selector_from_object(selector: Mapping[str, Any] | None) -> LabelSelector:
    """A ``metav1.LabelSelector`` object (matchLabels/matchExpressions) as requirements.

    ``None`` or an empty object selects everything, as for a Deployment; a
    Service's plain ``spec.selector`` map is the ``matchLabels`` form.
    """
    if not selector:
        return LabelSelector()
    requirements: list[Requirement] = []
    match_labels = selector.get("matchLabels")
    if match_labels is None and "matchExpressions" not in selector:
        match_labels = selector  # a plain map, as in a Service
    for key, value in (match_labels or {}).items():
        requirements.append(Requirement(key, "in", frozenset([str(value)])))
    for expr in selector.get("matchExpressions") or []:
        op = str(expr.get("operator", ""))
        key = str(expr.get("key", ""))
        values = frozenset(str(v) for v in expr.get("values") or [])
        mapping = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "notexists"}
        if op not in mapping:
            raise BadRequest(f"{op!r} is not a valid label selector operator")
        requirements.append(Requirement(key, mapping[op], values))
    return LabelSelector(tuple(requirements))


def selector_string(selector: Mapping[str, Any] | None) -> str:
    """A selector object (or a Service's plain map) in query syntax; "" selects everything.

    The form ``kubectl get -o wide`` prints and a Scale's ``status.selector`` carries.
    """
    if not selector:
        return ""
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator")
        key = expr.get("key")
        values = ",".join(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: str
    value: str
    negate: bool


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for req in self.requirements:
            equal = field_value(obj, req.path) == req.value
            if equal == req.negate:
                return False
        return True

    def value_of(self, path: str) -> str | None:
        """The value an ``=`` requirement pins ``path`` to, if any."""
        for req in self.requirements:
            if req.path == path and not req.negate:
                return req.value
        return None


def field_value(obj: Mapping[str, Any], path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return ""
        current = current[part]
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def parse_field_selector(text: str | None) -> FieldSelector:
    if not text or not text.strip():
        return FieldSelector()
    requirements = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        for op in ("!=", "==", "="):
            if op in part:
                path, value = part.split(op, 1)
                requirements.append(FieldRequirement(path.strip(), value.strip(), op == "!="))
                break
        else:
            raise BadRequest(f"invalid selector: {text!r}; can't understand {part!r}")
    return FieldSelector(tuple(requirements))
