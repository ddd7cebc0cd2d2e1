"""The four patch types the API server accepts, applied to plain JSON objects.

- ``application/merge-patch+json`` (RFC 7386): maps merge, ``null`` deletes,
  lists are replaced whole.
- ``application/json-patch+json`` (RFC 6902): ``add``, ``remove``,
  ``replace``, ``move``, ``copy``, ``test`` on JSON pointers.
- ``application/strategic-merge-patch+json``: a merge patch that knows, from
  the official schemas, which lists merge by key instead of being replaced
  (``x-kubernetes-patch-strategy: merge`` with
  ``x-kubernetes-patch-merge-key``: containers by ``name``, ports by
  ``containerPort``, conditions by ``type``, ownerReferences by ``uid``...),
  and honours the directives kubectl sends: ``$patch: delete|replace|merge``,
  ``$retainKeys``, ``$setElementOrder/<field>`` and
  ``$deleteFromPrimitiveList/<field>``. Lists with no merge strategy
  (tolerations, args) are replaced, as on the real server.
- ``application/apply-patch+yaml`` (server-side apply), approximated: the
  applied configuration is merged as a strategic merge patch; the field
  manager is recorded in ``managedFields`` but fields are not tracked per
  manager, so conflicts between managers are never reported.

Each function returns a new object and leaves its inputs alone.
"""

from __future__ import annotations

from typing import Any

from loadtests.sandbox.cluster.errors import BadRequest, Invalid
from loadtests.sandbox.cluster.schemas import Definitions, Schema
from loadtests.sandbox.cluster.store import copy_object

__all__ = [
    "PATCH_TYPES",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
]

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE, STRATEGIC, APPLY)

_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


# --- RFC 7386 ---------------------------------------------------------------------


def apply_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy_object(patch)
    result = copy_object(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


# --- RFC 6902 ---------------------------------------------------------------------


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise BadRequest(f"invalid JSON pointer {path!r}: must be empty or start with '/'")
    if path == "":
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool) -> int:
    if for_add and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise Invalid(f"invalid array index {token!r}")
    index = int(token)
    limit = len(container) if for_add else len(container) - 1
    if index > limit:
        raise Invalid(f"array index out of bounds: {index}")
    return index


def _walk(doc: Any, tokens: list[str], path: str) -> Any:
    """The value at ``tokens``, each of which must exist (``path`` is for the error)."""
    current = doc
    for token in tokens:
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, for_add=False)]
        else:
            raise Invalid(f'doc is missing path: "{path}"')
    return current


def _get(doc: Any, path: str) -> Any:
    return _walk(doc, _pointer(path), path)


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise Invalid(f'doc is missing path: "{path}"')
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise Invalid("cannot remove the whole document")
    parent = _walk(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, for_add=False))
    raise Invalid(f'Unable to remove nonexistent key: {last}: missing value (path "{path}")')


