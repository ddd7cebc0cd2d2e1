"""The emulated control plane in one piece: every controller, on one store.

:class:`ControlPlane` builds the shared :class:`Cache`, the controllers
(deployment, ReplicaSet, scheduler, EndpointSlice, ServiceAccount), the
kubelet and the node lifecycle, and runs each as an asyncio task. It is an
async context manager: leaving it cancels the loops and kills every pod
process (the launcher's ``close()`` is its owner's business, since a
launcher may outlive one control plane).

It needs no HTTP: controllers act on the store directly, which is also how
the tests drive it. :mod:`loadtests.sandbox.cluster.cluster` adds the API
server, the address block and the node pool around it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from types import TracebackType

from loadtests.sandbox.cluster.addresses import AddressBlock
from loadtests.sandbox.cluster.controllers.base import Cache, Controller, EventRecorder
from loadtests.sandbox.cluster.controllers.cluster_dns import ClusterDns
from loadtests.sandbox.cluster.controllers.deployment import DeploymentController
from loadtests.sandbox.cluster.controllers.endpointslices import EndpointSliceController
from loadtests.sandbox.cluster.controllers.kubelet import Kubelet, KubeletSettings
from loadtests.sandbox.cluster.controllers.replicaset import ReplicaSetController
from loadtests.sandbox.cluster.controllers.scheduler import Scheduler
from loadtests.sandbox.cluster.controllers.serviceaccounts import ServiceAccountController
from loadtests.sandbox.cluster.nodes import NodeLifecycle, NodeSpec
from loadtests.sandbox.cluster.store import Store
from loadtests.sandbox.servers.spec import Launcher

__all__ = ["ControlPlane"]


class ControlPlane:
    def __init__(
        self,
        store: Store,
        *,
        launcher: Launcher,
        addresses: AddressBlock,
        kubelet: KubeletSettings | None = None,
    ) -> None:
        self.store = store
        self.addresses = addresses
        self.cache = Cache(store)
        self.recorder = EventRecorder(store, component="default-scheduler")
        controllers_recorder = EventRecorder(store, component="deployment-controller")
        self.replicasets = ReplicaSetController(store, self.cache)
        self.deployments = DeploymentController(store, self.cache, recorder=controllers_recorder)
        self.scheduler = Scheduler(store, self.cache, recorder=self.recorder)
        self.endpointslices = EndpointSliceController(store, self.cache)
        self.serviceaccounts = ServiceAccountController(store, self.cache)
        self.kubelet = Kubelet(
            store,
            self.cache,
            launcher=launcher,
            addresses=addresses,
            recorder=EventRecorder(store, component="kubelet"),
            settings=kubelet,
        )
        self.dns = ClusterDns(store, self.cache, self.kubelet.pod_files_dir / "cluster-dns.json")
        self.kubelet.dns_table = self.dns.path
        self.nodes = NodeLifecycle(
            store, self.cache, recorder=EventRecorder(store, component="node-controller")
        )
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def controllers(self) -> tuple[Controller, ...]:
        return (
            self.deployments,
            self.replicasets,
            self.scheduler,
            self.endpointslices,
            self.serviceaccounts,
        )

    def add_nodes(self, specs: Sequence[NodeSpec], *, first_index: int = 0) -> None:
        addresses = [self.addresses.node_address(first_index + i) for i in range(len(specs))]
        self.kubelet.devices.add_nodes(specs)
        self.nodes.register(specs, addresses=addresses)

    def start(self) -> None:
        for controller in self.controllers:
            self._tasks.append(asyncio.create_task(controller.run(), name=controller.name))
        self._tasks.append(asyncio.create_task(self.kubelet.run(), name="kubelet"))
        self._tasks.append(asyncio.create_task(self.nodes.run(), name="node-lifecycle"))
        self._tasks.append(asyncio.create_task(self.dns.run(), name="cluster-dns"))

    def idle(self) -> bool:
        """No controller has queued work (timers aside)."""
        return all(len(c.queue) == 0 for c in self.controllers) and len(self.kubelet.queue) == 0

    async def stop(self) -> None:
        # Loops first, so that nothing starts a pod while the kubelet shuts down.
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await self.kubelet.close()

    async def __aenter__(self) -> ControlPlane:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
