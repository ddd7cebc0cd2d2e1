"""The kubelet: runs each scheduled pod as a real fake model-server process.

One kubelet serves every node of the sandbox. For each pod bound to a node it
runs a :class:`PodWorker`:

- the pod gets its own loopback address from the sandbox's block
  (``status.podIP``/``podIPs``; ``hostIP`` is the node's address), and its
  first container runs a fake model server there through the
  :class:`~loadtests.sandbox.servers.spec.Launcher`: engine, model and
  startup delay from the pod annotations ``sandbox.tidal.dev/engine``
  (``vllm``/``triton``), ``sandbox.tidal.dev/model`` and
  ``sandbox.tidal.dev/startup-delay`` (``30s``), extra server flags from
  ``sandbox.tidal.dev/args``. Without a model annotation a fake vLLM serves
  what real vLLM would from the container's command and args
  (``--served-model-name``, else ``--model`` or ``vllm serve MODEL``), so an
  alias real vLLM would answer 404 is a 404 here too; with none of those,
  the server serves the names its Deployment routes by (``routing.tidal.dev/models``, found up
  the owner chain: ReplicaSet, Deployment, and the user's Deployment above a
  spot companion), so a user's own manifest answers the names the activator
  sends it; ``sandbox-model`` when there are none. The port is the
  container's first ``containerPort`` (default 8000). A fake vLLM also takes
  the memory and batch flags of the container's command and args that real
  vLLM reads (``--max-model-len``, ``--max-num-seqs``,
  ``--max-num-batched-tokens``, ``--gpu-memory-utilization``;
  :mod:`vllm_flags`), before those of ``sandbox.tidal.dev/args``, and is
  told the GPU devices it was given and its node's host memory
  (:mod:`~loadtests.sandbox.cluster.devices`). Other containers (sidecars) run nothing
  and count as ready once started;
- status moves as the real kubelet moves it: phase Pending with the
  container waiting in ``ContainerCreating``, then Running; conditions
  ``PodReadyToStartContainers``, ``Initialized``, ``ContainersReady``,
  ``Ready`` (``PodScheduled`` is the scheduler's); ``containerStatuses`` with
  ``ready``, ``started``, ``restartCount``, ``state`` and ``lastState``;
- readiness follows the container's ``readinessProbe`` (``httpGet`` path
  and port, ``tcpSocket``; ``periodSeconds``, ``initialDelaySeconds``,
  ``timeoutSeconds``, ``successThreshold``, ``failureThreshold``). Without
  one, a TCP connect to the port every ``tcp_probe_period_s`` decides: the
  real kubelet would call a running container ready at once, but a model
  server in its cold start is running and not yet listening, and that is
  exactly what the sandbox exists to show. ``exec``/``grpc`` probes are
  read as TCP probes of the container port;
- a process that exits is restarted (``restartPolicy: Always``; ``OnFailure``
  and ``Never`` as named) after an exponential back-off, ``backoff_base_s``
  (10 s, as the real one) doubling to ``backoff_cap_s`` (5 min), shown as
  ``waiting: CrashLoopBackOff`` with the last exit in ``lastState``;
  ``restartCount`` counts the restarts. A process that ran
  ``backoff_reset_s`` (10 min) resets the back-off;
- on deletion (``deletionTimestamp``) it sends SIGTERM, waits the pod's
  grace period (``deletionGracePeriodSeconds``, shortened if the delete is
  repeated with less), SIGKILLs the group, writes the terminal status and
  finalizes the delete (grace 0). A pod removed from the API outright
  (force delete, its node gone) is stopped the same way with
  ``force_stop_grace_s``;
- a pod annotated ``sandbox.tidal.dev/process: none`` runs no process: it
  is Running at once and Ready after its startup delay (for scale tests);
- a pod of the Tidal image runs the real ``tidal`` command its spec names
  (:mod:`tidal_pods`), so ``deploy/`` can be applied and rolled out here.

Processes never outlive the sandbox: the launcher starts each in its own
process group with a parent-death signal, and ``close()`` kills them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import tempfile
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from loadtests.sandbox.cluster.addresses import AddressBlock, AddressesExhausted
from loadtests.sandbox.cluster.controllers.base import (
    DEPLOYMENTS,
    NODES,
    PODS,
    REPLICASETS,
    Cache,
    EventRecorder,
    Key,
    Obj,
    WorkQueue,
    set_condition,
)
from loadtests.sandbox.cluster.controllers.tidal_pods import (
    PodConfigError,
    PodCredentials,
    TidalPodFiles,
    is_tidal_image,
    tidal_command,
    tidal_spec_for,
)
from loadtests.sandbox.cluster.controllers.vllm_flags import tuning_flags
from loadtests.sandbox.cluster.devices import DeviceBook, NoFreeDevice
from loadtests.sandbox.cluster.errors import NotFound
from loadtests.sandbox.cluster.pod_logs import container_log_path
from loadtests.sandbox.cluster.quantity import parse_duration
from loadtests.sandbox.cluster.simple_launcher import SimpleLauncher
from loadtests.sandbox.cluster.store import Store, rfc3339
from loadtests.sandbox.servers.spec import Engine, Launcher, ServerProcess, ServerSpec

__all__ = [
    "ANNOTATION_ARGS",
    "ANNOTATION_ENGINE",
    "ANNOTATION_MODEL",
    "ANNOTATION_PROCESS",
    "ANNOTATION_STARTUP_DELAY",
    "Kubelet",
    "KubeletSettings",
    "server_spec_for",
]

ANNOTATION_ENGINE = "sandbox.tidal.dev/engine"
ANNOTATION_MODEL = "sandbox.tidal.dev/model"
ANNOTATION_STARTUP_DELAY = "sandbox.tidal.dev/startup-delay"
ANNOTATION_PROCESS = "sandbox.tidal.dev/process"
ANNOTATION_ARGS = "sandbox.tidal.dev/args"
DEFAULT_MODEL = "sandbox-model"
ROUTED_MODELS = "routing.tidal.dev/models"

log = logging.getLogger("tidal.sandbox.kubelet")

# How often a pod whose configuration failed (a Secret not there yet) is tried again.
CONFIG_RETRY_S = 2.0


def _tidal_environment() -> dict[str, str]:
    """The sandbox's environment less what would point a Tidal pod elsewhere."""
    return {
        key: value
        for key, value in os.environ.items()
        if key != "KUBECONFIG" and not key.startswith(("TIDAL_SCALER_", "TIDAL_ACTIVATOR_"))
    }


