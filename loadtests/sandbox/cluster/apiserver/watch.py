"""Watch streams: replay from a version, bookmarks, ``timeoutSeconds``, Tables.

Main decision: a watch from a compacted version is accepted and then ended
with the 410 as an ``ERROR`` event, as the real server does, so clients take
their re-list path; every stream is registered in the context so that
``cut_watches`` can end it.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from loadtests.sandbox.cluster import tables
from loadtests.sandbox.cluster.apiserver.context import ResourceContext
from loadtests.sandbox.cluster.apiserver.routing import ResourceRequest
from loadtests.sandbox.cluster.apiserver.wire import (
    Obj,
    dumps,
    truthy,
)
from loadtests.sandbox.cluster.errors import (
    BadRequest,
    Gone,
)
from loadtests.sandbox.cluster.resources import ResourceType
from loadtests.sandbox.cluster.selectors import FieldSelector, parse_field_selector
from loadtests.sandbox.cluster.watch_history import Watcher, WatchEvent

__all__ = ["bookmark_line", "serve_watch", "table_event_line"]


async def serve_watch(
    ctx: ResourceContext, request: web.Request, req: ResourceRequest
) -> web.StreamResponse:
    rtype = req.rtype
    labels, fields = ctx.selectors(request, rtype)
    if req.name:
        fields = FieldSelector(
            (
                *fields.requirements,
                *parse_field_selector(f"metadata.name={req.name}").requirements,
            )
        )
    query = request.query
    send_initial = truthy(query.get("sendInitialEvents"))
    resource_version = None if send_initial else query.get("resourceVersion")
    timeout_s: float | None = None
    if query.get("timeoutSeconds"):
        try:
            timeout_s = float(query["timeoutSeconds"])
        except ValueError:
            raise BadRequest(
                f"timeoutSeconds must be a number, got {query['timeoutSeconds']!r}"
            ) from None
    bookmarks = truthy(query.get("allowWatchBookmarks"))
    accept = request.headers.get("Accept", "")
    as_table = tables.wants_table(accept)
    response = web.StreamResponse(status=200)
    response.content_type = "application/json"
    if as_table:
        response.headers["Content-Type"] = "application/json;as=Table;v=v1;g=meta.k8s.io"
    response.headers["Transfer-Encoding"] = "chunked"
    try:
        watcher = ctx.store.watch(
            ctx.storage_type(rtype),
            namespace=req.namespace,
            resource_version=resource_version,
            labels=labels,
            fields=fields,
        )
    except Gone as gone:
        # The real server accepts the watch, then sends the 410 as an ERROR event.
        await response.prepare(request)
        await response.write(dumps({"type": "ERROR", "object": gone.status()}) + b"\n")
        await response.write_eof()
        return response
    ctx.watches.add(watcher)
    initial_left = watcher.pending() if send_initial else -1
    include = query.get("includeObject", "Metadata")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s if timeout_s else None
    headers_sent = False
    try:
        await response.prepare(request)
        if initial_left == 0:
            await response.write(bookmark_line(rtype, watcher, initial_end=True))
            initial_left = -1
        while True:
            wait_s = ctx.bookmark_interval_s if bookmarks else None
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    break
                wait_s = min(wait_s, left) if wait_s is not None else left
            event = await watcher.next(wait_s)
            if event is None:
                if watcher.closed:
                    break
                if bookmarks and not as_table and (deadline is None or loop.time() < deadline):
                    await response.write(bookmark_line(rtype, watcher))
                continue
            if as_table:
                line = table_event_line(ctx, rtype, event, include, headers=not headers_sent)
                headers_sent = True
            else:
                obj = ctx.to_wire(rtype, event.object)
                line = dumps({"type": event.type, "object": obj}) + b"\n"
            await response.write(line)
            if initial_left > 0:
                initial_left -= 1
                if initial_left == 0:
                    await response.write(bookmark_line(rtype, watcher, initial_end=True))
                    initial_left = -1
    except ConnectionResetError:
        return response  # the client went away mid-write: nothing left to say
    finally:
        watcher.close()
        ctx.watches.discard(watcher)
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()
    return response


def bookmark_line(rtype: ResourceType, watcher: Watcher, *, initial_end: bool = False) -> bytes:
    metadata: Obj = {"resourceVersion": str(max(watcher.last_rv, 1))}
    if initial_end:
        metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
    return (
        dumps(
            {
                "type": "BOOKMARK",
                "object": {
                    "kind": rtype.kind,
                    "apiVersion": rtype.api_version,
                    "metadata": metadata,
                },
            }
        )
        + b"\n"
    )


def table_event_line(
    ctx: ResourceContext, rtype: ResourceType, event: WatchEvent, include: str, *, headers: bool
) -> bytes:
    wire = ctx.to_wire(rtype, event.object)
    table = tables.table_for(
        rtype,
        [wire],
        resource_version=str(wire.get("metadata", {}).get("resourceVersion", "")),
        include_object=include,
        headers=headers,
        row_source=ctx.printed_form(rtype),
    )
    return dumps({"type": event.type, "object": table}) + b"\n"
