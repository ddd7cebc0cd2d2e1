"""Writes of whole objects: create (``generateName``, ``dryRun``) and update.

Main decision: server-owned metadata (uid, resourceVersion, timestamps,
generation) and, where the kind has one, ``status`` are dropped from a create
body; an update with a stale ``resourceVersion`` is a 409, also in dry run;
``fieldManager`` is recorded in ``managedFields`` as kubectl expects.
"""

from __future__ import annotations

from aiohttp import web

from loadtests.sandbox.cluster import defaults
from loadtests.sandbox.cluster.apiserver.context import ResourceContext
from loadtests.sandbox.cluster.apiserver.routing import ResourceRequest
from loadtests.sandbox.cluster.apiserver.scale import write_scale
from loadtests.sandbox.cluster.apiserver.wire import (
    Obj,
    check_kind,
    decode_body,
    is_dry_run,
    json_response,
    read_body,
)
from loadtests.sandbox.cluster.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Invalid,
)
from loadtests.sandbox.cluster.resources import ResourceType
from loadtests.sandbox.cluster.store import rfc3339

__all__ = ["create_object", "dry_run_create", "record_manager", "update_object"]


async def create_object(
    ctx: ResourceContext, request: web.Request, req: ResourceRequest
) -> web.Response:
    rtype = req.rtype
    body = check_kind(rtype, await read_body(request))
    warnings = decode_body(rtype, body, request)
    obj = ctx.from_wire(rtype, body)
    meta = obj.setdefault("metadata", {})
    for key in (
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "generation",
    ):
        meta.pop(key, None)
    if rtype.has_status:
        obj.pop("status", None)
    defaults.apply_defaults(obj, rtype.kind, creating=True)
    record_manager(ctx, obj, request, operation="Update")
    storage = ctx.storage_type(rtype)
    if is_dry_run(request):
        created = dry_run_create(ctx, storage, obj, req.namespace)
    else:
        created = ctx.store.create(storage, obj, namespace=req.namespace)
    return json_response(ctx.to_wire(rtype, created), status=201, warnings=warnings)


def dry_run_create(
    ctx: ResourceContext, storage: ResourceType, obj: Obj, namespace: str | None
) -> Obj:
    meta = obj["metadata"]
    if storage.namespaced:
        meta["namespace"] = namespace or meta.get("namespace") or "default"
    if not meta.get("name") and not meta.get("generateName"):
        raise Invalid.of(
            kind=storage.kind,
            group=storage.group,
            name="",
            causes=[("metadata.name", "Required value: name or generateName is required")],
        )
    if (
        meta.get("name")
        and ctx.store.peek(storage, meta.get("namespace"), meta["name"]) is not None
    ):
        raise AlreadyExists.of(storage.group, storage.plural, meta["name"])
    meta.setdefault("name", meta.get("generateName", "") + "dryrun")
    meta["creationTimestamp"] = rfc3339(ctx.store.now())
    obj["apiVersion"], obj["kind"] = storage.api_version, storage.kind
    return obj


def record_manager(ctx: ResourceContext, obj: Obj, request: web.Request, *, operation: str) -> None:
    manager = request.query.get("fieldManager")
    if not manager and operation != "Apply":
        return
    meta = obj.setdefault("metadata", {})
    entries = [
        e
        for e in meta.get("managedFields") or []
        if not (e.get("manager") == manager and e.get("operation") == operation)
    ]
    entries.append(
        {
            "manager": manager or "unknown",
            "operation": operation,
            "apiVersion": obj.get("apiVersion", ""),
            "time": rfc3339(ctx.store.now()),
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        }
    )
    meta["managedFields"] = entries


async def update_object(
    ctx: ResourceContext, request: web.Request, req: ResourceRequest
) -> web.Response:
    assert req.name is not None
    rtype = req.rtype
    if req.subresource == "scale":
        body = await read_body(request)
        return write_scale(
            ctx,
            req,
            check_kind(rtype, body, expected_kind="Scale", expected_api_version="autoscaling/v1"),
        )
    body = check_kind(rtype, await read_body(request))
    meta = body.setdefault("metadata", {})
    if meta.get("name") and meta["name"] != req.name:
        raise BadRequest(
            f"the name of the object ({meta['name']}) does not match the name on the URL "
            f"({req.name})"
        )
    meta["name"] = req.name
    if req.namespace and meta.get("namespace") not in (None, "", req.namespace):
        raise BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    warnings = decode_body(rtype, body, request)
    obj = ctx.from_wire(rtype, body)
    defaults.apply_defaults(obj, rtype.kind, creating=False)
    record_manager(ctx, obj, request, operation="Update")
    storage = ctx.storage_type(rtype)
    if is_dry_run(request):
        current = ctx.store.get(storage, req.namespace, req.name)
        rv = obj["metadata"].get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise Conflict.stale(rtype.group, rtype.plural, req.name)
        return json_response(ctx.to_wire(rtype, obj), warnings=warnings)
    updated = ctx.store.update(storage, obj, namespace=req.namespace, subresource=req.subresource)
    return json_response(ctx.to_wire(rtype, updated), warnings=warnings)
