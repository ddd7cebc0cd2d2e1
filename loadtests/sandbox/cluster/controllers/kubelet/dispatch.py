"""The kubelet itself: a worker for each pod bound to a node, and the sandbox's handles on them.

It watches the pods (through the controllers' cache), starts a
:class:`~loadtests.sandbox.cluster.controllers.kubelet.pod_worker.PodWorker`
for each pod bound to a node, passes a deletion on to it (a deletion's grace
period, or ``force_stop_grace_s`` for a pod removed from the API outright),
and gives the sandbox its handles: a pod's process to crash (a fault), the
pids, and ``close()``. It also holds what every worker shares: the address
block, the GPU devices, the launchers, the Tidal pods' credentials and DNS
table.

Main decision: processes never outlive the sandbox. The launcher starts each
in its own process group with a parent-death signal, and ``close()`` kills
them all; a worker gives its address and devices back however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import cast

from loadtests.sandbox.cluster.addresses import AddressBlock
from loadtests.sandbox.cluster.controllers.base import (
    NODES,
    PODS,
    Cache,
    EventRecorder,
    Key,
    Obj,
    WorkQueue,
)
from loadtests.sandbox.cluster.controllers.kubelet.pod_worker import PodWorker
from loadtests.sandbox.cluster.controllers.kubelet.settings import KubeletSettings
from loadtests.sandbox.cluster.controllers.tidal_pods import (
    PodConfigError,
    PodCredentials,
    tidal_command,
)
from loadtests.sandbox.cluster.devices import DeviceBook, NoFreeDevice
from loadtests.sandbox.cluster.errors import NotFound
from loadtests.sandbox.cluster.simple_launcher import SimpleLauncher
from loadtests.sandbox.cluster.store import Store
from loadtests.sandbox.servers.spec import Launcher, ServerSpec

__all__ = ["Kubelet"]

log = logging.getLogger("tidal.sandbox.kubelet")


def _tidal_environment() -> dict[str, str]:
    """The sandbox's environment less what would point a Tidal pod elsewhere."""
    return {
        key: value
        for key, value in os.environ.items()
        if key != "KUBECONFIG" and not key.startswith(("TIDAL_SCALER_", "TIDAL_ACTIVATOR_"))
    }


class Kubelet:
    """Starts a :class:`PodWorker` for each pod bound to a node, and stops them."""

    def __init__(
        self,
        store: Store,
        cache: Cache,
        *,
        launcher: Launcher,
        addresses: AddressBlock,
        recorder: EventRecorder,
        settings: KubeletSettings | None = None,
    ) -> None:
        self.store = store
        self.cache = cache
        self.launcher = launcher
        # Tidal's own pods run the real tidal command, not a fake model server.
        self.tidal_launcher = SimpleLauncher(tidal_command, env=_tidal_environment())
        # Set once the API server is up: kubeconfigs for Tidal pods' service accounts.
        self.credentials: PodCredentials | None = None
        # The cluster DNS table Tidal pods resolve Service names from (None: none).
        self.dns_table: Path | None = None
        self.addresses = addresses
        self.recorder = recorder
        self.settings = settings or KubeletSettings()
        self._workers: dict[str, PodWorker] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._gpu_tmp: tempfile.TemporaryDirectory[str] | None = None
        gpu_dir = self.settings.gpu_dir
        if gpu_dir is None:
            self._gpu_tmp = tempfile.TemporaryDirectory(prefix="tidal-gpus-")
            gpu_dir = Path(self._gpu_tmp.name)
        self.devices = DeviceBook(gpu_dir)
        self.queue = WorkQueue()
        cache.on(PODS, self._on_pod)
        for pod in store.list(PODS, copy=False)[0]:
            if pod.get("spec", {}).get("nodeName"):
                self.queue.add((pod["metadata"]["namespace"], pod["metadata"]["name"]))

    @property
    def pod_files_dir(self) -> Path:
        """Where Tidal pods' kubeconfigs go: beside the logs, else a temporary directory."""
        base = self.settings.log_dir.parent if self.settings.log_dir else self.devices.directory
        path = base / "pods"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _on_pod(self, _event: str, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            assert old is not None
            worker = self._workers.get(old["metadata"]["uid"])
            if worker is not None:
                worker.remove()
            return
        if new.get("spec", {}).get("nodeName"):
            self.queue.add((new["metadata"]["namespace"], new["metadata"]["name"]))

    def with_devices(self, spec: ServerSpec, pod: Obj, *, uid: str, node_name: str) -> ServerSpec:
        """The spec plus the GPU devices and memory ledgers it is given (:mod:`devices`)."""
        if spec.engine != "vllm":
            return spec
        node = self.store.peek(NODES, "", node_name)
        if node is None:
            return spec
        try:
            given = self.devices.assign(uid=uid, pod=pod, node=node)
        except NoFreeDevice as exc:
            raise PodConfigError(str(exc)) from None
        return replace(spec, extra_args=given.args + spec.extra_args, env={**spec.env, **given.env})

    def worker(self, namespace: str, name: str) -> PodWorker | None:
        for worker in self._workers.values():
            if worker.key == (namespace, name):
                return worker
        return None

    def pids(self) -> list[int]:
        return [pid for w in self._workers.values() if (pid := w.pid) is not None]

    def crash(self, namespace: str, name: str) -> bool:
        """Fault injection: SIGKILL the pod's process (it restarts with back-off)."""
        worker = self.worker(namespace, name)
        return worker is not None and worker.kill()

    def sync(self, key: Key) -> None:
        pod = self.store.peek(PODS, *key)
        if pod is None or not pod.get("spec", {}).get("nodeName"):
            return
        uid = pod["metadata"]["uid"]
        worker = self._workers.get(uid)
        if worker is None:
            phase = pod.get("status", {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                return
            if pod["metadata"].get("deletionTimestamp"):
                # Nothing runs yet: nothing to wait for.
                with contextlib.suppress(NotFound):
                    self.store.delete(PODS, *key, grace_period_s=0, precondition_uid=uid)
                return
            worker = PodWorker(self, pod)
            self._workers[uid] = worker
            self._tasks[uid] = asyncio.create_task(
                self._run_worker(worker), name=f"kubelet:{key[0]}/{key[1]}"
            )
        if pod["metadata"].get("deletionTimestamp"):
            worker.request_termination(float(pod["metadata"].get("deletionGracePeriodSeconds", 30)))

    async def _run_worker(self, worker: PodWorker) -> None:
        try:
            await worker.run()
        finally:
            self._workers.pop(worker.uid, None)
            self._tasks.pop(worker.uid, None)

    async def run(self) -> None:
        try:
            while True:
                key = await self.queue.take()
                try:
                    self.sync(cast(Key, key))
                except Exception:
                    log.exception("kubelet: syncing %s failed", key)
                await asyncio.sleep(0)
        finally:
            self.queue.close()

    async def close(self) -> None:
        """Kill every pod process now (the sandbox is going away)."""
        for worker in list(self._workers.values()):
            worker.abandon()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._workers.clear()
        self._tasks.clear()
        await self.tidal_launcher.close()
        if self._gpu_tmp is not None:
            self._gpu_tmp.cleanup()
