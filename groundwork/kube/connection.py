"""Connecting to the API server: kubeconfig or in-cluster, and our namespace.

Order (docs/architecture.md and README.md): an explicit kubeconfig path, else ``$KUBECONFIG``, else
the in-cluster service account when ``KUBERNETES_SERVICE_HOST`` is set, else
``~/.kube/config``. Each connection gets a ``Configuration`` of its own
rather than the library's process-wide default, so two clients in one process
(tests, the sandbox) never share credentials. The namespace a service's own
objects live in (the scaler's Lease, the default namespace of a load test's
Deployment) is the pod's namespace in-cluster, else the kubeconfig context's
namespace, else ``default``.

The activator, the scaler, ``tidal status`` and the load tests' replica
sampler all connect here, so they find a cluster the same way and fail
with the same :class:`KubeConfigError` message when there is none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.config.config_exception import ConfigException

__all__ = ["KubeAccess", "KubeConfigError", "connect"]

IN_CLUSTER_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeConfigError(Exception):
    """No usable Kubernetes configuration was found."""


@dataclass(frozen=True, slots=True)
class KubeAccess:
    api: client.ApiClient
    namespace: str
    source: str  # "kubeconfig:<path>" or "in-cluster"

    async def close(self) -> None:
        await self.api.close()


def _context_namespace(config_file: str, context: str | None) -> str | None:
    contexts, current = config.list_kube_config_contexts(config_file)
    chosen = current
    if context is not None:
        chosen = next((c for c in contexts if c.get("name") == context), None)
    if not isinstance(chosen, dict):
        return None
    ns = (chosen.get("context") or {}).get("namespace")
    return ns if isinstance(ns, str) and ns else None


def _in_cluster_namespace() -> str:
    try:
        return IN_CLUSTER_NAMESPACE_FILE.read_text().strip() or "default"
    except OSError:
        return "default"


async def connect(*, kubeconfig: str | None = None, context: str | None = None) -> KubeAccess:
    """A configured :class:`kubernetes_asyncio.client.ApiClient` and our namespace."""
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or None
    if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            load_incluster: Any = config.load_incluster_config  # untyped in the library
            load_incluster(client_configuration=cfg)
        except ConfigException as exc:
            raise KubeConfigError(f"in-cluster configuration failed: {exc}") from exc
        namespace = _in_cluster_namespace()
        return KubeAccess(api=client.ApiClient(cfg), namespace=namespace, source="in-cluster")
    if path is None:
        default = Path.home() / ".kube" / "config"
        if not default.exists():
            raise KubeConfigError(
                "no Kubernetes configuration: set KUBECONFIG (or --kubeconfig), "
                "or run in a cluster with a service account"
            )
        path = str(default)
    try:
        await config.load_kube_config(
            config_file=path, context=context, client_configuration=cfg, persist_config=False
        )
        namespace = _context_namespace(path, context) or "default"
    except (ConfigException, OSError, ValueError) as exc:
        raise KubeConfigError(f"kubeconfig {path!r}: {exc}") from exc
    return KubeAccess(api=client.ApiClient(cfg), namespace=namespace, source=f"kubeconfig:{path}")
