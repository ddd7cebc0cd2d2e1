"""Custom resources, served from the CustomResourceDefinitions bundled in ``crds/``.

The sandbox has no apiextensions API to install a CRD into: the kinds it
serves beyond the built-in ones are the CRD manifests in ``crds/``, as their
projects publish them (each file says where it comes from and which
release). Today that is the Gateway API Inference Extension's
``InferencePool`` (``inference.networking.k8s.io/v1``). Adding a kind is
adding a file. For every served version of every bundled CRD this module
gives:

- the kind's names, scope and subresources (:func:`bundled_kinds`), from
  which :mod:`resources` adds the kind to the table everything else is
  driven by (discovery, routing, the store, RBAC);
- its schema as JSON Schema definitions (:func:`definitions`), under the
  name the real server's OpenAPI gives it (the group reversed:
  ``io.k8s.networking.inference.v1.InferencePool``, and its ``List``).
  :mod:`schemas` merges them into the official definitions, so validation,
  ``/openapi/v3`` (hence ``kubectl apply`` and ``kubectl explain``) work for
  a custom kind exactly as for a built-in one;
- its structural defaults (:func:`apply_defaults`), applied as an object is
  decoded, before it is validated: the CRD's validation rules read
  defaulted fields (``endpointPickerRef.kind`` is ``Service`` when left
  out), as on the real server;
- its printer columns (:func:`printer_columns`): ``additionalPrinterColumns``,
  or the real server's default of one ``Age`` column when it declares none.

Main decision: a CRD's schema is OpenAPI v3 with Kubernetes extensions, and
is converted once into the JSON Schema (2020-12) shape the validator reads:
``nullable`` becomes a ``null`` type, OpenAPI 3.0's boolean
``exclusiveMinimum``/``exclusiveMaximum`` become the numeric form,
``x-kubernetes-int-or-string`` becomes integer-or-string, and ``metadata``
becomes ObjectMeta's definition (the real server checks a custom object's
metadata as ObjectMeta). In the strict set (``strict=True``), every object
node that declares neither ``additionalProperties`` nor
``x-kubernetes-preserve-unknown-fields`` is closed: that is what the real
server's pruning treats as an unknown field, so one validation pass finds
unknown fields (400 under ``fieldValidation=Strict``) and invalid values
(422) for custom kinds as it does for built-in ones. The CRD's CEL rules
(``x-kubernetes-validations``) are checked by :mod:`crd_rules`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

__all__ = [
    "CustomKind",
    "PrinterColumn",
    "apply_defaults",
    "bundled_kinds",
    "definitions",
    "find",
    "is_custom",
    "load_crd",
    "printer_columns",
]

Schema = dict[str, Any]

_OBJECT_META = "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_LIST_META = "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
_CRD_API_VERSION = "apiextensions.k8s.io/v1"
# The real server's default when a CRD version declares no printer columns
# (apiextensions-apiserver, ``serveDefaultColumnsIfEmpty``).
_AGE_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was created."
)


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """One of a CRD version's ``additionalPrinterColumns``."""

    name: str
    type: str  # "string", "integer", "number", "boolean", "date"
    json_path: str  # a simple path: ".spec.selector", ".status.parents[0].parentRef.name"
    description: str = ""
    format: str = ""
    priority: int = 0


@dataclass(frozen=True, slots=True)
class CustomKind:
    """One served version of one bundled CRD."""

    group: str
    version: str
    kind: str
    list_kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    subresources: tuple[str, ...]  # "status", "scale"
    schema: Schema  # the version's openAPIV3Schema, as the CRD states it
    printer_columns: tuple[PrinterColumn, ...]
    source: str  # the file it came from

    @property
    def definition_name(self) -> str:
        """The real server's OpenAPI name: ``io.k8s.networking.inference.v1.InferencePool``."""
        reversed_group = ".".join(reversed(self.group.split(".")))
        return f"{reversed_group}.{self.version}.{self.kind}"

    def definitions(self, *, strict: bool) -> dict[str, Schema]:
        """The kind's and its list's JSON Schema definitions, by OpenAPI name."""
        schema = _json_schema(copy.deepcopy(self.schema), strict=strict)
        schema.setdefault("properties", {})["metadata"] = {"$ref": _OBJECT_META}
        schema["x-kubernetes-group-version-kind"] = self._gvk(self.kind)
        listing: Schema = {
            "description": f"{self.list_kind} is a list of {self.kind}",
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"$ref": _LIST_META},
                "items": {"type": "array", "items": {"$ref": f"#/$defs/{self.definition_name}"}},
            },
            "x-kubernetes-group-version-kind": self._gvk(self.list_kind),
        }
        if strict:
            listing["additionalProperties"] = False
        return {self.definition_name: schema, f"{self.definition_name}List": listing}

    def _gvk(self, kind: str) -> list[dict[str, str]]:
        return [{"group": self.group, "version": self.version, "kind": kind}]

    def fill_defaults(self, obj: dict[str, Any]) -> None:
        """Fill the schema's ``default`` of every absent field under ``obj`` (in place)."""
        _fill_defaults(obj, self.schema)


def _required(mapping: Any, key: str, where: str) -> Any:
    if not isinstance(mapping, dict) or key not in mapping:
        raise ValueError(f"{where}: the CustomResourceDefinition has no {key!r}")
    return mapping[key]