def apply_json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise BadRequest("a JSON patch must be a list of operations")
    doc = copy_object(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise BadRequest(f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise BadRequest(f'JSON patch "{kind}" operation at "{path}" has no value')
        if kind == "add":
            doc = _add(doc, path, copy_object(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # the target must exist
            doc, _ = _remove(doc, path) if _pointer(path) else (doc, None)
            doc = _add(doc, path, copy_object(op["value"]))
        elif kind == "move":
            doc, value = _remove(doc, op.get("from", ""))
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy_object(_get(doc, op.get("from", ""))))
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise Invalid(f"testing value {path} failed: test failed")
        else:
            raise BadRequest(
                f"unexpected JSON patch operation {kind!r}: "
                "allowed are add, remove, replace, move, copy, test"
            )
    return doc


# --- strategic merge --------------------------------------------------------------


def _strategy(defs: Definitions | None, schema: Schema | None) -> tuple[set[str], str | None]:
    if defs is None or schema is None:
        return set(), None
    strategy = str(schema.get("x-kubernetes-patch-strategy") or "")
    key = schema.get("x-kubernetes-patch-merge-key")
    return {s for s in strategy.split(",") if s}, key if isinstance(key, str) else None


def apply_strategic_merge_patch(
    target: Any, patch: Any, *, defs: Definitions | None, schema: Schema | None
) -> Any:
    """Strategic merge of ``patch`` into ``target`` for an object of ``schema``."""
    if not isinstance(patch, dict):
        raise BadRequest("a strategic merge patch must be a JSON object")
    return _merge_map(copy_object(target) if isinstance(target, dict) else {}, patch, defs, schema)


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], defs: Definitions | None, schema: Any
) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip_map(patch)
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise BadRequest(f"Unknown patch type: {directive}")
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        keep = set(retain)
        original = {k: v for k, v in original.items() if k in keep}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith(_SET_ORDER):
            orders[key[len(_SET_ORDER) :]] = value if isinstance(value, list) else []
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE) :]
            drop = value if isinstance(value, list) else []
            if isinstance(original.get(field), list):
                original[field] = [v for v in original[field] if v not in drop]
            continue
        if value is None:
            original.pop(key, None)
            continue
        field_schema = defs.field(schema, key) if defs is not None else None
        current = original.get(key)
        if isinstance(value, dict):
            base = current if isinstance(current, dict) else {}
            merged = _merge_map(base, value, defs, field_schema)
            if value.get("$patch") == "delete":
                original.pop(key, None)
            else:
                original[key] = merged
        elif isinstance(value, list):
            original[key] = _merge_list(
                current if isinstance(current, list) else [], value, defs, field_schema
            )
        else:
            original[key] = value
    for key, order in orders.items():
        if isinstance(original.get(key), list):
            field_schema = defs.field(schema, key) if defs is not None else None
            _, merge_key = _strategy(defs, defs.resolve(field_schema) if defs else None)
            original[key] = _reorder(original[key], order, merge_key)
    return original


def _merge_list(
    original: list[Any], patch: list[Any], defs: Definitions | None, schema: Any
) -> list[Any]:
    resolved = defs.resolve(schema) if defs is not None else None
    strategies, merge_key = _strategy(defs, resolved)
    if "merge" not in strategies:
        return _strip_list(patch)
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return _strip_list([p for p in patch if not (isinstance(p, dict) and "$patch" in p)])
    if merge_key is None:
        # A set of primitives (finalizers): union, keeping the original order.
        result = list(original)
        for item in patch:
            if item not in result:
                result.append(item)
        return result
    items_schema = defs.items(resolved) if defs is not None else None
    result = [copy_object(item) for item in original]
    for item in patch:
        if not isinstance(item, dict):
            raise BadRequest(f"a list merged by {merge_key!r} must hold objects, got {item!r}")
        if merge_key not in item:
            raise BadRequest(f"map: {item!r} does not contain declared merge key: {merge_key}")
        index = next(
            (
                i
                for i, o in enumerate(result)
                if isinstance(o, dict) and o.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            result = [
                o
                for o in result
                if not (isinstance(o, dict) and o.get(merge_key) == item[merge_key])
            ]
        elif index is None:
            result.append(_merge_map({}, item, defs, items_schema))
        else:
            result[index] = _merge_map(result[index], item, defs, items_schema)
    return result


def _reorder(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    def ident(item: Any) -> Any:
        if merge_key is not None and isinstance(item, dict):
            return item.get(merge_key)
        return item

    wanted = [ident(o) for o in order]
    ranked = [
        (wanted.index(ident(i)) if ident(i) in wanted else len(wanted), n, i)
        for n, i in enumerate(items)
    ]
    return [item for _, _, item in sorted(ranked, key=lambda t: (t[0], t[1]))]


def _strip_map(value: dict[str, Any]) -> dict[str, Any]:
    return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}


def _strip_list(value: list[Any]) -> list[Any]:
    return [_strip(v) for v in value]


def _strip(value: Any) -> Any:
    """Drop any directive keys left in a value that replaces, not merges."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
