"""The pool the fake endpoint picker serves, kept in step with the API server.

Two :class:`~groundwork.kube.reflector.Reflector` loops, the services' own
list-then-watch: the InferencePool itself (``inference.networking.k8s.io/v1``,
by name) and the pods of its namespace. Any change of either recomputes the
view (:func:`~loadtests.sandbox.epp.pool_view.pool_view`) and hands it to
the flow controller, which dispatches what the new endpoints have room for.

Main decision: all pods of the namespace are watched and the pool's
selector is applied here, so a pool whose selector changes needs no new
watch (the router, too, re-reads the pods when the pool changes). A burst
of events makes one new view, on the next turn of the loop, and none is
made before both watches have listed (until then requests wait).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from groundwork.kube import listers
from groundwork.kube.connection import KubeAccess
from groundwork.kube.reflector import ObjectCache, Reflector
from loadtests.sandbox.epp.pool_view import PoolView, pool_view

__all__ = ["POOL_GROUP", "POOL_PLURAL", "POOL_VERSION", "PoolWatch"]

POOL_GROUP = "inference.networking.k8s.io"
POOL_VERSION = "v1"
POOL_PLURAL = "inferencepools"


class PoolWatch:
    """Watches InferencePool ``namespace/name`` and its namespace's pods."""

    def __init__(
        self,
        access: KubeAccess,
        *,
        namespace: str,
        name: str,
        on_view: Callable[[PoolView], None],
    ) -> None:
        self.namespace = namespace
        self.name = name
        self._on_view = on_view
        self._scheduled = False
        self._pools = ObjectCache(self._changed)
        self._pods = ObjectCache(self._changed)
        pools = listers.custom_objects(
            access.api, group=POOL_GROUP, version=POOL_VERSION, plural=POOL_PLURAL
        )
        self.reflectors = (
            Reflector(
                list_call=pools,
                what=f"InferencePool {namespace}/{name}",
                on_reset=self._pools.reset,
                on_event=self._pools.event,
                list_kwargs={"namespace": namespace, "field_selector": f"metadata.name={name}"},
            ),
            Reflector(
                list_call=listers.pods(access.api),
                what=f"pods in {namespace}",
                on_reset=self._pods.reset,
                on_event=self._pods.event,
                list_kwargs={"namespace": namespace},
            ),
        )

    @property
    def synced(self) -> bool:
        return all(r.synced for r in self.reflectors)

    def view(self) -> PoolView:
        pool = self._pools.store.get(f"{self.namespace}/{self.name}")
        return pool_view(self.namespace, self.name, pool, self._pods.store.values())

    def _changed(self) -> None:
        # One view per loop turn, however many events came in it; and only once both
        # watches have listed (a Reflector marks itself synced after its first reset).
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._publish)

    def _publish(self) -> None:
        self._scheduled = False
        if self.synced:
            self._on_view(self.view())

    async def run(self) -> None:
        """Run both watches until cancelled."""
        async with asyncio.TaskGroup() as tasks:
            for reflector in self.reflectors:
                tasks.create_task(reflector.run(), name=f"watch {reflector.what}")
