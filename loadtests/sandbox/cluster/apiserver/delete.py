"""DELETE of one object and of a collection, with ``DeleteOptions``.

Main decision: options come from the body and the query (the query wins);
pods, namespaces and objects still held by finalizers or a grace period are
answered with the object (202 while pending, except pods), others with a
``Status`` of Success, as the real server does.
"""

from __future__ import annotations

import contextlib
import json

from aiohttp import web

from loadtests.sandbox.cluster.apiserver.context import ResourceContext
from loadtests.sandbox.cluster.apiserver.routing import ResourceRequest
from loadtests.sandbox.cluster.apiserver.wire import (
    Obj,
    json_response,
    truthy,
)
from loadtests.sandbox.cluster.errors import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
)
from loadtests.sandbox.cluster.resources import ResourceType

__all__ = ["delete_collection", "delete_object", "delete_one", "delete_options"]


async def delete_options(request: web.Request) -> Obj:
    options: Obj = {}
    if request.can_read_body:
        raw = await request.read()
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError as error:
                raise BadRequest(f"the DeleteOptions body is not JSON: {error}") from None
            if isinstance(body, dict):
                options.update(body)
    query = request.query
    if "gracePeriodSeconds" in query:
        options["gracePeriodSeconds"] = query["gracePeriodSeconds"]
    if "propagationPolicy" in query:
        options["propagationPolicy"] = query["propagationPolicy"]
    if "orphanDependents" in query:
        options["orphanDependents"] = truthy(query["orphanDependents"])
    if "dryRun" in query:
        options["dryRun"] = query.getall("dryRun")
    return options


def delete_one(
    ctx: ResourceContext, rtype: ResourceType, namespace: str | None, name: str, options: Obj
) -> Obj:
    grace = options.get("gracePeriodSeconds")
    try:
        grace_s = int(grace) if grace is not None else None
    except (TypeError, ValueError):
        raise BadRequest(f"gracePeriodSeconds must be an integer, got {grace!r}") from None
    propagation = options.get("propagationPolicy")
    if propagation is None and options.get("orphanDependents") is True:
        propagation = "Orphan"
    preconditions = options.get("preconditions") or {}
    return ctx.store.delete(
        ctx.storage_type(rtype),
        namespace,
        name,
        grace_period_s=grace_s,
        propagation=propagation,
        precondition_uid=preconditions.get("uid"),
        precondition_rv=preconditions.get("resourceVersion"),
    )


async def delete_object(
    ctx: ResourceContext, request: web.Request, req: ResourceRequest
) -> web.Response:
    assert req.name is not None
    rtype = req.rtype
    if req.subresource:
        raise MethodNotAllowed(f"delete is not supported on {rtype.plural}/{req.subresource}")
    options = await delete_options(request)
    if options.get("dryRun"):
        stored = ctx.store.get(ctx.storage_type(rtype), req.namespace, req.name)
        return json_response(ctx.to_wire(rtype, stored))
    result = delete_one(ctx, rtype, req.namespace, req.name, options)
    pending = (
        bool(result["metadata"].get("deletionTimestamp"))
        and ctx.store.peek(ctx.storage_type(rtype), req.namespace, req.name) is not None
    )
    if rtype.plural in ("pods", "namespaces") or pending:
        return json_response(
            ctx.to_wire(rtype, result),
            status=202 if pending and rtype.plural != "pods" else 200,
        )
    details: Obj = {
        "name": req.name,
        "kind": rtype.plural,
        "uid": result["metadata"].get("uid"),
    }
    if rtype.group:
        details["group"] = rtype.group
    return json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }
    )


async def delete_collection(
    ctx: ResourceContext, request: web.Request, req: ResourceRequest
) -> web.Response:
    rtype = req.rtype
    options = await delete_options(request)
    labels, fields = ctx.selectors(request, rtype)
    items, _ = ctx.store.list(
        ctx.storage_type(rtype), namespace=req.namespace, labels=labels, fields=fields
    )
    deleted = []
    if not options.get("dryRun"):
        for obj in items:
            meta = obj["metadata"]
            with contextlib.suppress(NotFound):
                deleted.append(delete_one(ctx, rtype, meta.get("namespace"), meta["name"], options))
    else:
        deleted = items
    return json_response(
        {
            "kind": f"{rtype.kind}List",
            "apiVersion": rtype.api_version,
            "metadata": {"resourceVersion": ctx.store.resource_version},
            "items": [ctx.to_wire(rtype, o) for o in deleted],
        }
    )
