"""What fake server a pod runs, read from its annotations, its container and its owners.

The pod's first container runs a fake model server on the pod's address:
engine, model and startup delay from the pod annotations
``sandbox.tidal.dev/engine`` (``vllm``/``triton``),
``sandbox.tidal.dev/model`` and ``sandbox.tidal.dev/startup-delay``
(``30s``), extra server flags from ``sandbox.tidal.dev/args``. Without a
model annotation a fake vLLM serves what real vLLM would from the
container's command and args (``--served-model-name``, else ``--model`` or
``vllm serve MODEL``), so an alias real vLLM would answer 404 is a 404 here
too; with none of those, the server serves the names its Deployment routes
by (``routing.tidal.dev/models``, found up the owner chain: ReplicaSet,
Deployment, and the user's Deployment above a spot companion), so a user's
own manifest answers the names the activator sends it; ``sandbox-model``
when there are none. The port is the container's first ``containerPort``
(default 8000). A fake vLLM also takes the memory and batch flags of the
container's command and args that real vLLM reads (:mod:`vllm_flags`),
before those of ``sandbox.tidal.dev/args``. ``sandbox.tidal.dev/process:
none`` runs no process at all (for scale tests).

Main decision: a bad annotation is a :class:`PodConfigError` naming the
annotation and what it allows, which the kubelet shows as the real one shows
a configuration error (``CreateContainerConfigError``), not a crash.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import cast

from loadtests.sandbox.cluster.controllers.base import DEPLOYMENTS, REPLICASETS, Obj
from loadtests.sandbox.cluster.controllers.tidal_pods import PodConfigError
from loadtests.sandbox.cluster.controllers.vllm_flags import tuning_flags
from loadtests.sandbox.cluster.pod_logs import container_log_path
from loadtests.sandbox.cluster.quantity import parse_duration
from loadtests.sandbox.cluster.store import ObjectReader
from loadtests.sandbox.servers.spec import Engine, ServerSpec

__all__ = [
    "ANNOTATION_ARGS",
    "ANNOTATION_ENGINE",
    "ANNOTATION_MODEL",
    "ANNOTATION_PROCESS",
    "ANNOTATION_STARTUP_DELAY",
    "annotations_of",
    "container_port",
    "log_path",
    "routed_models",
    "server_spec_for",
    "vllm_served_names",
]

ANNOTATION_ENGINE = "sandbox.tidal.dev/engine"
ANNOTATION_MODEL = "sandbox.tidal.dev/model"
ANNOTATION_STARTUP_DELAY = "sandbox.tidal.dev/startup-delay"
ANNOTATION_PROCESS = "sandbox.tidal.dev/process"
ANNOTATION_ARGS = "sandbox.tidal.dev/args"
DEFAULT_MODEL = "sandbox-model"
ROUTED_MODELS = "routing.tidal.dev/models"


def annotations_of(pod: Obj) -> dict[str, str]:
    return cast(dict[str, str], pod["metadata"].get("annotations") or {})


def container_port(container: Obj, default: int) -> int:
    for port in container.get("ports") or ():
        if port.get("containerPort"):
            return int(port["containerPort"])
    return default


def log_path(pod: Obj, container: Obj, log_dir: Path | None) -> str | None:
    if log_dir is None:
        return None
    meta = pod["metadata"]
    return str(
        container_log_path(
            log_dir, meta.get("namespace", "default"), meta["name"], container.get("name", "main")
        )
    )


def routed_models(store: ObjectReader, pod: Obj) -> str | None:
    """``routing.tidal.dev/models`` of the nearest owner that has it (pod -> ReplicaSet ->
    Deployment -> the user's Deployment of a spot companion)."""
    kinds = {"ReplicaSet": REPLICASETS, "Deployment": DEPLOYMENTS}
    namespace = pod["metadata"].get("namespace", "default")
    obj = pod
    for _ in range(4):  # at most pod, ReplicaSet, companion, the user's Deployment
        owners = [r for r in obj["metadata"].get("ownerReferences") or () if r.get("controller")]
        rtype = kinds.get(owners[0].get("kind", "")) if owners else None
        owner = store.peek(rtype, namespace, str(owners[0].get("name", ""))) if rtype else None
        if owner is None:
            return None
        obj = owner
        models = (obj["metadata"].get("annotations") or {}).get(ROUTED_MODELS)
        if models:
            return str(models)
    return None


def _served(routed: str | None, engine: str) -> str | None:
    """The fake vLLM serves every routed name; the fake Triton serves one model."""
    names = [n.strip() for n in (routed or "").split(",") if n.strip()]
    if not names:
        return None
    return ",".join(names) if engine == "vllm" else names[0]


def vllm_served_names(container: Obj) -> str | None:
    """The names a real vLLM would serve, from the container's command and args.

    As vLLM: ``--served-model-name`` (one or more names) when given, else the
    model (``--model X``, or ``vllm serve X``); ``None`` when the container
    names neither, and the sandbox falls back to the routed names.
    """
    words = [str(w) for w in (*(container.get("command") or ()), *(container.get("args") or ()))]
    served: list[str] = []
    model: str | None = None
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag == "--served-model-name":
            if eq:
                served.append(value)
            else:
                for name in words[i + 1 :]:
                    if name.startswith("-"):
                        break
                    served.append(name)
        elif flag == "--model":
            model = value if eq else (words[i + 1] if i + 1 < len(words) else None)
        elif word == "serve" and i + 1 < len(words) and not words[i + 1].startswith("-"):
            model = words[i + 1]
    if served:
        return ",".join(served)
    return model


def server_spec_for(
    pod: Obj,
    *,
    host: str,
    default_port: int,
    node_name: str,
    log_dir: Path | None = None,
    routed: str | None = None,
) -> ServerSpec:
    """What fake server the pod's first container is, from its annotations.

    ``routed``: the names the pod's Deployment routes by, served when the pod
    names no model of its own."""
    annotations = annotations_of(pod)
    engine = annotations.get(ANNOTATION_ENGINE, "vllm")
    if engine not in ("vllm", "triton"):
        raise PodConfigError(
            f"annotation {ANNOTATION_ENGINE}={engine!r} is not valid: use 'vllm' or 'triton'"
        )
    try:
        delay_s = parse_duration(annotations.get(ANNOTATION_STARTUP_DELAY, "0s"))
    except ValueError as exc:
        raise PodConfigError(f"annotation {ANNOTATION_STARTUP_DELAY}: {exc}") from None
    container = (pod.get("spec", {}).get("containers") or [{}])[0]
    try:
        extra = tuple(shlex.split(annotations.get(ANNOTATION_ARGS, "")))
    except ValueError as exc:
        raise PodConfigError(f"annotation {ANNOTATION_ARGS}: {exc}") from None
    if engine == "vllm":
        extra = tuning_flags(container) + extra
    meta = pod["metadata"]
    env = {
        str(e["name"]): str(e["value"])
        for e in container.get("env") or ()
        if "name" in e and isinstance(e.get("value"), str)
    }
    env.update(
        {
            "POD_NAME": meta["name"],
            "POD_NAMESPACE": meta.get("namespace", "default"),
            "POD_IP": host,
            "NODE_NAME": node_name,
        }
    )
    logs = log_path(pod, container, log_dir)
    named = vllm_served_names(container) if engine == "vllm" else None
    return ServerSpec(
        engine=cast(Engine, engine),
        model=annotations.get(ANNOTATION_MODEL)
        or named
        or _served(routed, engine)
        or DEFAULT_MODEL,
        host=host,
        port=container_port(container, default_port),
        startup_delay_s=delay_s,
        extra_args=extra,
        env=env,
        log_path=logs,
    )