@dataclass(frozen=True, slots=True)
class KubeletSettings:
    backoff_base_s: float = 10.0
    backoff_cap_s: float = 300.0
    backoff_reset_s: float = 600.0
    tcp_probe_period_s: float = 0.5
    force_stop_grace_s: float = 2.0
    default_port: int = 8000
    kubelet_version: str = "v1.32.2"
    # Where pod processes write their output (``<ns>_<pod>_<container>.log``).
    log_dir: Path | None = None
    # Where servers keep their shared memory ledgers, a time-sliced GPU's and
    # each node's host memory (None: a temporary directory of the kubelet's own).
    gpu_dir: Path | None = None


def _annotations(pod: Obj) -> dict[str, str]:
    return cast(dict[str, str], pod["metadata"].get("annotations") or {})


def _container_port(container: Obj, default: int) -> int:
    for port in container.get("ports") or ():
        if port.get("containerPort"):
            return int(port["containerPort"])
    return default


def _log_path(pod: Obj, container: Obj, log_dir: Path | None) -> str | None:
    if log_dir is None:
        return None
    meta = pod["metadata"]
    return str(
        container_log_path(
            log_dir, meta.get("namespace", "default"), meta["name"], container.get("name", "main")
        )
    )


def routed_models(store: Store, pod: Obj) -> str | None:
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
    annotations = _annotations(pod)
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
    log_path = _log_path(pod, container, log_dir)
    named = vllm_served_names(container) if engine == "vllm" else None
    return ServerSpec(
        engine=cast(Engine, engine),
        model=annotations.get(ANNOTATION_MODEL)
        or named
        or _served(routed, engine)
        or DEFAULT_MODEL,
        host=host,
        port=_container_port(container, default_port),
        startup_delay_s=delay_s,
        extra_args=extra,
        env=env,
        log_path=log_path,
    )


