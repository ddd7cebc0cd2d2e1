"""One pod the kubelet runs, from its binding to its removal: address, configuration, container.

The pod gets its own loopback address from the sandbox's block
(``status.podIP``), its GPU devices from the node's
(:mod:`~loadtests.sandbox.cluster.devices`), and a process: a fake model
server (:mod:`~loadtests.sandbox.cluster.controllers.kubelet.server_specs`),
or for a pod of the Tidal image the real ``tidal`` command its spec names
(:mod:`~loadtests.sandbox.cluster.controllers.tidal_pods`). Its container
then runs as :class:`~loadtests.sandbox.cluster.controllers.kubelet.container_runs.ContainerRuns`
says. A pod annotated ``sandbox.tidal.dev/process: none`` runs no process:
it is Running at once and Ready after its startup delay (for scale tests).

Main decision: a pod whose configuration fails (a Secret not there yet, a
bad annotation) waits in ``CreateContainerConfigError`` and is tried again
every ``CONFIG_RETRY_S``, as the real kubelet picks up a Secret created
late; an address block run dry is ``FailedCreatePodSandBox``. Whatever
happens, the address and devices go back when the worker ends.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Protocol

from loadtests.sandbox.cluster.addresses import AddressBlock, AddressesExhausted
from loadtests.sandbox.cluster.controllers.base import EventRecorder, Key, Obj
from loadtests.sandbox.cluster.controllers.kubelet.container_runs import ContainerRuns
from loadtests.sandbox.cluster.controllers.kubelet.pod_status import PodStatus
from loadtests.sandbox.cluster.controllers.kubelet.server_specs import (
    ANNOTATION_PROCESS,
    ANNOTATION_STARTUP_DELAY,
    annotations_of,
    container_port,
    log_path,
    routed_models,
    server_spec_for,
)
from loadtests.sandbox.cluster.controllers.kubelet.settings import KubeletSettings
from loadtests.sandbox.cluster.controllers.kubelet.termination import Termination
from loadtests.sandbox.cluster.controllers.tidal_pods import (
    PodConfigError,
    PodCredentials,
    TidalPodFiles,
    is_tidal_image,
    tidal_spec_for,
)
from loadtests.sandbox.cluster.devices import DeviceBook
from loadtests.sandbox.cluster.quantity import parse_duration
from loadtests.sandbox.cluster.store import Store, rfc3339
from loadtests.sandbox.servers.spec import Launcher, ServerSpec

__all__ = ["CONFIG_RETRY_S", "KubeletShared", "PodWorker"]

log = logging.getLogger("tidal.sandbox.kubelet")

# How often a pod whose configuration failed (a Secret not there yet) is tried again.
CONFIG_RETRY_S = 2.0


class KubeletShared(Protocol):
    """What every worker shares, held by the kubelet (read only: properties)."""

    @property
    def store(self) -> Store: ...

    @property
    def recorder(self) -> EventRecorder: ...

    @property
    def settings(self) -> KubeletSettings: ...

    @property
    def addresses(self) -> AddressBlock: ...

    @property
    def devices(self) -> DeviceBook: ...

    @property
    def launcher(self) -> Launcher: ...

    @property
    def tidal_launcher(self) -> Launcher:
        """Tidal's own pods run the real tidal command, not a fake model server."""

    @property
    def credentials(self) -> PodCredentials | None: ...

    @property
    def dns_table(self) -> Path | None: ...

    @property
    def pod_files_dir(self) -> Path: ...

    def with_devices(
        self, spec: ServerSpec, pod: Obj, *, uid: str, node_name: str
    ) -> ServerSpec: ...


