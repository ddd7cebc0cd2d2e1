"""Builders and waiting helpers shared by the control-plane tests (not a test module)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadtests.sandbox.cluster.addresses import AddressBlock
from loadtests.sandbox.cluster.controllers.base import NAMESPACES
from loadtests.sandbox.cluster.controllers.kubelet import KubeletSettings
from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.resources import ResourceType
from loadtests.sandbox.cluster.simple_launcher import SimpleLauncher
from loadtests.sandbox.cluster.store import Store
from loadtests.sandbox.servers.spec import Launcher

Obj = dict[str, Any]


class Changes:
    """Wakes waiters on every store write, so tests wait on events, not timers."""

    def __init__(self, store: Store) -> None:
        self._event = asyncio.Event()
        store.add_listener(self._changed)

    def _changed(self, *_args: object) -> None:
        self._event.set()

    async def until(self, predicate: Callable[[], Any], *, timeout_s: float = 10.0) -> Any:
        """Return ``predicate()`` once truthy; fail with its last value after ``timeout_s``."""
        async with asyncio.timeout(timeout_s):
            while True:
                self._event.clear()
                value = predicate()
                if value:
                    return value
                await self._event.wait()


def new_store() -> Store:
    store = Store()
    store.create(NAMESPACES, {"metadata": {"name": "default"}})
    return store


def make_plane(
    store: Store,
    lock_dir: Path,
    *,
    launcher: Launcher | None = None,
    settings: KubeletSettings | None = None,
) -> ControlPlane:
    block = AddressBlock.acquire(directory=lock_dir)
    return ControlPlane(
        store,
        launcher=launcher or SimpleLauncher(lambda spec: ["false"]),
        addresses=block,
        kubelet=settings,
    )


def deployment(
    name: str = "llama",
    *,
    replicas: int = 2,
    process: bool = False,
    startup_delay: str = "0s",
    gpus: int = 1,
    node_selector: dict[str, str] | None = None,
    tolerations: list[Obj] | None = None,
    strategy: Obj | None = None,
    annotations: dict[str, str] | None = None,
    container: Obj | None = None,
) -> Obj:
    pod_annotations = {"sandbox.tidal.dev/startup-delay": startup_delay}
    if not process:
        pod_annotations["sandbox.tidal.dev/process"] = "none"
    pod_annotations.update(annotations or {})
    main: Obj = {
        "name": "server",
        "image": "vllm/vllm-openai:v0.6.3",
        "ports": [{"name": "http", "containerPort": 8000}],
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {},
    }
    main.update(container or {})
    spec: Obj = {
        "containers": [main],
        "terminationGracePeriodSeconds": 5,
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    body: Obj = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": pod_annotations},
                "spec": spec,
            },
        },
    }
    if strategy:
        body["spec"]["strategy"] = strategy
    return body


def items(store: Store, rtype: ResourceType, **kwargs: Any) -> list[Obj]:
    return store.list(rtype, **kwargs)[0]
