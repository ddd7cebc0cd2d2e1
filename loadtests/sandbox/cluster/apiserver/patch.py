"""PATCH: JSON patch, merge patch, strategic merge patch and server-side apply.

Main decision: a patch without a ``resourceVersion`` applies to whatever is
stored now (no 409); one that sets it is checked like an update. An apply
patch to a missing object creates it (it needs a ``fieldManager``). A custom
kind takes no strategic merge patch (415), as on the real server.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from loadtests.sandbox.cluster import defaults, patching
from loadtests.sandbox.cluster.apiserver.context import ResourceContext
from loadtests.sandbox.cluster.apiserver.routing import ResourceRequest
from loadtests.sandbox.cluster.apiserver.scale import scale_of, write_scale
from loadtests.sandbox.cluster.apiserver.wire import (
    Obj,
    check_kind,
    decode_body,
    is_dry_run,
    json_response,
    read_body,
)
from loadtests.sandbox.cluster.apiserver.writes import record_manager
from loadtests.sandbox.cluster.custom_resources import is_custom
from loadtests.sandbox.cluster.errors import (
    BadRequest,
    NotFound,
    UnsupportedMediaType,
)
from loadtests.sandbox.cluster.schemas import definitions
from loadtests.sandbox.cluster.store import copy_object

__all__ = ["apply_create", "apply_patch", "patch_object", "patch_sets_version"]


async def patch_object(
    ctx: ResourceContext, request: web.Request, req: ResourceRequest
) -> web.Response:
    assert req.name is not None
    rtype = req.rtype
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    if content_type not in patching.PATCH_TYPES:
        raise UnsupportedMediaType(
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(patching.PATCH_TYPES)}"
        )
    if content_type == patching.STRATEGIC and is_custom(rtype.group, rtype.version, rtype.kind):
        raise UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(t for t in patching.PATCH_TYPES if t != patching.STRATEGIC)}"
        )
    patch = await read_body(request)
    storage = ctx.storage_type(rtype)
    defs = definitions(strict=False)
    if req.subresource == "scale":
        current_obj = ctx.store.get(storage, req.namespace, req.name)
        scale = scale_of(rtype, current_obj)
        schema = defs.kind_schema("autoscaling", "v1", "Scale")
        patched = apply_patch(content_type, scale, patch, defs, schema)
        return write_scale(ctx, req, patched)
    existing = ctx.store.peek(storage, req.namespace, req.name)
    if existing is None:
        if content_type == patching.APPLY and not req.subresource:
            return await apply_create(ctx, request, req, patch)
        raise NotFound.of(rtype.group, rtype.plural, req.name)
    current = ctx.to_wire(rtype, copy_object(existing))
    schema = defs.kind_schema(rtype.group, rtype.version, rtype.kind)
    patched = apply_patch(content_type, current, patch, defs, schema)
    if not isinstance(patched, dict):
        raise BadRequest("the patched object is not a JSON object")
    meta = patched.setdefault("metadata", {})
    if meta.get("name") != req.name:
        raise BadRequest("metadata.name cannot be changed by a patch")
    # Without a version in the patch, a patch applies to whatever is stored now.
    if not patch_sets_version(patch, content_type):
        meta["resourceVersion"] = existing["metadata"]["resourceVersion"]
    patched["apiVersion"], patched["kind"] = rtype.api_version, rtype.kind
    try:
        warnings = decode_body(rtype, patched, request)
    except BadRequest as error:
        if "strict decoding error" in error.message:
            raise BadRequest(error.message.split(": ", 1)[1]) from None
        raise
    obj = ctx.from_wire(rtype, patched)
    defaults.apply_defaults(obj, rtype.kind, creating=False)
    record_manager(
        ctx, obj, request, operation="Apply" if content_type == patching.APPLY else "Update"
    )
    if is_dry_run(request):
        return json_response(ctx.to_wire(rtype, obj), warnings=warnings)
    updated = ctx.store.update(storage, obj, namespace=req.namespace, subresource=req.subresource)
    return json_response(ctx.to_wire(rtype, updated), warnings=warnings)


def apply_patch(content_type: str, current: Obj, patch: Any, defs: Any, schema: Any) -> Any:
    if content_type == patching.JSON_PATCH:
        return patching.apply_json_patch(current, patch)
    if content_type == patching.MERGE:
        if not isinstance(patch, dict):
            raise BadRequest("a merge patch must be a JSON object")
        return patching.apply_merge_patch(current, patch)
    return patching.apply_strategic_merge_patch(current, patch, defs=defs, schema=schema)


async def apply_create(
    ctx: ResourceContext, request: web.Request, req: ResourceRequest, patch: Any
) -> web.Response:
    rtype = req.rtype
    if request.query.get("fieldManager") is None:
        raise BadRequest("PATCH, fieldManager: Required value: is required for apply patch")
    body = check_kind(rtype, copy_object(patch))
    body.setdefault("metadata", {})["name"] = req.name
    warnings = decode_body(rtype, body, request)
    obj = ctx.from_wire(rtype, body)
    if rtype.has_status:
        obj.pop("status", None)
    defaults.apply_defaults(obj, rtype.kind, creating=True)
    record_manager(ctx, obj, request, operation="Apply")
    if is_dry_run(request):
        return json_response(ctx.to_wire(rtype, obj), status=201, warnings=warnings)
    created = ctx.store.create(ctx.storage_type(rtype), obj, namespace=req.namespace)
    return json_response(ctx.to_wire(rtype, created), status=201, warnings=warnings)


def patch_sets_version(patch: Any, content_type: str) -> bool:
    if content_type == patching.JSON_PATCH:
        return isinstance(patch, list) and any(
            isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion" for op in patch
        )
    return isinstance(patch, dict) and bool((patch.get("metadata") or {}).get("resourceVersion"))
