"""The writes placement makes: the spot companion Deployment and the user's on-demand pin.

Only the actuator uses this module (as it does :mod:`scaler.kube.writer`).

- :meth:`KubeCompanions.read_deployment`: the user's Deployment as JSON (the
  companion is built from its whole pod template, which the watches do not
  keep).
- :meth:`KubeCompanions.ensure_companion`: create the companion, or, when
  its template hash differs (the user changed the template), replace its
  pod template, labels and annotations whole with a JSON patch (RFC 6902)
  that first tests the read ``resourceVersion``; its ``spec.replicas`` is
  left alone (the scale is the scale writes' business). A JSON patch rather
  than a merge patch, which cannot remove what the user removed from the
  template; and rather than an update (PUT), so the scaler's RBAC needs no
  ``update`` on Deployments. A failed test (someone wrote in between: 422
  or 409) is read again and retried.
- :meth:`KubeCompanions.delete_companion`: delete it (gone already is fine).
- :meth:`KubeCompanions.patch_deployment`: a JSON merge patch on the user's
  Deployment (the pin and its removal, :mod:`scaler.policy.placement.companion`).

All failures come out as :mod:`groundwork.kube.errors` types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from groundwork.kube.errors import Conflict, NotFound, translate
from groundwork.kube.raw import call_json
from scaler.policy.placement.companion import TEMPLATE_HASH

__all__ = ["KubeCompanions"]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
_CALL_ERRORS = (ApiException, aiohttp.ClientError, OSError, TimeoutError)
Obj = dict[str, Any]


class KubeCompanions:
    def __init__(
        self, api: client.ApiClient, *, request_timeout_s: float = 10.0, max_attempts: int = 5
    ) -> None:
        self._apps: Any = client.AppsV1Api(api)
        self._timeout_s = request_timeout_s
        self._max_attempts = max_attempts

    async def read_deployment(self, namespace: str, name: str) -> Obj | None:
        """The Deployment as the API server serves it, ``None`` when there is none."""
        try:
            return await call_json(
                self._apps.read_namespaced_deployment,
                name,
                namespace,
                doing=f"read deployment {namespace}/{name}",
                request_timeout_s=self._timeout_s,
            )
        except NotFound:
            return None

    async def ensure_companion(self, body: Mapping[str, Any]) -> str:
        """Create or replace the companion so it matches ``body``; says what it did.

        ``"created"``, ``"replaced"`` (template hash differed) or ``"unchanged"``.
        """
        meta = body["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        doing = f"write spot companion {namespace}/{name}"
        for _ in range(self._max_attempts):
            current = await self.read_deployment(namespace, name)
            try:
                if current is None:
                    await self._apps.create_namespaced_deployment(
                        namespace, dict(body), _request_timeout=self._timeout_s
                    )
                    return "created"
                current_meta = current.get("metadata") or {}
                have = (current_meta.get("annotations") or {}).get(TEMPLATE_HASH)
                if have == meta["annotations"][TEMPLATE_HASH]:
                    return "unchanged"
                ops = [
                    {
                        "op": "test",
                        "path": "/metadata/resourceVersion",
                        "value": current_meta.get("resourceVersion"),
                    },
                    {"op": "replace", "path": "/spec/template", "value": body["spec"]["template"]},
                    {"op": "add", "path": "/metadata/labels", "value": meta.get("labels") or {}},
                    {
                        "op": "add",
                        "path": "/metadata/annotations",
                        "value": meta.get("annotations") or {},
                    },
                ]
                await self._apps.patch_namespaced_deployment(
                    name,
                    namespace,
                    ops,
                    _content_type=JSON_PATCH,
                    _request_timeout=self._timeout_s,
                )
                return "replaced"
            except _CALL_ERRORS as exc:
                err = translate(exc, doing=doing)
                if isinstance(err, Conflict) or err.status == 422:
                    continue  # created or changed meanwhile: look again
                raise err from exc
        raise Conflict(
            f"{doing}: still conflicting after {self._max_attempts} attempts", status=409
        )

    async def delete_companion(self, namespace: str, name: str) -> bool:
        """Delete it (its pods go with it); ``False`` when it was already gone."""
        try:
            await self._apps.delete_namespaced_deployment(
                name,
                namespace,
                propagation_policy="Background",
                _request_timeout=self._timeout_s,
            )
        except _CALL_ERRORS as exc:
            err = translate(exc, doing=f"delete spot companion {namespace}/{name}")
            if isinstance(err, NotFound):
                return False
            raise err from exc
        return True

    async def patch_deployment(self, namespace: str, name: str, patch: Mapping[str, Any]) -> str:
        """Merge-patch the Deployment; its new ``resourceVersion``."""
        try:
            got: Any = await self._apps.patch_namespaced_deployment(
                name,
                namespace,
                dict(patch),
                _content_type=MERGE_PATCH,
                _request_timeout=self._timeout_s,
            )
        except _CALL_ERRORS as exc:
            raise translate(exc, doing=f"patch deployment {namespace}/{name}") from exc
        return str(got.metadata.resource_version)