def _columns(version: dict[str, Any]) -> tuple[PrinterColumn, ...]:
    declared = version.get("additionalPrinterColumns") or []
    if not declared:
        return (PrinterColumn("Age", "date", ".metadata.creationTimestamp", _AGE_DESCRIPTION),)
    return tuple(
        PrinterColumn(
            name=str(c["name"]),
            type=str(c["type"]),
            json_path=str(c["jsonPath"]),
            description=str(c.get("description", "")),
            format=str(c.get("format", "")),
            priority=int(c.get("priority", 0)),
        )
        for c in declared
    )


def load_crd(document: Any, *, source: str) -> tuple[CustomKind, ...]:
    """The served versions of one CRD manifest; ``ValueError`` names what is wrong."""
    if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
        raise ValueError(f"{source}: not a CustomResourceDefinition")
    if document.get("apiVersion") != _CRD_API_VERSION:
        raise ValueError(
            f"{source}: apiVersion {document.get('apiVersion')!r}; allowed: {_CRD_API_VERSION}"
        )
    spec = _required(document, "spec", source)
    names = _required(spec, "names", source)
    scope = _required(spec, "scope", source)
    if scope not in ("Namespaced", "Cluster"):
        raise ValueError(f"{source}: scope {scope!r}; allowed: Namespaced, Cluster")
    kinds = []
    for version in _required(spec, "versions", source):
        if not version.get("served", False):
            continue
        name = _required(version, "name", source)
        schema = _required(_required(version, "schema", source), "openAPIV3Schema", source)
        subresources = version.get("subresources") or {}
        kinds.append(
            CustomKind(
                group=str(_required(spec, "group", source)),
                version=str(name),
                kind=str(_required(names, "kind", source)),
                list_kind=str(names.get("listKind") or names["kind"] + "List"),
                plural=str(_required(names, "plural", source)),
                singular=str(names.get("singular") or names["kind"].lower()),
                namespaced=scope == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=tuple(s for s in ("status", "scale") if s in subresources),
                schema=schema,
                printer_columns=_columns(version),
                source=source,
            )
        )
    return tuple(kinds)


@cache
def bundled_kinds() -> tuple[CustomKind, ...]:
    """Every served version of every CRD in ``crds/``, in file order."""
    directory = resources.files("loadtests.sandbox.cluster") / "crds"
    kinds: list[CustomKind] = []
    for entry in sorted(directory.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            kinds.extend(load_crd(yaml.safe_load(entry.read_text()), source=entry.name))
    return tuple(kinds)


def find(group: str, version: str, kind: str) -> CustomKind | None:
    for custom in bundled_kinds():
        if (custom.group, custom.version, custom.kind) == (group, version, kind):
            return custom
    return None


def is_custom(group: str, version: str, kind: str) -> bool:
    return find(group, version, kind) is not None


def printer_columns(group: str, version: str, kind: str) -> tuple[PrinterColumn, ...] | None:
    """The columns ``kubectl get`` shows for a custom kind (None: not a custom kind)."""
    custom = find(group, version, kind)
    return custom.printer_columns if custom is not None else None


# --- schemas ------------------------------------------------------------------------------


def _json_schema(node: Any, *, strict: bool) -> Any:
    """One OpenAPI v3 schema node as JSON Schema 2020-12 (see the module docstring)."""
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties", "$defs"):
            out[key] = {k: _json_schema(v, strict=strict) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = _json_schema(value, strict=strict)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_json_schema(v, strict=strict) for v in value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if value and bound in node:
                out[key] = node[bound]
        elif key in ("minimum", "maximum") and node.get(f"exclusive{key.capitalize()}") is True:
            continue  # became the exclusive bound above
        elif key != "nullable":
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    closes = (
        strict
        and out.get("type") == "object"
        and "additionalProperties" not in out
        and not node.get("x-kubernetes-preserve-unknown-fields")
    )
    if closes:
        out["additionalProperties"] = False
    return out


@cache
def _definitions(strict: bool) -> dict[str, Schema]:
    out: dict[str, Schema] = {}
    for custom in bundled_kinds():
        out.update(custom.definitions(strict=strict))
    return out


def definitions(*, strict: bool) -> dict[str, Schema]:
    """Every bundled kind's schema and list schema, by OpenAPI name (a fresh copy)."""
    return copy.deepcopy(_definitions(strict))


# --- defaulting ---------------------------------------------------------------------------


def _fill_defaults(value: Any, schema: Any) -> None:
    """Fill the ``default`` of each field under ``value`` that ``schema`` declares (in place)."""
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        declared = schema.get("properties") or {}
        for key, field in declared.items():
            if key not in value and isinstance(field, dict) and "default" in field:
                value[key] = copy.deepcopy(field["default"])
            if key in value:
                _fill_defaults(value[key], field)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                if key not in declared:
                    _fill_defaults(item, extra)
    elif isinstance(value, list):
        for item in value:
            _fill_defaults(item, schema.get("items"))


def apply_defaults(obj: dict[str, Any], *, group: str, version: str, kind: str) -> None:
    """Fill the schema's defaults into ``obj`` (nothing for a built-in kind)."""
    custom = find(group, version, kind)
    if custom is not None:
        custom.fill_defaults(obj)
