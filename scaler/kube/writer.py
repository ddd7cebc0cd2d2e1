"""The scaler's writes: ``/scale``, pod-deletion-cost, the status annotation, Events.

- **Scale**: read ``/scale``, then merge-patch ``spec.replicas`` carrying the
  read ``resourceVersion``, so a concurrent writer makes the API server answer
  409 instead of one write silently replacing the other; on 409, read again
  and retry (a few times, then give up until the next decision). The previous
  value is returned so the caller knows whether anything changed.
- **Pod-deletion-cost**: a merge patch of one annotation per pod; a pod that
  is already gone (404) is skipped.
- **Status annotation**: a merge patch of one annotation on the Deployment
  (metadata only, so no new rollout and no generation bump).
- **Events**: core/v1 Events involving the Deployment, from component
  ``tidal-scaler``.

All failures come out as :mod:`scaler.kube.errors` types. Only
:mod:`scaler.actuator` imports this module (an import contract in
pyproject.toml): every write the scaler makes goes through it.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from scaler.kube.errors import Conflict, NotFound, translate
from scaler.kube.types import POD_DELETION_COST, STATUS_ANNOTATION, DeploymentInfo

__all__ = ["COMPONENT", "KubeEvents", "KubeScaleTarget"]

log = logging.getLogger(__name__)

COMPONENT = "tidal-scaler"
MERGE_PATCH = "application/merge-patch+json"
# What a kubernetes_asyncio call raises when it fails: HTTP errors, and
# connection errors (aiohttp.ClientError is not always an OSError).
_CALL_ERRORS = (ApiException, aiohttp.ClientError, OSError, TimeoutError)


class KubeScaleTarget:
    """A :class:`~scaler.kube.types.ScaleTarget` over the real API."""

    def __init__(
        self, api: client.ApiClient, *, request_timeout_s: float = 10.0, max_attempts: int = 5
    ) -> None:
        self._apps: Any = client.AppsV1Api(api)
        self._core: Any = client.CoreV1Api(api)
        self._timeout_s = request_timeout_s
        self._max_attempts = max_attempts
        self.conflicts = 0  # retried 409s, for tests and metrics

    async def scale(self, namespace: str, name: str, replicas: int) -> int:
        doing = f"scale deployment {namespace}/{name} to {replicas}"
        for _ in range(self._max_attempts):
            try:
                current: Any = await self._apps.read_namespaced_deployment_scale(
                    name, namespace, _request_timeout=self._timeout_s
                )
            except _CALL_ERRORS as exc:
                raise translate(exc, doing=doing) from exc
            before = int(current.spec.replicas or 0) if current.spec is not None else 0
            if before == replicas:
                return before
            body = {
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "spec": {"replicas": replicas},
            }
            try:
                await self._apps.patch_namespaced_deployment_scale(
                    name,
                    namespace,
                    body,
                    _content_type=MERGE_PATCH,
                    _request_timeout=self._timeout_s,
                )
            except _CALL_ERRORS as exc:
                err = translate(exc, doing=doing)
                if isinstance(err, Conflict):
                    self.conflicts += 1
                    continue
                raise err from exc
            return before
        raise Conflict(
            f"{doing}: still conflicting after {self._max_attempts} attempts", status=409
        )

    async def set_deletion_costs(self, namespace: str, costs: Mapping[str, int]) -> None:
        for pod, cost in costs.items():
            body = {"metadata": {"annotations": {POD_DELETION_COST: str(int(cost))}}}
            try:
                await self._core.patch_namespaced_pod(
                    pod,
                    namespace,
                    body,
                    _content_type=MERGE_PATCH,
                    _request_timeout=self._timeout_s,
                )
            except _CALL_ERRORS as exc:
                err = translate(exc, doing=f"set deletion cost of pod {namespace}/{pod}")
                if isinstance(err, NotFound):
                    continue  # already gone: nothing to rank
                raise err from exc

    async def write_status(self, namespace: str, name: str, status_json: str) -> None:
        body = {"metadata": {"annotations": {STATUS_ANNOTATION: status_json}}}
        try:
            await self._apps.patch_namespaced_deployment(
                name, namespace, body, _content_type=MERGE_PATCH, _request_timeout=self._timeout_s
            )
        except _CALL_ERRORS as exc:
            raise translate(exc, doing=f"write status of {namespace}/{name}") from exc


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
        self, target: DeploymentInfo, *, reason: str, message: str, warning: bool = False
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
                "apiVersion": "apps/v1",
                "kind": "Deployment",
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
