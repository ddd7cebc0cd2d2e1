"""The ``scale`` subresource: the ``autoscaling/v1`` Scale view of an object.

Main decision: a Scale write changes only ``spec.replicas`` of the stored
object and is refused with 409 when its ``resourceVersion`` is stale.
"""

from __future__ import annotations

from aiohttp import web

from loadtests.sandbox.cluster import validation
from loadtests.sandbox.cluster.apiserver.context import ResourceContext
from loadtests.sandbox.cluster.apiserver.routing import ResourceRequest
from loadtests.sandbox.cluster.apiserver.wire import (
    Obj,
    json_response,
)
from loadtests.sandbox.cluster.errors import (
    Conflict,
)
from loadtests.sandbox.cluster.resources import ResourceType
from loadtests.sandbox.cluster.selectors import selector_string

__all__ = ["scale_of", "write_scale"]


def scale_of(rtype: ResourceType, obj: Obj) -> Obj:
    meta = obj["metadata"]
    selector = (obj.get("spec") or {}).get("selector")
    scale_meta = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if k in meta
    }
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": int((obj.get("spec") or {}).get("replicas", 0))},
        "status": {
            "replicas": int((obj.get("status") or {}).get("replicas", 0)),
            "selector": selector_string(selector),
        },
    }


def write_scale(ctx: ResourceContext, req: ResourceRequest, scale: Obj) -> web.Response:
    assert req.name is not None
    rtype = req.rtype
    validation.validate_object(
        scale,
        group="autoscaling",
        version="v1",
        kind="Scale",
        namespaced=True,
        field_validation="Ignore",
    )
    current = ctx.store.get(rtype, req.namespace, req.name)
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv and rv != current["metadata"]["resourceVersion"]:
        raise Conflict.stale(rtype.group, rtype.plural, req.name)
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        replicas = 0
    current.setdefault("spec", {})["replicas"] = replicas
    updated = ctx.store.update(rtype, current, namespace=req.namespace)
    return json_response(scale_of(rtype, updated))
