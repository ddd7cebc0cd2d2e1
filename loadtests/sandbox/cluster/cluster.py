"""``SandboxCluster``: the whole emulated cluster, composed and torn down as one.

It takes a loopback block of its own (:mod:`addresses`), builds the store,
the API server (TLS, tokens, RBAC when asked) on the block's first address,
the control plane (:mod:`controlplane`) with the node pool, and the admin
endpoint; it writes into its directory:

- ``kubeconfig``: admin credentials for kubectl and the clients;
- ``pki/``: the CA and serving certificate;
- ``admin.json``: the admin endpoint (preemption, pod crashes);
- ``dcgm.url``: with ``gpu_exporter=True``, the DCGM-like exporter covering
  every fake-server pod (:mod:`gpu_exporter`), on the API host, port 9400;
- ``logs/``: one file per pod container;
- ``sandbox.lock``: held while it runs (:mod:`lock_files`), so a second
  sandbox started in the same directory is refused with
  :class:`DirectoryInUse` instead of overwriting the first's kubeconfig,
  certificates and admin file.

Pod processes come from the fast zygote launcher of the servers package
unless a launcher is passed in. Leaving the context (or ``stop()``) kills
every pod process, stops the servers and gives the address block back; if
the sandbox process itself is killed, the pods die with it (parent-death
signal) and the kernel drops the block's lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from loadtests.sandbox.cluster.addresses import AddressBlock
from loadtests.sandbox.cluster.admin import AdminEndpoint
from loadtests.sandbox.cluster.apiserver import ApiServer
from loadtests.sandbox.cluster.controllers.base import NAMESPACES
from loadtests.sandbox.cluster.controllers.kubelet import KubeletSettings
from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.errors import AlreadyExists
from loadtests.sandbox.cluster.gpu_exporter import PodGpuExporter
from loadtests.sandbox.cluster.lock_files import HeldLock, holder_pid, try_lock
from loadtests.sandbox.cluster.nodes import DEFAULT_POOL, NodeSpec
from loadtests.sandbox.cluster.store import Store
from loadtests.sandbox.servers.launcher import ZygoteLauncher
from loadtests.sandbox.servers.spec import Launcher

__all__ = ["DirectoryInUse", "SandboxCluster"]

NAMESPACES_AT_START = ("default", "kube-system", "kube-public", "kube-node-lease")


class DirectoryInUse(RuntimeError):
    """Another sandbox runs in the directory this one was given."""

    def __init__(self, directory: Path, pid: int | None) -> None:
        who = f"process {pid}" if pid is not None else "another process"
        super().__init__(
            f"a sandbox is already running in {directory} ({who} holds "
            f"{directory / LOCK_NAME}); stop it first, or give this one another --dir"
        )


LOCK_NAME = "sandbox.lock"


class SandboxCluster:
    def __init__(
        self,
        directory: Path,
        *,
        nodes: Sequence[NodeSpec] = DEFAULT_POOL,
        rbac: bool = False,
        launcher: Launcher | None = None,
        kubelet: KubeletSettings | None = None,
        gpu_exporter: bool = False,
    ) -> None:
        self.directory = directory
        self.gpu_exporter_wanted = gpu_exporter
        self.gpu_exporter: PodGpuExporter | None = None
        self.node_specs = tuple(nodes)
        self.rbac = rbac
        self._own_launcher = launcher is None
        self.launcher: Launcher = launcher or ZygoteLauncher()
        self.kubelet_settings = kubelet or KubeletSettings(
            log_dir=directory / "logs", gpu_dir=directory / "gpus"
        )
        self.store = Store()
        self.addresses: AddressBlock | None = None
        self.plane: ControlPlane | None = None
        self.api: ApiServer | None = None
        self.admin: AdminEndpoint | None = None
        self._directory_lock: HeldLock | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    async def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        lock = try_lock(self.directory / LOCK_NAME)
        if lock is None:
            raise DirectoryInUse(self.directory, holder_pid(self.directory / LOCK_NAME))
        self._directory_lock = lock
        if self.kubelet_settings.log_dir is not None:
            self.kubelet_settings.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.addresses = AddressBlock.acquire()
            for name in NAMESPACES_AT_START:
                with contextlib.suppress(AlreadyExists):
                    self.store.create(
                        NAMESPACES, {"metadata": {"name": name}, "status": {"phase": "Active"}}
                    )
            self.plane = ControlPlane(
                self.store,
                launcher=self.launcher,
                addresses=self.addresses,
                kubelet=self.kubelet_settings,
            )
            self.plane.add_nodes(self.node_specs)
            self.api = ApiServer(
                self.store,
                host=self.addresses.api_host,
                port=0,
                rbac=self.rbac,
                certs_dir=self.directory / "pki",
                log_dir=self.kubelet_settings.log_dir,
            )
            await self.api.start()
            self.plane.kubelet.credentials = self._pod_kubeconfig
            self.plane.start()
            self.api.write_kubeconfig(self.kubeconfig)
            self.admin = AdminEndpoint(
                self.plane, host=self.addresses.api_host, directory=self.directory
            )
            await self.admin.start()
            if self.gpu_exporter_wanted:
                self.gpu_exporter = PodGpuExporter(self.plane.cache, host=self.addresses.api_host)
                await self.gpu_exporter.start(self.directory)
        except BaseException:
            await self.stop()
            raise

    def _pod_kubeconfig(self, namespace: str, service_account: str, path: Path) -> Path:
        """A kubeconfig with a token of ``namespace/service_account`` (for Tidal's pods)."""
        assert self.api is not None
        token = self.api.mint_token(namespace, service_account)
        return self.api.write_kubeconfig(path, token=token, namespace=namespace)

    async def stop(self) -> None:
        if self.gpu_exporter is not None:
            await self.gpu_exporter.stop(self.directory)
            self.gpu_exporter = None
        if self.admin is not None:
            await self.admin.stop()
            self.admin = None
        if self.plane is not None:
            await self.plane.stop()
            self.plane = None
        if self._own_launcher:
            await self.launcher.close()
        if self.api is not None:
            await self.api.stop()
            self.api = None
        if self.addresses is not None:
            self.addresses.release()
            self.addresses = None
        if self._directory_lock is not None:
            (self.directory / "admin.json").unlink(missing_ok=True)
            self._directory_lock.release()
            self._directory_lock = None

    async def __aenter__(self) -> SandboxCluster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
