"""The sandbox's DCGM exporter: every running fake model-server pod, as its GPU.

On a real GPU node a dcgm-exporter DaemonSet publishes ``DCGM_FI_DEV_GPU_UTIL``
per GPU with the ``pod`` and ``namespace`` of the workload using it. Here one
:class:`~loadtests.sandbox.servers.dcgm.DcgmExporter` covers the whole
sandbox: :class:`PodGpuExporter` follows the pods (the control plane's cache)
and registers each pod that runs a fake server (bound to a node, with a pod
IP, not ``sandbox.tidal.dev/process: none``) at ``http://<podIP>:<port>``;
the exporter polls ``/sandbox/gpu`` there (a server still in its cold start
does not answer and is simply not published yet). A pod that is deleted,
terminating or finished is dropped, so its series disappears as a real
exporter's does.

It listens on the API server's address at a fixed port (9400, dcgm-exporter's)
so a Prometheus config can name it before anything starts; the URL is also
written to ``<sandbox dir>/dcgm.url``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadtests.sandbox.cluster.controllers.base import PODS, Cache
from loadtests.sandbox.cluster.controllers.kubelet.server_specs import ANNOTATION_PROCESS
from loadtests.sandbox.servers.dcgm import DcgmExporter, GpuTarget

__all__ = ["DCGM_PORT", "PodGpuExporter"]

DCGM_PORT = 9400
URL_FILE = "dcgm.url"

Obj = dict[str, Any]


def _server_port(pod: Obj) -> int:
    container = (pod.get("spec", {}).get("containers") or [{}])[0]
    for port in container.get("ports") or ():
        if "containerPort" in port:
            return int(port["containerPort"])
    return 8000


def _gpu_target(pod: Obj) -> GpuTarget | None:
    """Where this pod's fake server listens, or None when it runs none (now)."""
    meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
    if (meta.get("annotations") or {}).get(ANNOTATION_PROCESS) == "none":
        return None
    if meta.get("deletionTimestamp") or not spec.get("nodeName"):
        return None
    ip = status.get("podIP")
    if not ip or status.get("phase") in ("Succeeded", "Failed"):
        return None
    container = (spec.get("containers") or [{}])[0]
    return GpuTarget(
        url=f"http://{ip}:{_server_port(pod)}",
        pod=meta["name"],
        namespace=meta.get("namespace", "default"),
        container=str(container.get("name", "model")),
    )


class PodGpuExporter:
    """A :class:`DcgmExporter` kept in step with the sandbox's pods."""

    def __init__(self, cache: Cache, *, host: str, port: int = DCGM_PORT, interval_s: float = 1.0):
        self.exporter = DcgmExporter(host=host, port=port, interval_s=interval_s)
        self._cache = cache
        self._registered: dict[tuple[str, str], str] = {}  # (ns, pod) -> url

    @property
    def url(self) -> str:
        return self.exporter.url

    def _on_pod(self, _event: str, old: Obj | None, new: Obj | None) -> None:
        pod = new if new is not None else old
        if pod is None:
            return
        key = (pod["metadata"].get("namespace", "default"), pod["metadata"]["name"])
        target = _gpu_target(new) if new is not None else None
        if target is None:
            if self._registered.pop(key, None) is not None:
                self.exporter.remove(namespace=key[0], pod=key[1])
            return
        if self._registered.get(key) != target.url:
            if key in self._registered:
                self.exporter.remove(namespace=key[0], pod=key[1])
            self.exporter.add(target)
            self._registered[key] = target.url

    async def start(self, directory: Path) -> None:
        self._cache.on(PODS, self._on_pod)
        for pod in self._cache.store.list(PODS, copy=False)[0]:
            self._on_pod("ADDED", None, pod)
        await self.exporter.start()
        (directory / URL_FILE).write_text(self.exporter.url + "\n")

    async def stop(self, directory: Path) -> None:
        await self.exporter.stop()
        (directory / URL_FILE).unlink(missing_ok=True)
