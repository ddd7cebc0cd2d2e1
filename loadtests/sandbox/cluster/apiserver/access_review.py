"""``SelfSubjectAccessReview``: may the caller do this? (``kubectl auth can-i``).

Main decision: the review is answered by the same authorizer that guards
requests, so ``can-i`` and the real outcome cannot disagree; with RBAC off
every review is allowed. kubectl sends the body in protobuf (read by
``wire.read_body``).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from loadtests.sandbox.cluster.apiserver.routing import ResourceRequest
from loadtests.sandbox.cluster.apiserver.wire import check_kind, json_response, read_body
from loadtests.sandbox.cluster.auth import UserInfo
from loadtests.sandbox.cluster.errors import Invalid
from loadtests.sandbox.cluster.rbac import Attributes

__all__ = ["access_review"]


async def access_review(
    request: web.Request,
    user: UserInfo,
    req: ResourceRequest,
    *,
    allowed: Callable[[Attributes], bool],
) -> web.Response:
    review = check_kind(req.rtype, await read_body(request))
    spec = review.get("spec") or {}
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if isinstance(resource, dict):
        attrs = Attributes(
            user=user,
            verb=str(resource.get("verb", "")),
            resource_request=True,
            api_group=str(resource.get("group", "")),
            resource=str(resource.get("resource", "")),
            subresource=str(resource.get("subresource", "")),
            namespace=str(resource.get("namespace", "")),
            name=str(resource.get("name", "")),
        )
    elif isinstance(non_resource, dict):
        attrs = Attributes(
            user=user,
            verb=str(non_resource.get("verb", "")),
            resource_request=False,
            path=str(non_resource.get("path", "")),
        )
    else:
        raise Invalid.of(
            kind="SelfSubjectAccessReview",
            group="authorization.k8s.io",
            name="",
            causes=[
                (
                    "spec.resourceAttributes",
                    "Required value: exactly one of nonResourceAttributes or "
                    "resourceAttributes must be specified",
                )
            ],
        )
    review["status"] = {"allowed": allowed(attrs)}
    review.setdefault("metadata", {})["creationTimestamp"] = None
    return json_response(review, status=201)
