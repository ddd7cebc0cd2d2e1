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
- **Status annotation**: a merge patch of one annotation on the Deployment
  (metadata only, so no new rollout and no generation bump), with the
  ``resourceVersion`` precondition when one is given.
- **Events**: core/v1 Events involving the Deployment, from component
  ``tidal-scaler``.

All failures come out as :mod:`groundwork.kube.errors` types. Only
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

from groundwork.kube.errors import Conflict, KubeError, NotFound, translate
from scaler.kube.types import POD_DELETION_COST, STATUS_ANNOTATION, DeploymentInfo, ScaleState

__all__ = ["COMPONENT", "KubeEvents", "KubeScaleTarget"]

log = logging.getLogger(__name__)

COMPONENT = "tidal-scaler"
MERGE_PATCH = "application/merge-patch+json"
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

    async def write_status(
        self, namespace: str, name: str, status_json: str, *, resource_version: str | None = None
    ) -> str:
        metadata: dict[str, Any] = {"annotations": {STATUS_ANNOTATION: status_json}}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        try:
            got: Any = await self._apps.patch_namespaced_deployment(
                name,
                namespace,
                {"metadata": metadata},
                _content_type=MERGE_PATCH,
                _request_timeout=self._timeout_s,
            )
        except _CALL_ERRORS as exc:
            raise self._error(exc, f"write status of {namespace}/{name}") from exc
        return str(got.metadata.resource_version)


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
