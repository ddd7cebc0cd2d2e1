"""The scaler's writes: ``/scale``, pod-deletion-cost, the status annotation, Events.

- **Scale**: a merge patch of ``spec.replicas`` through ``/scale`` carrying the
  ``resourceVersion`` the caller's decision was based on, so a Deployment
  that changed since (another writer, a new leader) makes the API server
  answer 409 instead of one write silently replacing the other. A conflict
  is *not* retried here with a fresh version: re-applying the old decision
  to a changed object is what the precondition prevents. The caller re-reads
  (:meth:`KubeScaleTarget.read_scale`) and decides again. The new
  ``resourceVersion`` is returned, for the next write's precondition.
- **Pod-deletion-cost**: a merge patch of one annotation per pod (``None``
  removes it, to undo a ranking); a pod that is already gone (404) is skipped.
  A pod's awake label (an InferencePool's picker routes only to awake pods,
  docs/gateway-api.md) is a merge patch the same way.
- **Status annotation**: a JSON patch (RFC 6902) that adds one annotation
  (metadata only, so no new rollout and no generation bump) after testing
  that ``spec.replicas`` is still the scale the status describes. Not the
  ``resourceVersion``: the Deployment controller writes the Deployment's
  status right after every scale (observed generation, replica counts), so
  the version a scale returns is stale within milliseconds and a status
  written on it conflicts with the very scale it records. What the status
  must not outlive is the scale, so that is what it tests; a failed test
  (HTTP 422) comes out as a :class:`~groundwork.kube.errors.Conflict`, as a
  stale version would.
- **Events**: core/v1 Events involving the Deployment (or, for what is
  wrong with an InferencePool, the pool), from component ``tidal-scaler``.

All failures come out as :mod:`groundwork.kube.errors` types. Only
:mod:`scaler.actuator` imports this module (an import contract in
pyproject.toml): every write the scaler makes goes through it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from groundwork.kube.errors import Conflict, KubeError, NotFound, translate
from groundwork.kube.raw import check_response
from scaler.kube.types import POD_DELETION_COST, STATUS_ANNOTATION, EventSubject, ScaleState
from scaler.policy.warm_tier.node_preference import prefer_node, preferred_node

__all__ = ["COMPONENT", "KubeEvents", "KubeScaleTarget"]

log = logging.getLogger(__name__)

COMPONENT = "tidal-scaler"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
# What a kubernetes_asyncio call raises when it fails: HTTP errors, and
# connection errors (aiohttp.ClientError is not always an OSError).
_CALL_ERRORS = (ApiException, aiohttp.ClientError, OSError, TimeoutError)


class KubeScaleTarget:
    """A :class:`~scaler.kube.types.ScaleTarget` over the real API."""

    def __init__(self, api: client.ApiClient, *, request_timeout_s: float = 10.0) -> None:
        self._apps: Any = client.AppsV1Api(api)
        self._core: Any = client.CoreV1Api(api)
        self._timeout_s = request_timeout_s
        self.conflicts = 0  # 409s answered to a precondition, for tests and metrics

    def _error(self, exc: BaseException, doing: str) -> KubeError:
        err = translate(exc, doing=doing)
        if isinstance(err, Conflict):
            self.conflicts += 1
        return err

    async def read_scale(self, namespace: str, name: str) -> ScaleState:
        try:
            current: Any = await self._apps.read_namespaced_deployment_scale(
                name, namespace, _request_timeout=self._timeout_s
            )
        except _CALL_ERRORS as exc:
            raise self._error(exc, f"read scale of deployment {namespace}/{name}") from exc
        replicas = int(current.spec.replicas or 0) if current.spec is not None else 0
        return ScaleState(replicas=replicas, resource_version=current.metadata.resource_version)

    async def scale(
        self, namespace: str, name: str, replicas: int, *, resource_version: str
    ) -> str:
        if not resource_version:
            raise ValueError(
                f"scale of {namespace}/{name}: a resourceVersion precondition is needed"
            )
        body = {"metadata": {"resourceVersion": resource_version}, "spec": {"replicas": replicas}}
        try:
            got: Any = await self._apps.patch_namespaced_deployment_scale(
                name, namespace, body, _content_type=MERGE_PATCH, _request_timeout=self._timeout_s
            )
        except _CALL_ERRORS as exc:
            doing = f"scale deployment {namespace}/{name} to {replicas}"
            raise self._error(exc, doing) from exc
        return str(got.metadata.resource_version)

    async def set_deletion_costs(self, namespace: str, costs: Mapping[str, int | None]) -> None:
        for pod, cost in costs.items():
            value = None if cost is None else str(int(cost))
            body = {"metadata": {"annotations": {POD_DELETION_COST: value}}}
            try:
                await self._core.patch_namespaced_pod(
                    pod,
                    namespace,
                    body,
                    _content_type=MERGE_PATCH,
                    _request_timeout=self._timeout_s,
                )
            except _CALL_ERRORS as exc:
                err = self._error(exc, f"set deletion cost of pod {namespace}/{pod}")
                if isinstance(err, NotFound):
                    continue  # already gone: nothing to rank
                raise err from exc

    async def set_pod_labels(self, namespace: str, key: str, values: Mapping[str, str]) -> None:
        """Set label ``key`` on each named pod (a merge patch; a pod gone is skipped)."""
        for pod, value in values.items():
            body = {"metadata": {"labels": {key: value}}}
            try:
                await self._core.patch_namespaced_pod(
                    pod,
                    namespace,
                    body,
                    _content_type=MERGE_PATCH,
                    _request_timeout=self._timeout_s,
                )
            except _CALL_ERRORS as exc:
                err = self._error(exc, f"label pod {namespace}/{pod} {key}={value}")
                if not isinstance(err, NotFound):
                    raise err from exc

    async def write_status(
        self,
        namespace: str,
        name: str,
        status_json: str,
        *,
        replicas: int,
        has_annotations: bool = True,
    ) -> str:
        doing = f"write status of {namespace}/{name}"
        key_path = "/metadata/annotations/" + _pointer_token(STATUS_ANNOTATION)
        test = {"op": "test", "path": "/spec/replicas", "value": replicas}
        ops: list[dict[str, Any]] = [test, {"op": "add", "path": key_path, "value": status_json}]
        if not has_annotations:
            # No annotation map to add a key to: add the map, but only onto the
            # object read now (a map that appeared meanwhile must not be replaced).
            current = await self._read(namespace, name, doing)
            meta = current.get("metadata") or {}
            if meta.get("annotations"):
                ops = [test, {"op": "add", "path": key_path, "value": status_json}]
            else:
                ops = [
                    test,
                    {"op": "test", "path": "/metadata/resourceVersion",
                     "value": meta.get("resourceVersion")},
                    {"op": "add", "path": "/metadata/annotations",
                     "value": {STATUS_ANNOTATION: status_json}},
                ]  # fmt: skip
        try:
            got: Any = await self._apps.patch_namespaced_deployment(
                name, namespace, ops, _content_type=JSON_PATCH, _request_timeout=self._timeout_s
            )
        except _CALL_ERRORS as exc:
            err = self._error(exc, doing)
            if err.status == 422 and "test failed" in str(err):
                # A failed test: the scale is no longer the one this status describes.
                err = Conflict(f"{doing}: spec.replicas is no longer {replicas}: {err}", status=409)
                self.conflicts += 1
            raise err from exc
        return str(got.metadata.resource_version)

    async def prefer_node(self, namespace: str, name: str, node: str | None) -> bool:
        """Make the Deployment's pod template prefer ``node`` (None: no preference of
        Tidal's; :mod:`scaler.policy.warm_tier.node_preference`); a template change
        is a rollout. False when the template already says so (nothing written).
        The write carries the ``resourceVersion`` read, so a Deployment changed
        meanwhile answers 409 and is left as it is."""
        doing = f"prefer node {node} for deployment {namespace}/{name}"
        current = await self._read(namespace, name, doing)
        template = (current.get("spec") or {}).get("template") or {}
        if preferred_node(template) == node:
            return False
        version = (current.get("metadata") or {}).get("resourceVersion")
        ops = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": "replace", "path": "/spec/template", "value": prefer_node(template, node)},
        ]
        try:
            await self._apps.patch_namespaced_deployment(
                name, namespace, ops, _content_type=JSON_PATCH, _request_timeout=self._timeout_s
            )
        except _CALL_ERRORS as exc:
            err = self._error(exc, doing)
            if err.status == 422 and "test failed" in str(err):
                err = Conflict(f"{doing}: the Deployment changed meanwhile: {err}", status=409)
            raise err from exc
        return True

    async def _read(self, namespace: str, name: str, doing: str) -> dict[str, Any]:
        try:
            resp = await self._apps.read_namespaced_deployment(
                name, namespace, _preload_content=False, _request_timeout=self._timeout_s
            )
            try:
                await check_response(resp, doing)
                data: dict[str, Any] = json.loads(await resp.read())
            finally:
                resp.release()
        except KubeError:
            raise
        except _CALL_ERRORS as exc:
            raise self._error(exc, doing) from exc
        return data


def _pointer_token(key: str) -> str:
    """``key`` as one JSON pointer token (RFC 6901: ``~`` and ``/`` escaped)."""
    return key.replace("~", "~0").replace("/", "~1")


def _now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeEvents:
    """An :class:`~scaler.kube.types.EventSink` writing core/v1 Events."""

    def __init__(
        self, api: client.ApiClient, *, instance: str, request_timeout_s: float = 10.0
    ) -> None:
        self._core: Any = client.CoreV1Api(api)
        self._instance = instance
        self._timeout_s = request_timeout_s

    async def emit(
        self, target: EventSubject, *, reason: str, message: str, warning: bool = False
    ) -> None:
        now = _now_rfc3339()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{target.name}.{uuid.uuid4().hex[:16]}",
                "namespace": target.namespace,
            },
            "involvedObject": {
                "apiVersion": target.api_version,
                "kind": target.kind,
                "name": target.name,
                "namespace": target.namespace,
                "uid": target.uid,
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance[:128],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self._core.create_namespaced_event(
                target.namespace, body, _request_timeout=self._timeout_s
            )
        except _CALL_ERRORS as exc:
            raise translate(exc, doing=f"create event {reason} for {target.key}") from exc
