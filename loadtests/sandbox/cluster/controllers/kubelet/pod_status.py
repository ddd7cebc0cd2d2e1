"""What the API shows of one pod the kubelet runs: its status, its Events, its final removal.

Status moves as the real kubelet moves it: phase Pending with the container
waiting in ``ContainerCreating``, then Running; conditions
``PodReadyToStartContainers``, ``Initialized``, ``ContainersReady``,
``Ready`` (``PodScheduled`` is the scheduler's), in the real one's order;
``containerStatuses`` with ``ready``, ``started``, ``restartCount``,
``state`` and ``lastState``; ``podIP``/``podIPs`` the pod's own address and
``hostIP`` its node's. Sidecars (every container after the first) run
nothing and count as ready once started; their ids and start times stay the
same across writes.

Main decision: one :class:`PodStatus` per pod is the only writer of that
pod's status and Events, and it writes nothing once the pod is gone from the
API (force delete, node gone) or belongs to another pod of the same name
(the uid is checked on every write).
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import datetime

from loadtests.sandbox.cluster.controllers.base import (
    NODES,
    PODS,
    EventRecorder,
    Key,
    Obj,
    set_condition,
)
from loadtests.sandbox.cluster.errors import NotFound
from loadtests.sandbox.cluster.store import Store, rfc3339

__all__ = ["PodStatus", "exit_reason", "node_address"]

# The order the real kubelet lists a pod's conditions in.
_CONDITION_ORDER = {
    "PodReadyToStartContainers": 0,
    "Initialized": 1,
    "Ready": 2,
    "ContainersReady": 3,
    "PodScheduled": 4,
}


def exit_reason(code: int) -> tuple[int, str]:
    """Exit status as the container runtime reports it (128 + signal when killed)."""
    if code < 0:
        return 128 - code, "Error"
    return code, "Completed" if code == 0 else "Error"


def node_address(node: Obj) -> str | None:
    for address in node.get("status", {}).get("addresses") or ():
        if address.get("type") == "InternalIP":
            return str(address["address"])
    return None


class PodStatus:
    """One pod's status and Events, written as its container's life moves."""

    def __init__(
        self, store: Store, recorder: EventRecorder, *, key: Key, uid: str, node: str
    ) -> None:
        self._store = store
        self._recorder = recorder
        self._key = key
        self._uid = uid
        self._node = node
        self._ip: str | None = None
        self._restarts = 0
        self._silenced = False

    @property
    def silenced(self) -> bool:
        """Whether the pod is gone from the API, so nothing more is written."""
        return self._silenced

    @property
    def restarts(self) -> int:
        """The main container's ``restartCount``."""
        return self._restarts

    def now(self) -> datetime:
        return self._store.now()

    def use_address(self, ip: str) -> None:
        """The pod's own address, shown as ``podIP`` from the next write on."""
        self._ip = ip

    def silence(self) -> None:
        """The pod is gone from the API: write nothing more."""
        self._silenced = True

    def restarted(self) -> None:
        self._restarts += 1

    def current(self) -> Obj | None:
        """The pod as stored, if it is still this pod (same uid)."""
        pod = self._store.peek(PODS, *self._key)
        if pod is None or pod["metadata"]["uid"] != self._uid:
            return None
        return pod

    def main_status(
        self,
        pod: Obj,
        *,
        state: Obj,
        ready: bool,
        started: bool,
        last: Obj | None = None,
        container_id: str = "",
    ) -> Obj:
        """The first container's entry in ``containerStatuses``."""
        container = (pod.get("spec", {}).get("containers") or [{}])[0]
        image = container.get("image", "")
        status: Obj = {
            "image": image,
            "imageID": f"{image}@sha256:{'0' * 64}" if started else "",
            "ready": ready,
            "started": started,
            "restartCount": self._restarts,
            "state": state,
            "lastState": last or {},
        }
        if container_id:
            status["containerID"] = container_id
        return status

    def publish(self, *, phase: str, main: Obj, ready: bool) -> None:
        pod = self.current()
        if pod is None or self._silenced:
            return
        status = dict(pod.get("status") or {})
        status["phase"] = phase
        node = self._store.peek(NODES, "", self._node)
        host_ip = node_address(node) if node is not None else None
        if host_ip:
            status["hostIP"] = host_ip
            status["hostIPs"] = [{"ip": host_ip}]
        if self._ip:
            status["podIP"] = self._ip
            status["podIPs"] = [{"ip": self._ip}]
        status.setdefault("startTime", rfc3339(self._store.now()))
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

    def event(self, event_type: str, reason: str, message: str) -> None:
        pod = self.current()
        if pod is not None and not self._silenced:
            self._recorder.record(
                pod, event_type=event_type, reason=reason, message=message, host=self._node
            )

    def finalize(
        self,
        *,
        exit_code: int,
        reason: str | None = None,
        started_at: str | None = None,
        container_id: str = "",
    ) -> None:
        """Write the terminal status and remove the pod from the API (grace 0)."""
        if self._silenced:
            return
        pod = self.current()
        if pod is None:
            return
        terminated: Obj = {
            "exitCode": exit_code,
            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
            "finishedAt": rfc3339(self._store.now()),
        }
        if started_at:
            terminated["startedAt"] = started_at
        if container_id:
            terminated["containerID"] = container_id
        main = self.main_status(pod, state={"terminated": terminated}, ready=False, started=False)
        self.publish(phase="Succeeded" if exit_code == 0 else "Failed", main=main, ready=False)
        with contextlib.suppress(NotFound):
            self._store.delete(PODS, *self._key, grace_period_s=0, precondition_uid=self._uid)

    def _write(self, status: Obj) -> None:
        if self._silenced:
            return
        pod = self.current()
        if pod is None:
            return
        with contextlib.suppress(NotFound):
            self._store.update(PODS, {**pod, "status": status}, subresource="status")

    def _set_conditions(self, status: Obj, *, ready: bool, containers: list[str]) -> None:
        now = self._store.now()
        conds = status.get("conditions") or []
        for kind in ("PodReadyToStartContainers", "Initialized"):
            conds = set_condition(
                conds,
                kind=kind,
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
        status["conditions"] = sorted(
            conds, key=lambda c: _CONDITION_ORDER.get(c.get("type", ""), 5)
        )

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
                    "state": {"running": {"startedAt": rfc3339(self._store.now())}},
                    "lastState": {},
                }
            )
        return out
