"""Reads: get (an object or its ``scale``) and list, with ``limit``/``continue``.

Main decision: answers come in the form the client asks for in ``Accept`` (a
server-side Table for ``kubectl get``, PartialObjectMetadata, or the object);
a ``continue`` token goes on from the last key returned, at the current state,
because the store keeps no snapshots to serve the first page's.
"""

from __future__ import annotations

import base64
import json

from aiohttp import web

from loadtests.sandbox.cluster import tables
from loadtests.sandbox.cluster.apiserver.context import ResourceContext
from loadtests.sandbox.cluster.apiserver.routing import ResourceRequest
from loadtests.sandbox.cluster.apiserver.scale import scale_of
from loadtests.sandbox.cluster.apiserver.wire import (
    Obj,
    json_response,
)
from loadtests.sandbox.cluster.errors import (
    BadRequest,
)
from loadtests.sandbox.cluster.store import copy_object

__all__ = ["decode_continue", "encode_continue", "get_object", "list_objects", "render"]


def render(
    ctx: ResourceContext, request: web.Request, req: ResourceRequest, obj: Obj
) -> web.Response:
    accept = request.headers.get("Accept", "")
    if tables.wants_table(accept):
        table = tables.table_for(
            req.rtype,
            [obj],
            resource_version=str(obj.get("metadata", {}).get("resourceVersion", "")),
            include_object=request.query.get("includeObject", "Metadata"),
            row_source=ctx.printed_form(req.rtype),
        )
        return json_response(table, content_type="application/json;as=Table;v=v1;g=meta.k8s.io")
    if "as=PartialObjectMetadata" in accept:
        return json_response(
            {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        )
    return json_response(obj)


def get_object(ctx: ResourceContext, request: web.Request, req: ResourceRequest) -> web.Response:
    assert req.name is not None
    stored = ctx.store.get(ctx.storage_type(req.rtype), req.namespace, req.name)
    if req.subresource == "scale":
        return json_response(scale_of(req.rtype, stored))
    return render(ctx, request, req, ctx.to_wire(req.rtype, stored))


def list_objects(ctx: ResourceContext, request: web.Request, req: ResourceRequest) -> web.Response:
    rtype = req.rtype
    labels, fields = ctx.selectors(request, rtype)
    items, rv = ctx.store.list(
        ctx.storage_type(rtype),
        namespace=req.namespace,
        labels=labels,
        fields=fields,
        copy=False,
    )
    token = request.query.get("continue")
    if token:
        # The list goes on from the last key it returned, at the current
        # state (the store keeps no snapshots to serve the first page's).
        start_ns, start_name, _first_rv = decode_continue(token)
        start_after = (start_ns, start_name)
        items = [
            o
            for o in items
            if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start_after
        ]
    limit_text = request.query.get("limit")
    next_token: str | None = None
    remaining: int | None = None
    if limit_text:
        try:
            limit = int(limit_text)
        except ValueError:
            raise BadRequest(f"limit must be an integer, got {limit_text!r}") from None
        if 0 < limit < len(items):
            remaining = len(items) - limit
            items = items[:limit]
            last = items[-1]["metadata"]
            next_token = encode_continue(last.get("namespace", ""), last["name"], rv)
    wire = [ctx.to_wire(rtype, copy_object(o)) for o in items]
    if tables.wants_table(request.headers.get("Accept", "")):
        table = tables.table_for(
            rtype,
            wire,
            resource_version=rv,
            include_object=request.query.get("includeObject", "Metadata"),
            continue_token=next_token,
            remaining=remaining,
            row_source=ctx.printed_form(rtype),
        )
        return json_response(table, content_type="application/json;as=Table;v=v1;g=meta.k8s.io")
    metadata: Obj = {"resourceVersion": rv}
    if next_token:
        metadata["continue"] = next_token
        metadata["remainingItemCount"] = remaining
    if "as=PartialObjectMetadataList" in request.headers.get("Accept", ""):
        return json_response(
            {
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": metadata,
                "items": [
                    {
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": o["metadata"],
                    }
                    for o in wire
                ],
            }
        )
    return json_response(
        {
            "kind": f"{rtype.kind}List",
            "apiVersion": rtype.api_version,
            "metadata": metadata,
            "items": wire,
        }
    )


def encode_continue(namespace: str, name: str, rv: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": int(rv), "start": f"{namespace}\x00{name}"})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[str, str, str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded))
        namespace, name = str(data["start"]).split("\x00", 1)
        return namespace, name, str(data["rv"])
    except (ValueError, KeyError, TypeError):
        raise BadRequest(f"invalid continue token {token!r}") from None