@dataclass(frozen=True, slots=True)
class _Probe:
    kind: str  # "http" or "tcp"
    host: str
    port: int
    path: str
    period_s: float
    initial_delay_s: float
    timeout_s: float
    success_threshold: int
    failure_threshold: int
    explicit: bool


def _probe_for(container: Obj, *, ip: str, port: int, settings: KubeletSettings) -> _Probe:
    probe = container.get("readinessProbe")
    if not probe:
        return _Probe("tcp", ip, port, "", settings.tcp_probe_period_s, 0.0, 1.0, 1, 1, False)

    def resolve(value: Any) -> int:
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
        for p in container.get("ports") or ():
            if p.get("name") == value:
                return int(p["containerPort"])
        return port

    base = _Probe(
        "tcp",
        ip,
        port,
        "",
        period_s=float(probe.get("periodSeconds", 10)),
        initial_delay_s=float(probe.get("initialDelaySeconds", 0)),
        timeout_s=float(probe.get("timeoutSeconds", 1)),
        success_threshold=int(probe.get("successThreshold", 1)),
        failure_threshold=int(probe.get("failureThreshold", 3)),
        explicit=True,
    )
    if "httpGet" in probe:
        get = probe["httpGet"]
        return replace(
            base,
            kind="http",
            host=get.get("host") or ip,
            port=resolve(get.get("port", port)),
            path=get.get("path") or "/",
        )
    if "tcpSocket" in probe:
        tcp = probe["tcpSocket"]
        return replace(base, host=tcp.get("host") or ip, port=resolve(tcp.get("port", port)))
    return base


async def _check(probe: _Probe) -> tuple[bool, str]:
    """One probe attempt: (success, what failed)."""
    writer = None
    try:
        async with asyncio.timeout(probe.timeout_s):
            reader, writer = await asyncio.open_connection(probe.host, probe.port)
            if probe.kind == "tcp":
                return True, ""
            writer.write(
                (
                    f"GET {probe.path} HTTP/1.1\r\nHost: {probe.host}:{probe.port}\r\n"
                    "User-Agent: kube-probe/1.32\r\nAccept: */*\r\nConnection: close\r\n\r\n"
                ).encode()
            )
            await writer.drain()
            line = await reader.readline()
            parts = line.decode("latin-1").split()
            code = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
            if 200 <= code < 400:
                return True, ""
            return False, f"HTTP probe failed with statuscode: {code}"
    except TimeoutError:
        return (
            False,
            f'Get "http://{probe.host}:{probe.port}{probe.path}": context deadline exceeded',
        )
    except OSError as exc:
        target = f"{probe.host}:{probe.port}"
        return False, f"dial tcp {target}: connect: {exc.strerror or exc}"
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def _exit_reason(code: int) -> tuple[int, str]:
    """Exit status as the container runtime reports it (128 + signal when killed)."""
    if code < 0:
        return 128 - code, "Error"
    return code, "Completed" if code == 0 else "Error"


