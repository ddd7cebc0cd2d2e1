"""What GPU shapes need watched: the cluster's shape table, and the shapes' companions.

- **The table** (docs/shapes.md): ConfigMaps labelled ``tidal.dev/shapes:
  "true"``, one cluster-wide watch; the one named ``tidal-shapes`` counts,
  in the scaler's own namespace when several namespaces have one (the
  others are named in a WARNING). It is parsed on each change
  (:func:`~scaler.policy.shapes.declarations.parse_shape_table`), the
  problems logged once per version, and :meth:`ShapeWatch.table` returns it
  with a revision that moves with each change, so the target book reads
  the models' shapes again only then.
- **The companions** ``<name>-<shape>``: Deployments labelled
  ``placement.tidal.dev/shape`` and annotated
  ``placement.tidal.dev/companion-of``, keyed by the user's Deployment
  (``namespace/name``) and then by shape. Like spot companions they do not
  carry the opt-in label, so the main Deployment watch never sees them.

No table (no ConfigMap, or none labelled) is an empty table: a model that
lists shapes is told which exist (none), and one that lists none scales as
it always did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio import client

from groundwork.kube.raw import RawObject
from groundwork.kube.reflector import Reflector
from scaler.kube.placement_watch import companion_from_raw
from scaler.kube.types import CompanionInfo
from scaler.policy.invalid_annotation import AnnotationProblem
from scaler.policy.shapes.declarations import (
    SHAPES_CONFIGMAP,
    SHAPES_LABEL,
    ShapeTable,
    parse_shape_table,
)
from scaler.policy.shapes.template import SHAPE_LABEL

__all__ = ["ShapeWatch"]

log = logging.getLogger(__name__)


def _key(obj: RawObject) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class ShapeWatch:
    """The shape table and the shapes' companions, kept current by two watches."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        namespace: str,
        watch_timeout_s: int = 300,
        request_timeout_s: float = 30.0,
    ) -> None:
        self.namespace = namespace  # where the table is looked for first
        self._maps: dict[str, Mapping[str, str]] = {}  # namespace -> data of tidal-shapes
        self._table = ShapeTable({})
        self._problems: tuple[AnnotationProblem, ...] = ()
        self._revision = 0
        self._companions: dict[str, dict[str, CompanionInfo]] = {}
        core: Any = client.CoreV1Api(api)
        apps: Any = client.AppsV1Api(api)
        self._map_reflector = Reflector(
            list_call=core.list_config_map_for_all_namespaces,
            what="shape table configmaps",
            on_reset=self._reset_maps,
            on_event=self._map_event,
            list_kwargs={"label_selector": f"{SHAPES_LABEL}=true"},
            watch_timeout_s=watch_timeout_s,
            request_timeout_s=request_timeout_s,
        )
        self._companion_reflector = Reflector(
            list_call=apps.list_deployment_for_all_namespaces,
            what="shape companion deployments",
            on_reset=self._reset_companions,
            on_event=self._companion_event,
            list_kwargs={"label_selector": SHAPE_LABEL},
            watch_timeout_s=watch_timeout_s,
            request_timeout_s=request_timeout_s,
        )

    @property
    def synced(self) -> bool:
        return self._map_reflector.synced and self._companion_reflector.synced

    def table(self) -> tuple[int, ShapeTable]:
        """The table now and its revision (moves on each change)."""
        return self._revision, self._table

    @property
    def problems(self) -> tuple[AnnotationProblem, ...]:
        """What was left out of the table, each entry's problem."""
        return self._problems

    def companions(self, key: str) -> Mapping[str, CompanionInfo]:
        """The companions of the Deployment ``key`` (``namespace/name``), by shape."""
        return self._companions.get(key, {})

    def owners(self) -> list[str]:
        """The Deployments (``namespace/name``) that have shape companions."""
        return list(self._companions)

    # -- the table -----------------------------------------------------------------

    def _reset_maps(self, items: list[RawObject]) -> None:
        self._maps = {}
        for obj in items:
            self._keep_map(obj)
        self._reparse()

    def _map_event(self, kind: str, obj: RawObject) -> None:
        namespace, name = _key(obj)
        if name != SHAPES_CONFIGMAP:
            return
        if kind == "DELETED":
            self._maps.pop(namespace, None)
        else:
            self._keep_map(obj)
        self._reparse()

    def _keep_map(self, obj: RawObject) -> None:
        namespace, name = _key(obj)
        if name == SHAPES_CONFIGMAP:
            data = obj.get("data") or {}
            self._maps[namespace] = {str(k): str(v) for k, v in data.items()}

    def _reparse(self) -> None:
        if not self._maps:
            data: Mapping[str, str] = {}
        elif self.namespace in self._maps:
            data = self._maps[self.namespace]
        else:
            data = self._maps[min(self._maps)]
        if len(self._maps) > 1:
            log.warning(
                "ConfigMaps %s in namespaces %s: using %s (the scaler's namespace first)",
                SHAPES_CONFIGMAP,
                ", ".join(sorted(self._maps)),
                self.namespace if self.namespace in self._maps else min(self._maps),
            )
        table, problems = parse_shape_table(data)
        if table == self._table and problems == self._problems:
            return
        self._table, self._problems = table, problems
        self._revision += 1
        for problem in problems:
            log.warning("%s: left out of the shape table: %s", SHAPES_CONFIGMAP, problem)
        log.info("shape table: %s", ", ".join(sorted(table.shapes)) or "empty")

    # -- companions ---------------------------------------------------------------------

    def _reset_companions(self, items: list[RawObject]) -> None:
        self._companions = {}
        for obj in items:
            self._companion_event("ADDED", obj)

    def _companion_event(self, kind: str, obj: RawObject) -> None:
        companion = companion_from_raw(obj)
        shape = ((obj.get("metadata") or {}).get("labels") or {}).get(SHAPE_LABEL)
        if companion is None or not shape:
            return
        key = f"{companion.namespace}/{companion.companion_of}"
        if kind == "DELETED":
            mine = self._companions.get(key, {})
            mine.pop(shape, None)
            if not mine:
                self._companions.pop(key, None)
        else:
            self._companions.setdefault(key, {})[shape] = companion

    async def run(self) -> None:
        """Watch until cancelled."""
        tasks = [
            asyncio.create_task(self._map_reflector.run(), name="tidal-shape-table-watch"),
            asyncio.create_task(
                self._companion_reflector.run(), name="tidal-shape-companion-watch"
            ),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
