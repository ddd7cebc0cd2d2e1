"""Every resource quantity of an object, written the way a real API server returns it.

A real API server decodes each ``resource.Quantity`` field of a typed object
and encodes it back as its canonical string, so a Deployment sent with
``nvidia.com/gpu: 1`` (a number) reads back as ``"1"``; clients rely on it
(the official ``kubernetes`` client rejects a number there). The sandbox
stores JSON as sent, so the API server calls :func:`canonicalize_quantities`
on every write that decodes an object.

Main decision: the fields are found through the official schema (every
property whose schema is ``io.k8s.apimachinery.pkg.api.resource.Quantity``:
container requests and limits in any pod template, pod overhead, node
capacity and allocatable, ``emptyDir.sizeLimit``, quotas, limit ranges,
volume capacities...), not through a list kept by hand, so no kind or field
is missed. A value that is not a quantity is a 400, as on a real server.
"""

from __future__ import annotations

from typing import Any

from loadtests.sandbox.cluster.errors import BadRequest
from loadtests.sandbox.cluster.quantity import canonical_quantity
from loadtests.sandbox.cluster.schemas import Definitions, Schema, definitions

__all__ = ["canonicalize_quantities"]

_QUANTITY_DEF = "io.k8s.apimachinery.pkg.api.resource.Quantity"
# What Kubernetes' own error says a quantity must look like.
_QUANTITY_PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"


def canonicalize_quantities(obj: dict[str, Any], *, group: str, version: str, kind: str) -> None:
    """Rewrite, in place, every quantity field of ``obj`` (of this kind) canonically.

    Raises :class:`BadRequest` naming the field when a value is not a quantity.
    A kind without a published schema is left as it is.
    """
    defs = definitions(strict=False)
    schema = defs.kind_schema(group, version, kind)
    if schema is None:
        return
    try:
        _walk(defs, obj, schema, "")
    except ValueError as error:
        raise BadRequest(
            f'{kind} in version "{version}" cannot be handled as a {kind}: quantities must '
            f"match the regular expression '{_QUANTITY_PATTERN}' ({error})"
        ) from None


def _is_quantity(defs: Definitions, schema: Schema | None) -> bool:
    # Follow references one at a time: the Quantity definition itself is a
    # plain oneOf, so only its name tells it apart.
    for _ in range(16):
        if schema is None:
            return False
        ref = schema.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if name == _QUANTITY_DEF:
                return True
            schema = defs.defs.get(name)
            continue
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            schema = all_of[0]
            continue
        return False
    return False


def _walk(defs: Definitions, value: Any, schema: Schema | None, path: str) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        for key, child in value.items():
            child_schema = defs.field(schema, key)
            _visit(defs, value, key, child, child_schema, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        item_schema = defs.items(schema)
        for index, child in enumerate(value):
            _visit(defs, value, index, child, item_schema, f"{path}[{index}]")


def _visit(
    defs: Definitions,
    container: Any,
    key: Any,
    child: Any,
    schema: Schema | None,
    path: str,
) -> None:
    if child is None or schema is None:
        return
    if _is_quantity(defs, schema):
        if isinstance(child, bool) or not isinstance(child, str | int | float):
            raise ValueError(f"{path}: {child!r} is not a quantity")
        try:
            container[key] = canonical_quantity(child)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
        return
    _walk(defs, child, schema, path)
