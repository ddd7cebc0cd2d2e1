"""Pods of the Tidal image: run as the real ``tidal scaler`` / ``tidal activator``.

So that ``kubectl apply -k deploy/`` can be rehearsed end to end in the
sandbox, a pod whose first container's image is Tidal's (the repository's
last path component is ``tidal``: ``tidal``, ``ghcr.io/tidal-autoscaler/tidal:0.1.0``,
``.../tidal@sha256:...``) does not get a fake model server. The kubelet runs
``python -m scaler <command[1:]> <args>`` with this interpreter instead (the
image's entrypoint is ``tidal``), as the pod spec asks:

- **environment**: literal ``value``\\ s; ``valueFrom.secretKeyRef`` and
  ``configMapKeyRef`` read from the store (a missing object or key is a
  ``CreateContainerConfigError``, retried as the real kubelet does, unless
  ``optional``); ``fieldRef`` for ``metadata.name``, ``metadata.namespace``,
  ``spec.nodeName``, ``spec.serviceAccountName``, ``status.podIP``;
- **the cluster**: the pod's service account gets a token minted by the API
  server and a kubeconfig (in the sandbox directory, ``pods/``) whose
  context namespace is the pod's, passed as ``KUBECONFIG``: the in-cluster
  loader reads fixed paths under ``/var/run/secrets`` that a sandbox on a
  shared machine cannot write, and both services take a kubeconfig;
- **the network**: each pod has its own loopback address, so the services
  are told to listen on it (``TIDAL_SCALER_HOST``, ``TIDAL_ACTIVATOR_HOST``
  and ``_ADMIN_HOST``; flags in ``args`` still win, as flags do), where the
  image listens on every address of its own network namespace;
- **cluster DNS**: the process starts through
  :mod:`loadtests.sandbox.cluster.pod_dns`, which resolves Service names
  (``tidal-scaler.tidal-system``) from the table the sandbox keeps
  (:mod:`cluster_dns`, ``$TIDAL_SANDBOX_DNS``), so the activator's reports
  reach every scaler pod as on a cluster.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.store import ObjectReader
from loadtests.sandbox.servers.spec import ServerSpec

__all__ = [
    "PodConfigError",
    "PodCredentials",
    "TidalPodFiles",
    "container_env",
    "is_tidal_image",
    "tidal_command",
    "tidal_spec_for",
]

Obj = dict[str, Any]

SECRETS = by_group_version_plural("", "v1", "secrets")
CONFIG_MAPS = by_group_version_plural("", "v1", "configmaps")

# Writes a kubeconfig for (namespace, service account) at a path; returns the path.
PodCredentials = Callable[[str, str, Path], Path]

# The address settings of each subcommand, all set to the pod's own address.
_HOST_SETTINGS = {
    "scaler": ("TIDAL_SCALER_HOST",),
    "activator": ("TIDAL_ACTIVATOR_HOST", "TIDAL_ACTIVATOR_ADMIN_HOST"),
}


class PodConfigError(ValueError):
    """A pod the kubelet cannot run as asked (bad annotation, missing Secret)."""


def is_tidal_image(image: str) -> bool:
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[0] == "tidal"


def _key_ref(store: ObjectReader, ref: Obj, namespace: str, *, secret: bool) -> str | None:
    rtype = SECRETS if secret else CONFIG_MAPS
    assert rtype is not None
    what = "secret" if secret else "configmap"
    name = str(ref.get("name", ""))
    key = str(ref.get("key", ""))
    obj = store.peek(rtype, namespace, name)
    if obj is None:
        if ref.get("optional"):
            return None
        raise PodConfigError(f'{what} "{name}" not found')
    if secret:
        encoded = (obj.get("data") or {}).get(key)
        value = None if encoded is None else base64.b64decode(encoded).decode()
    else:
        value = (obj.get("data") or {}).get(key)
    if value is None:
        if ref.get("optional"):
            return None
        raise PodConfigError(f"couldn't find key {key} in {what.capitalize()} {namespace}/{name}")
    return str(value)


def _field_ref(pod: Obj, path: str, host: str) -> str:
    meta = pod["metadata"]
    spec = pod.get("spec") or {}
    fields = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta.get("namespace", "default"),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": host,
    }
    if path not in fields:
        raise PodConfigError(f"fieldRef {path!r} is not supported here; use one of {list(fields)}")
    return str(fields[path])


def container_env(store: ObjectReader, pod: Obj, container: Obj, *, host: str) -> dict[str, str]:
    """The container's environment as the kubelet would set it."""
    namespace = pod["metadata"].get("namespace", "default")
    env: dict[str, str] = {}
    for item in container.get("env") or ():
        name = str(item.get("name", ""))
        if "value" in item:
            env[name] = str(item["value"])
            continue
        source = item.get("valueFrom") or {}
        value: str | None
        if "secretKeyRef" in source:
            value = _key_ref(store, source["secretKeyRef"], namespace, secret=True)
        elif "configMapKeyRef" in source:
            value = _key_ref(store, source["configMapKeyRef"], namespace, secret=False)
        elif "fieldRef" in source:
            value = _field_ref(pod, str(source["fieldRef"].get("fieldPath", "")), host)
        else:
            raise PodConfigError(f"env {name}: valueFrom {sorted(source)} is not supported here")
        if value is not None:
            env[name] = value
    return env


@dataclass(frozen=True, slots=True)
class TidalPodFiles:
    """Where a Tidal pod's files go: its kubeconfig, its log."""

    kubeconfig_dir: Path
    log_path: str | None
    dns_table: Path | None = None


def tidal_spec_for(
    store: ObjectReader,
    pod: Obj,
    *,
    host: str,
    port: int,
    credentials: PodCredentials | None,
    files: TidalPodFiles,
) -> ServerSpec:
    """What to run for a Tidal pod, as a :class:`ServerSpec` for :func:`tidal_command`.

    The spec's ``extra_args`` are the ``tidal`` arguments; engine and model
    mean nothing here.
    """
    container = (pod.get("spec", {}).get("containers") or [{}])[0]
    command = [str(c) for c in container.get("command") or ()]
    if command and command[0].rsplit("/", 1)[-1] == "tidal":
        command = command[1:]
    elif command:
        raise PodConfigError(
            f"command {command!r}: the sandbox runs the Tidal image's entrypoint (tidal) only"
        )
    argv = [*command, *(str(a) for a in container.get("args") or ())]
    env = container_env(store, pod, container, host=host)
    meta = pod["metadata"]
    namespace = meta.get("namespace", "default")
    env.setdefault("POD_NAME", meta["name"])
    env.setdefault("POD_NAMESPACE", namespace)
    for setting in _HOST_SETTINGS.get(argv[0] if argv else "", ()):
        env.setdefault(setting, host)
    if files.dns_table is not None:
        env["TIDAL_SANDBOX_DNS"] = str(files.dns_table)
    if credentials is not None:
        account = pod.get("spec", {}).get("serviceAccountName") or "default"
        path = files.kubeconfig_dir / f"{namespace}_{meta['name']}.kubeconfig"
        env["KUBECONFIG"] = str(credentials(namespace, account, path))
    return ServerSpec(
        engine="vllm",
        model="tidal",
        host=host,
        port=port,
        extra_args=tuple(argv),
        env=env,
        log_path=files.log_path,
    )


def tidal_command(spec: ServerSpec) -> list[str]:
    """The process for a spec from :func:`tidal_spec_for`: ``tidal`` as this interpreter runs
    it, with cluster names resolvable."""
    return [sys.executable, "-m", "loadtests.sandbox.cluster.pod_dns", *spec.extra_args]