class PodWorker:
    """Runs one pod until it is deleted."""

    def __init__(self, kubelet: Kubelet, pod: Obj) -> None:
        self.kubelet = kubelet
        meta = pod["metadata"]
        self.key: Key = (meta["namespace"], meta["name"])
        self.uid: str = meta["uid"]
        self.node: str = pod["spec"]["nodeName"]
        self.ip: str | None = None
        self.proc: ServerProcess | None = None
        self.terminating = asyncio.Event()
        self.grace_changed = asyncio.Event()
        self.grace_s: float = 30.0
        self.removed = False  # gone from the API: stop without writing status
        self.task: asyncio.Task[None] | None = None
        self.ready = False
        self.restarts = 0

    # --- status writes ----------------------------------------------------------------

    def _pod(self) -> Obj | None:
        pod = self.kubelet.store.peek(PODS, *self.key)
        if pod is None or pod["metadata"]["uid"] != self.uid:
            return None
        return pod

    def _write(self, status: Obj) -> None:
        if self.removed:
            return
        pod = self._pod()
        if pod is None:
            return
        with contextlib.suppress(NotFound):
            self.kubelet.store.update(PODS, {**pod, "status": status}, subresource="status")

    def _base_status(self, pod: Obj) -> Obj:
        return dict(pod.get("status") or {})

    def _set_conditions(self, status: Obj, *, ready: bool, containers: list[str]) -> None:
        now = self.kubelet.store.now()
        conds = status.get("conditions") or []
        conds = set_condition(
            conds,
            kind="PodReadyToStartContainers",
            status="True",
            reason=None,
            message=None,
            now=now,
            with_probe_time=True,
        )
        conds = set_condition(
            conds,
            kind="Initialized",
            status="True",
            reason=None,
            message=None,
            now=now,
            with_probe_time=True,
        )
        unready = f"containers with unready status: [{' '.join(containers)}]"
        for kind in ("ContainersReady", "Ready"):
            conds = set_condition(
                conds,
                kind=kind,
                status="True" if ready else "False",
                reason=None if ready else "ContainersNotReady",
                message=None if ready else unready,
                now=now,
                with_probe_time=True,
            )
        order = {
            "PodReadyToStartContainers": 0,
            "Initialized": 1,
            "Ready": 2,
            "ContainersReady": 3,
            "PodScheduled": 4,
        }
        status["conditions"] = sorted(conds, key=lambda c: order.get(c.get("type", ""), 5))

    def _container_statuses(self, pod: Obj, main: Obj) -> list[Obj]:
        """The main container's status given as ``main``; sidecars run and are ready."""
        out = []
        containers = pod.get("spec", {}).get("containers") or []
        for i, container in enumerate(containers):
            if i == 0:
                out.append({"name": container.get("name", "main"), **main})
                continue
            out.append(
                {
                    "name": container.get("name", f"c{i}"),
                    "image": container.get("image", ""),
                    "imageID": "",
                    "containerID": f"containerd://{uuid.uuid4().hex}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": rfc3339(self.kubelet.store.now())}},
                    "lastState": {},
                }
            )
        return out

    def _main_status(
        self,
        pod: Obj,
        *,
        state: Obj,
        ready: bool,
        started: bool,
        last: Obj | None = None,
        container_id: str = "",
    ) -> Obj:
        container = (pod.get("spec", {}).get("containers") or [{}])[0]
        image = container.get("image", "")
        status: Obj = {
            "image": image,
            "imageID": f"{image}@sha256:{'0' * 64}" if started else "",
            "ready": ready,
            "started": started,
            "restartCount": self.restarts,
            "state": state,
            "lastState": last or {},
        }
        if container_id:
            status["containerID"] = container_id
        return status

    def _publish(
        self,
        *,
        phase: str,
        main: Obj,
        ready: bool,
    ) -> None:
        pod = self._pod()
        if pod is None or self.removed:
            return
        status = self._base_status(pod)
        status["phase"] = phase
        node = self.kubelet.store.peek(NODES, "", self.node)
        host_ip = self.kubelet.node_address(node) if node is not None else None
        if host_ip:
            status["hostIP"] = host_ip
            status["hostIPs"] = [{"ip": host_ip}]
        if self.ip:
            status["podIP"] = self.ip
            status["podIPs"] = [{"ip": self.ip}]
        status.setdefault("startTime", rfc3339(self.kubelet.store.now()))
        statuses = self._container_statuses(pod, main)
        # Keep sidecars' ids and start times stable across writes.
        for old in (pod.get("status") or {}).get("containerStatuses") or ():
            for i, new in enumerate(statuses):
                if i > 0 and new["name"] == old.get("name"):
                    statuses[i] = old
        status["containerStatuses"] = statuses
        all_ready = ready and all(s["ready"] for s in statuses)
        unready = [s["name"] for s in statuses if not s["ready"]]
        self._set_conditions(status, ready=all_ready, containers=unready)
        self._write(status)

    def _event(self, event_type: str, reason: str, message: str) -> None:
        pod = self._pod()
        if pod is not None and not self.removed:
            self.kubelet.recorder.record(
                pod, event_type=event_type, reason=reason, message=message, host=self.node
            )

    # --- lifecycle --------------------------------------------------------------------

    def request_termination(self, grace_s: float) -> None:
        if not self.terminating.is_set() or grace_s < self.grace_s:
            self.grace_s = grace_s
            self.grace_changed.set()
        self.terminating.set()

    def remove(self) -> None:
        """The pod is gone from the API (force delete, node gone): stop, write nothing."""
        self.removed = True
        self.request_termination(min(self.grace_s, self.kubelet.settings.force_stop_grace_s))

    async def run(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pod %s/%s: worker failed", *self.key)
        finally:
            if self.proc is not None:
                self.proc.kill()
                with contextlib.suppress(ProcessLookupError, asyncio.CancelledError):
                    await asyncio.shield(self.proc.wait())
            if self.ip is not None:
                self.kubelet.addresses.release_pod_ip(self.ip)
            self.kubelet._workers.pop(self.uid, None)
            self.kubelet.devices.release(self.uid)

    async def _run(self) -> None:
        pod = self._pod()
        if pod is None:
            return
        containers = pod.get("spec", {}).get("containers") or [{}]
        container = containers[0]
        try:
            self.ip = self.kubelet.addresses.allocate_pod_ip()
        except AddressesExhausted as exc:
            self._event("Warning", "FailedCreatePodSandBox", str(exc))
            await self.terminating.wait()
            self._finalize(exit_code=0)
            return
        waiting = {"waiting": {"reason": "ContainerCreating"}}
        self._publish(
            phase="Pending",
            main=self._main_status(pod, state=waiting, ready=False, started=False),
            ready=False,
        )
        if _annotations(pod).get(ANNOTATION_PROCESS) == "none":
            await self._run_without_process(pod)
            return
        tidal = is_tidal_image(str(container.get("image", "")))
        launcher = self.kubelet.tidal_launcher if tidal else self.kubelet.launcher
        while True:
            try:
                spec = self._spec(pod, container, tidal=tidal)
                break
            except PodConfigError as exc:
                state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}
                self._publish(
                    phase="Pending",
                    main=self._main_status(pod, state=state, ready=False, started=False),
                    ready=False,
                )
                self._event("Warning", "Failed", f"Error: {exc}")
            # The real kubelet tries again (a Secret created late is picked up).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.terminating.wait(), CONFIG_RETRY_S)
            if self.terminating.is_set():
                self._finalize(exit_code=0)
                return
            pod = self._pod() or pod
        await self._run_process(pod, container, spec, launcher)

    def _spec(self, pod: Obj, container: Obj, *, tidal: bool) -> ServerSpec:
        assert self.ip is not None
        settings = self.kubelet.settings
        if tidal:
            return tidal_spec_for(
                self.kubelet.store,
                pod,
                host=self.ip,
                port=_container_port(container, settings.default_port),
                credentials=self.kubelet.credentials,
                files=TidalPodFiles(
                    kubeconfig_dir=self.kubelet.pod_files_dir,
                    log_path=_log_path(pod, container, settings.log_dir),
                    dns_table=self.kubelet.dns_table,
                ),
            )
        spec = server_spec_for(
            pod,
            host=self.ip,
            default_port=settings.default_port,
            node_name=self.node,
            log_dir=settings.log_dir,
            routed=routed_models(self.kubelet.store, pod),
        )
        return self.kubelet.with_devices(spec, pod, uid=self.uid, node_name=self.node)

    async def _run_without_process(self, pod: Obj) -> None:
        try:
            delay_s = parse_duration(_annotations(pod).get(ANNOTATION_STARTUP_DELAY, "0s"))
        except ValueError:
            delay_s = 0.0
        started = {"running": {"startedAt": rfc3339(self.kubelet.store.now())}}
        cid = f"containerd://{uuid.uuid4().hex}"
        self._publish(
            phase="Running",
            main=self._main_status(pod, state=started, ready=False, started=True, container_id=cid),
            ready=False,
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.terminating.wait(), delay_s)
        if not self.terminating.is_set():
            pod = self._pod() or pod
            self._publish(
                phase="Running",
                main=self._main_status(
                    pod, state=started, ready=True, started=True, container_id=cid
                ),
                ready=True,
            )
            await self.terminating.wait()
        self._finalize(exit_code=0, started_at=started["running"]["startedAt"], container_id=cid)

    async def _run_process(
        self, pod: Obj, container: Obj, spec: ServerSpec, launcher: Launcher
    ) -> None:
        settings = self.kubelet.settings
        name = container.get("name", "main")
        meta = pod["metadata"]
        policy = pod.get("spec", {}).get("restartPolicy", "Always")
        image = container.get("image", "")
        crashes = 0
        last: Obj | None = None
        loop = asyncio.get_running_loop()
        while not self.terminating.is_set():
            try:
                self.proc = await launcher.start(spec)
            except Exception as exc:  # the launcher could not start it: a start error
                log.warning("pod %s/%s: start failed: %s", *self.key, exc)
                code, reason, started_at = 128, "StartError", rfc3339(self.kubelet.store.now())
                began = loop.time()
            else:
                began = loop.time()
                started_at = rfc3339(self.kubelet.store.now())
                cid = f"containerd://{uuid.uuid4().hex}"
                if self.restarts == 0:
                    self._event(
                        "Normal", "Pulled", f'Container image "{image}" already present on machine'
                    )
                self._event("Normal", "Created", f"Created container: {name}")
                self._event("Normal", "Started", f"Started container {name}")
                running = {"running": {"startedAt": started_at}}
                current = self._pod() or pod
                self._publish(
                    phase="Running",
                    main=self._main_status(
                        current,
                        state=running,
                        ready=False,
                        started=True,
                        last=last,
                        container_id=cid,
                    ),
                    ready=False,
                )
                probe = _probe_for(
                    container, ip=self.ip or spec.host, port=spec.port, settings=settings
                )
                probing = asyncio.create_task(self._probe_loop(probe, running, last, cid))
                exited = asyncio.ensure_future(self.proc.wait())
                terminating = asyncio.create_task(self.terminating.wait())
                try:
                    await asyncio.wait({exited, terminating}, return_when=asyncio.FIRST_COMPLETED)
                    if not exited.done():
                        self._event("Normal", "Killing", f"Stopping container {name}")
                        await self._stop(exited)
                finally:
                    terminating.cancel()
                    probing.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await probing
                    if not exited.done():
                        exited.cancel()
                code, reason = _exit_reason(exited.result())
                self.proc = None
                if self.terminating.is_set():
                    self._finalize(
                        exit_code=code, reason=reason, started_at=started_at, container_id=cid
                    )
                    return
            last = {
                "terminated": {
                    "exitCode": code,
                    "reason": reason,
                    "startedAt": started_at,
                    "finishedAt": rfc3339(self.kubelet.store.now()),
                }
            }
            if policy == "Never" or (policy == "OnFailure" and code == 0):
                self.ready = False
                current = self._pod() or pod
                self._publish(
                    phase="Succeeded" if code == 0 else "Failed",
                    main=self._main_status(current, state=last, ready=False, started=False),
                    ready=False,
                )
                await self.terminating.wait()
                self._finalize(exit_code=code, reason=reason, started_at=started_at)
                return
            if loop.time() - began >= settings.backoff_reset_s:
                crashes = 0
            crashes += 1
            delay_s = min(settings.backoff_cap_s, settings.backoff_base_s * 2 ** (crashes - 1))
            shown = f"{delay_s:g}s" if delay_s < 60 else f"{delay_s / 60:g}m0s"
            message = (
                f"back-off {shown} restarting failed container={name} "
                f"pod={meta['name']}_{meta['namespace']}({meta['uid']})"
            )
            waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
            current = self._pod() or pod
            self._publish(
                phase="Running",
                main=self._main_status(
                    current, state=waiting, ready=False, started=False, last=last
                ),
                ready=False,
            )
            self._event(
                "Warning",
                "BackOff",
                f"Back-off restarting failed container {name} in pod "
                f"{meta['name']}_{meta['namespace']}({meta['uid']})",
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.terminating.wait(), delay_s)
            if self.terminating.is_set():
                self._finalize(exit_code=code, reason=reason, started_at=started_at)
                return
            self.restarts += 1

    async def _stop(self, exited: asyncio.Future[int]) -> None:
        """SIGTERM, then SIGKILL once the grace period is over (it may shrink meanwhile)."""
        assert self.proc is not None
        self.proc.terminate()
        loop = asyncio.get_running_loop()
        start = loop.time()
        while not exited.done():
            self.grace_changed.clear()
            remaining = self.grace_s - (loop.time() - start)
            if remaining <= 0:
                self.proc.kill()
                await asyncio.wait({exited})
                return
            changed = asyncio.create_task(self.grace_changed.wait())
            waiters: set[asyncio.Future[Any]] = {exited, changed}
            try:
                await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()

    async def _probe_loop(self, probe: _Probe, running: Obj, last: Obj | None, cid: str) -> None:
        await asyncio.sleep(probe.initial_delay_s)
        successes = failures = 0
        self.ready = False
        while True:
            ok, why = await _check(probe)
            if ok:
                successes, failures = successes + 1, 0
                flip = not self.ready and successes >= probe.success_threshold
            else:
                failures, successes = failures + 1, 0
                flip = self.ready and failures >= probe.failure_threshold
                if probe.explicit:
                    self._event("Warning", "Unhealthy", f"Readiness probe failed: {why}")
            if flip:
                self.ready = not self.ready
                pod = self._pod()
                if pod is None:
                    return
                main = self._main_status(
                    pod, state=running, ready=self.ready, started=True, last=last, container_id=cid
                )
                self._publish(phase="Running", main=main, ready=self.ready)
            await asyncio.sleep(probe.period_s)

    def _finalize(
        self,
        *,
        exit_code: int,
        reason: str | None = None,
        started_at: str | None = None,
        container_id: str = "",
    ) -> None:
        """Write the terminal status and remove the pod from the API (grace 0)."""
        if self.removed:
            return
        pod = self._pod()
        if pod is None:
            return
        terminated: Obj = {
            "exitCode": exit_code,
            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
            "finishedAt": rfc3339(self.kubelet.store.now()),
        }
        if started_at:
            terminated["startedAt"] = started_at
        if container_id:
            terminated["containerID"] = container_id
        main = self._main_status(pod, state={"terminated": terminated}, ready=False, started=False)
        self.ready = False
        self._publish(phase="Succeeded" if exit_code == 0 else "Failed", main=main, ready=False)
        with contextlib.suppress(NotFound):
            self.kubelet.store.delete(PODS, *self.key, grace_period_s=0, precondition_uid=self.uid)


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
        self._gpu_tmp: tempfile.TemporaryDirectory[str] | None = None
        gpu_dir = self.settings.gpu_dir
        if gpu_dir is None:
            self._gpu_tmp = tempfile.TemporaryDirectory(prefix="tidal-gpus-")
            gpu_dir = Path(self._gpu_tmp.name)
        self.devices = DeviceBook(gpu_dir)
        self.queue = WorkQueue()
        self._removed: dict[str, None] = {}
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

    @staticmethod
    def node_address(node: Obj) -> str | None:
        for address in node.get("status", {}).get("addresses") or ():
            if address.get("type") == "InternalIP":
                return str(address["address"])
        return None

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
        return [w.proc.pid for w in self._workers.values() if w.proc is not None]

    def crash(self, namespace: str, name: str) -> bool:
        """Fault injection: SIGKILL the pod's process (it restarts with back-off)."""
        worker = self.worker(namespace, name)
        if worker is None or worker.proc is None:
            return False
        worker.proc.kill()
        return True

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
            worker.task = asyncio.create_task(worker.run(), name=f"kubelet:{key[0]}/{key[1]}")
        if pod["metadata"].get("deletionTimestamp"):
            worker.request_termination(float(pod["metadata"].get("deletionGracePeriodSeconds", 30)))

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
        workers = list(self._workers.values())
        for worker in workers:
            worker.removed = True
            if worker.proc is not None:
                worker.proc.kill()
            if worker.task is not None:
                worker.task.cancel()
        tasks = [w.task for w in workers if w.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        self._workers.clear()
        await self.tidal_launcher.close()
        if self._gpu_tmp is not None:
            self._gpu_tmp.cleanup()
