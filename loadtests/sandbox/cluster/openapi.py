"""``/openapi/v3``: the OpenAPI documents kubectl reads before it writes.

kubectl 1.32 will not ``apply`` or ``create`` against a server without
``/openapi/v3``. It reads the root (``paths`` -> ``serverRelativeURL`` per
group version), then the group version's document, and looks there for:

- the PATCH operation of the kind (``x-kubernetes-group-version-kind``) with
  a ``fieldValidation`` query parameter: then it leaves validation to the
  server and sends ``?fieldValidation=Strict``;
- ``application/strategic-merge-patch+json`` among that operation's request
  content types, and the kind's schema in ``components.schemas`` with its
  ``x-kubernetes-patch-merge-key``/``-strategy`` extensions, to compute the
  strategic merge patch of ``kubectl apply``.

The documents are built from kubernetes-validate's definitions (the
non-strict set), converted to OpenAPI 3 shape: ``$ref`` to
``#/components/schemas/...``, nullable type lists collapsed to one type,
int-or-string and quantity as the real documents spell them. Each group
version's document holds only the schemas its kinds reach. Built lazily,
once per group version, and cached with its hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from loadtests.sandbox.cluster.custom_resources import is_custom
from loadtests.sandbox.cluster.resources import ResourceType
from loadtests.sandbox.cluster.schemas import Definitions, Schema, definitions

__all__ = ["OpenApi"]

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_PATCH_CONTENT = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
_SPECIAL = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
        "description": "IntOrString is a type that can hold an int32 or a string.",
        "type": "string",
        "format": "int-or-string",
    },
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        "description": "Quantity is a fixed-point representation of a number.",
        "type": "string",
    },
}


def _patch_content(rtype: ResourceType) -> tuple[str, ...]:
    """The patch types a kind takes: a custom kind has no strategic merge patch, so
    kubectl sees it missing here and applies with a JSON merge patch, as on a real cluster."""
    if is_custom(rtype.group, rtype.version, rtype.kind):
        return tuple(t for t in _PATCH_CONTENT if t != "application/strategic-merge-patch+json")
    return _PATCH_CONTENT


def _query(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": "string", "uniqueItems": True},
    }


_DRY_RUN = _query("dryRun", "When present, modifications are not persisted. Valid value: All")
_FIELD_MANAGER = _query("fieldManager", "a name associated with the actor making these changes")
_FIELD_VALIDATION = _query(
    "fieldValidation",
    "fieldValidation instructs the server on how to handle objects in the request containing "
    "unknown or duplicate fields. Valid values are: Ignore, Warn (default), Strict",
)
_FORCE = {
    "name": "force",
    "in": "query",
    "description": "Force is going to force Apply requests.",
    "schema": {"type": "boolean", "uniqueItems": True},
}


def _convert(node: Any) -> Any:
    """JSON Schema 2020-12 (kubernetes-validate) to OpenAPI 3 schema shape."""
    if isinstance(node, list):
        return [_convert(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("$schema", "$id"):
            continue
        if key == "$ref" and isinstance(value, str):
            out[key] = "#/components/schemas/" + value.rsplit("/", 1)[-1]
        elif key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            out[key] = types[0] if types else "object"
        else:
            out[key] = _convert(value)
    return out


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref.rsplit("/", 1)[-1])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


class OpenApi:
    def __init__(self, resources: Iterable[ResourceType], *, defs: Definitions | None = None):
        self._defs = defs or definitions(strict=False)
        self._by_gv: dict[tuple[str, str], list[ResourceType]] = {}
        for r in resources:
            self._by_gv.setdefault((r.group, r.version), []).append(r)
        self._docs: dict[str, tuple[bytes, str]] = {}

    @staticmethod
    def _gv_path(group: str, version: str) -> str:
        return f"apis/{group}/{version}" if group else f"api/{version}"

    def root(self) -> dict[str, Any]:
        paths = {}
        for group, version in sorted(self._by_gv):
            path = self._gv_path(group, version)
            _, digest = self.document(path) or (b"", "")
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
        return {"paths": paths}

    def document(self, path: str) -> tuple[bytes, str] | None:
        """The JSON document for ``api/v1`` or ``apis/<group>/<version>``, and its hash."""
        cached = self._docs.get(path)
        if cached is not None:
            return cached
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "api":
            key = ("", parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            key = (parts[1], parts[2])
        else:
            return None
        if key not in self._by_gv:
            return None
        body = json.dumps(self._build(*key), separators=(",", ":")).encode()
        digest = hashlib.sha512(body).hexdigest()[:64].upper()
        self._docs[path] = (body, digest)
        return body, digest

    # --- building ----------------------------------------------------------------------

    def _schema_name(self, rtype: ResourceType) -> str | None:
        return self._defs.name_for(rtype.group, rtype.version, rtype.kind)

    def _build(self, group: str, version: str) -> dict[str, Any]:
        wanted: set[str] = {
            f"{_META}DeleteOptions",
            f"{_META}Patch",
            f"{_META}Status",
            f"{_META}WatchEvent",
        }
        paths: dict[str, Any] = {}
        for rtype in self._by_gv[(group, version)]:
            name = self._schema_name(rtype)
            if name is None:
                continue
            wanted.add(name)
            list_name = self._defs.name_for(rtype.group, rtype.version, rtype.kind + "List")
            if list_name:
                wanted.add(list_name)
            paths.update(self._paths(rtype, name, list_name))
            if "scale" in rtype.subresources:
                wanted.add("io.k8s.api.autoscaling.v1.Scale")
        schemas: dict[str, Schema] = {}
        queue = sorted(wanted)
        while queue:
            name = queue.pop()
            if name in schemas or name not in self._defs.defs:
                continue
            schema = _SPECIAL.get(name) or _convert(self._defs.defs[name])
            schemas[name] = schema
            found: set[str] = set()
            _refs(schema, found)
            queue.extend(found - schemas.keys())
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": paths,
            "components": {
                "schemas": schemas,
                "securitySchemes": {
                    "BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}
                },
            },
            "security": [{"BearerToken": []}],
        }

    def _paths(self, rtype: ResourceType, name: str, list_name: str | None) -> dict[str, Any]:
        base = f"/apis/{rtype.group}/{rtype.version}" if rtype.group else f"/api/{rtype.version}"
        scoped = (
            f"{base}/namespaces/{{namespace}}/{rtype.plural}"
            if rtype.namespaced
            else (f"{base}/{rtype.plural}")
        )
        gvk = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
        ref = {"$ref": f"#/components/schemas/{name}"}
        ns_param = {
            "name": "namespace",
            "in": "path",
            "description": "object name and auth scope, such as for teams and projects",
            "required": True,
            "schema": {"type": "string", "uniqueItems": True},
        }
        name_param = {
            "name": "name",
            "in": "path",
            "description": f"name of the {rtype.kind}",
            "required": True,
            "schema": {"type": "string", "uniqueItems": True},
        }
        tag = f"{rtype.group or 'core'}_{rtype.version}"

        def op(
            action: str,
            op_id: str,
            *,
            body: bool,
            patch: bool = False,
            out: Any = ref,
            gvk_: dict[str, str] = gvk,
        ) -> dict[str, Any]:
            operation: dict[str, Any] = {
                "tags": [tag],
                "operationId": op_id,
                "responses": {
                    "200": {"description": "OK", "content": {"application/json": {"schema": out}}},
                    "401": {"description": "Unauthorized"},
                },
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk_,
            }
            params: list[dict[str, Any]] = []
            if body:
                params = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
                if patch:
                    params.append(_FORCE)
                content_types = _patch_content(rtype) if patch else ("*/*",)
                body_ref = {"$ref": f"#/components/schemas/{_META}Patch"} if patch else out
                operation["requestBody"] = {
                    "content": {ct: {"schema": body_ref} for ct in content_types},
                    "required": True,
                }
            if params:
                operation["parameters"] = params
            return operation

        kind = rtype.kind
        scope = "Namespaced" if rtype.namespaced else ""
        collection_params = [ns_param] if rtype.namespaced else []
        item_params = [name_param, *collection_params]
        list_ref = {"$ref": f"#/components/schemas/{list_name}"} if list_name else ref
        status_ref = {"$ref": f"#/components/schemas/{_META}Status"}
        paths: dict[str, Any] = {
            scoped: {
                "get": op("list", f"list{scope}{kind}", body=False, out=list_ref),
                "post": op("post", f"create{scope}{kind}", body=True),
                "delete": op(
                    "deletecollection", f"deleteCollection{scope}{kind}", body=False, out=status_ref
                ),
                "parameters": collection_params,
            },
            f"{scoped}/{{name}}": {
                "get": op("get", f"read{scope}{kind}", body=False),
                "put": op("put", f"replace{scope}{kind}", body=True),
                "patch": op("patch", f"patch{scope}{kind}", body=True, patch=True),
                "delete": op("delete", f"delete{scope}{kind}", body=False, out=status_ref),
                "parameters": item_params,
            },
        }
        # Publish only the operations the resource takes.
        actions = {
            "get": "get",
            "post": "create",
            "put": "update",
            "patch": "patch",
        }
        for item in list(paths.values()):
            for method in [m for m in item if m != "parameters"]:
                action = item[method]["x-kubernetes-action"]
                verb = actions.get(action, action)
                if verb not in rtype.verbs:
                    del item[method]
        paths = {k: v for k, v in paths.items() if set(v) - {"parameters"}}
        if rtype.namespaced and "list" in rtype.verbs:
            paths[f"{base}/{rtype.plural}"] = {
                "get": op("list", f"list{kind}ForAllNamespaces", body=False, out=list_ref)
            }
        for sub in rtype.subresources:
            if sub == "scale":
                sub_ref = {"$ref": "#/components/schemas/io.k8s.api.autoscaling.v1.Scale"}
                sub_gvk = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
            else:
                sub_ref, sub_gvk = ref, gvk
            title = sub.capitalize()
            paths[f"{scoped}/{{name}}/{sub}"] = {
                "get": op(
                    "get", f"read{scope}{kind}{title}", body=False, out=sub_ref, gvk_=sub_gvk
                ),
                "put": op(
                    "put", f"replace{scope}{kind}{title}", body=True, out=sub_ref, gvk_=sub_gvk
                ),
                "patch": op(
                    "patch",
                    f"patch{scope}{kind}{title}",
                    body=True,
                    patch=True,
                    out=sub_ref,
                    gvk_=sub_gvk,
                ),
                "parameters": item_params,
            }
        return paths