class PodWorker:
    """Runs one pod until it is deleted."""

    def __init__(self, kubelet: KubeletShared, pod: Obj) -> None:
        self._kubelet = kubelet
        meta = pod["metadata"]
        self.key: Key = (meta["namespace"], meta["name"])
        self.uid: str = meta["uid"]
        self._node: str = pod["spec"]["nodeName"]
        self._ip: str | None = None
        self._termination = Termination()
        self._status = PodStatus(
            kubelet.store, kubelet.recorder, key=self.key, uid=self.uid, node=self._node
        )
        self._container: ContainerRuns | None = None

    @property
    def pid(self) -> int | None:
        """The pid of the pod's process, if one runs."""
        return self._container.pid if self._container is not None else None

    def kill(self) -> bool:
        """SIGKILL the pod's process, if one runs (it restarts with back-off)."""
        return self._container is not None and self._container.kill()

    def request_termination(self, grace_s: float) -> None:
        self._termination.request(grace_s)

    def remove(self) -> None:
        """The pod is gone from the API (force delete, node gone): stop, write nothing."""
        self._status.silence()
        grace_s = min(self._termination.grace_s, self._kubelet.settings.force_stop_grace_s)
        self._termination.request(grace_s)

    def abandon(self) -> None:
        """The sandbox is going away: write nothing, kill the process now."""
        self._status.silence()
        self.kill()

    async def run(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pod %s/%s: worker failed", *self.key)
        finally:
            if self._container is not None:
                await self._container.reap()
            if self._ip is not None:
                self._kubelet.addresses.release_pod_ip(self._ip)
            self._kubelet.devices.release(self.uid)

    async def _run(self) -> None:
        pod = self._status.current()
        if pod is None:
            return
        container = (pod.get("spec", {}).get("containers") or [{}])[0]
        try:
            self._ip = self._kubelet.addresses.allocate_pod_ip()
        except AddressesExhausted as exc:
            self._status.event("Warning", "FailedCreatePodSandBox", str(exc))
            await self._termination.wait()
            self._status.finalize(exit_code=0)
            return
        self._status.use_address(self._ip)
        waiting = {"waiting": {"reason": "ContainerCreating"}}
        self._status.publish(
            phase="Pending",
            main=self._status.main_status(pod, state=waiting, ready=False, started=False),
            ready=False,
        )
        if annotations_of(pod).get(ANNOTATION_PROCESS) == "none":
            await self._run_without_process(pod)
            return
        tidal = is_tidal_image(str(container.get("image", "")))
        while True:
            try:
                spec = self._spec(pod, container, tidal=tidal)
                break
            except PodConfigError as exc:
                state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}
                self._status.publish(
                    phase="Pending",
                    main=self._status.main_status(pod, state=state, ready=False, started=False),
                    ready=False,
                )
                self._status.event("Warning", "Failed", f"Error: {exc}")
            # The real kubelet tries again (a Secret created late is picked up).
            if await self._termination.wait_at_most(CONFIG_RETRY_S):
                self._status.finalize(exit_code=0)
                return
            pod = self._status.current() or pod
        self._container = ContainerRuns(
            key=self.key,
            pod=pod,
            container=container,
            spec=spec,
            launcher=self._kubelet.tidal_launcher if tidal else self._kubelet.launcher,
            ip=self._ip,
            status=self._status,
            termination=self._termination,
            settings=self._kubelet.settings,
        )
        await self._container.run()

    def _spec(self, pod: Obj, container: Obj, *, tidal: bool) -> ServerSpec:
        assert self._ip is not None
        kubelet = self._kubelet
        settings = kubelet.settings
        if tidal:
            return tidal_spec_for(
                kubelet.store,
                pod,
                host=self._ip,
                port=container_port(container, settings.default_port),
                credentials=kubelet.credentials,
                files=TidalPodFiles(
                    kubeconfig_dir=kubelet.pod_files_dir,
                    log_path=log_path(pod, container, settings.log_dir),
                    dns_table=kubelet.dns_table,
                ),
            )
        spec = server_spec_for(
            pod,
            host=self._ip,
            default_port=settings.default_port,
            node_name=self._node,
            log_dir=settings.log_dir,
            routed=routed_models(kubelet.store, pod),
        )
        return kubelet.with_devices(spec, pod, uid=self.uid, node_name=self._node)

    async def _run_without_process(self, pod: Obj) -> None:
        try:
            delay_s = parse_duration(annotations_of(pod).get(ANNOTATION_STARTUP_DELAY, "0s"))
        except ValueError:
            delay_s = 0.0
        started = {"running": {"startedAt": rfc3339(self._status.now())}}
        cid = f"containerd://{uuid.uuid4().hex}"
        self._status.publish(
            phase="Running",
            main=self._status.main_status(
                pod, state=started, ready=False, started=True, container_id=cid
            ),
            ready=False,
        )
        if not await self._termination.wait_at_most(delay_s):
            pod = self._status.current() or pod
            self._status.publish(
                phase="Running",
                main=self._status.main_status(
                    pod, state=started, ready=True, started=True, container_id=cid
                ),
                ready=True,
            )
            await self._termination.wait()
        self._status.finalize(
            exit_code=0, started_at=started["running"]["startedAt"], container_id=cid
        )
