"""The kubelet with real processes on loopback addresses (a tiny scripted server).

Covers: a scheduled pod runs its server on its own 127.X address and port,
goes Pending -> Running and turns Ready when its readinessProbe (httpGet
path/port) passes, with the real status shape; a failing probe turns it
unready again; a crashing server is restarted with a doubling back-off,
shown as CrashLoopBackOff, counted in restartCount with the exit in
lastState; deletion sends SIGTERM, the EndpointSlice shows the pod as
terminating while it drains, and the pod is removed once the process exits;
a server that ignores SIGTERM is SIGKILLed after the grace period;
preemption taints the node, drains its pods with SIGTERM, removes the node,
and the Deployment's replacements land elsewhere.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from loadtests.sandbox.cluster.controllers.base import (
    DEPLOYMENTS,
    ENDPOINTSLICES,
    EVENTS,
    NODES,
    PODS,
    SERVICES,
    condition,
    is_pod_ready,
)
from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.nodes import INTERRUPTION_TAINTS
from loadtests.sandbox.cluster.store import Store
from tests.unit.loadtests.sandbox.cluster.controllers.support import Changes, deployment, items

Obj = dict[str, Any]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: it only waits to be reaped.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def only_pod(store: Store) -> Obj | None:
    pods = items(store, PODS)
    return pods[0] if len(pods) == 1 else None


PROBE = {"readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 1}}


async def http_get(host: str, port: int, path: str = "/") -> bytes:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    line = await reader.readline()
    writer.close()
    await writer.wait_closed()
    return line


async def test_pod_runs_on_its_own_address_and_turns_ready(
    plane: ControlPlane, store: Store, changes: Changes, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pids"
    store.create(
        DEPLOYMENTS,
        deployment(
            replicas=1,
            process=True,
            startup_delay="0.2",
            annotations={"sandbox.tidal.dev/args": f"--pidfile {pidfile}"},
            container=PROBE,
        ),
    )
    pod = await changes.until(lambda: (p := only_pod(store)) and is_pod_ready(p) and p)
    status = pod["status"]
    block = plane.addresses.octet
    assert status["phase"] == "Running"
    assert status["podIP"].startswith(f"127.{block}.") and status["podIPs"] == [
        {"ip": status["podIP"]}
    ]
    assert status["hostIP"].startswith(f"127.{block}.0.")
    (cs,) = status["containerStatuses"]
    assert cs["name"] == "server" and cs["ready"] and cs["started"]
    assert cs["restartCount"] == 0 and "running" in cs["state"]
    types = [c["type"] for c in status["conditions"]]
    assert {"PodScheduled", "Initialized", "ContainersReady", "Ready"} <= set(types)
    assert (await http_get(status["podIP"], 8000)).startswith(b"HTTP/1.1 200")
    (pid,) = pids(pidfile)
    assert alive(pid)


async def test_failing_probe_turns_pod_unready(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    probe = {
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": 8000},
            "periodSeconds": 1,
            "failureThreshold": 1,
        }
    }
    store.create(
        DEPLOYMENTS,
        deployment(
            replicas=1,
            process=True,
            container=probe,
            annotations={"sandbox.tidal.dev/args": "--fail-after 1"},
        ),
    )
    await changes.until(lambda: (p := only_pod(store)) and is_pod_ready(p))
    pod = await changes.until(lambda: (p := only_pod(store)) and not is_pod_ready(p) and p)
    assert pod["status"]["phase"] == "Running"
    ready = condition(pod, "Ready")
    assert ready is not None and ready["reason"] == "ContainersNotReady"
    assert ready["message"] == "containers with unready status: [server]"
    # (An earlier one may say "connection refused": the server was still starting.)
    events = [
        e
        for e in items(store, EVENTS)
        if e["message"] == "Readiness probe failed: HTTP probe failed with statuscode: 500"
    ]
    assert events and events[0]["reason"] == "Unhealthy" and events[0]["type"] == "Warning"
    assert events[0]["source"] == {"component": "kubelet", "host": pod["spec"]["nodeName"]}


async def test_crash_restarts_with_backoff(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    seen: list[Obj] = []

    def record(_rtype: object, _event: str, _old: object, new: Obj) -> None:
        if new.get("kind") == "Pod":
            for cs in (new.get("status") or {}).get("containerStatuses") or ():
                seen.append(cs)

    store.add_listener(record)
    store.create(
        DEPLOYMENTS,
        deployment(
            replicas=1, process=True, annotations={"sandbox.tidal.dev/args": "--exit-after 0.3"}
        ),
    )

    def restarted_twice() -> Obj | None:
        pod = only_pod(store)
        if pod is None:
            return None
        for cs in pod["status"].get("containerStatuses") or ():
            if cs["restartCount"] >= 2:
                return dict(cs)
        return None

    cs = await changes.until(restarted_twice, timeout_s=20)
    assert cs["lastState"]["terminated"]["exitCode"] == 3
    assert cs["lastState"]["terminated"]["reason"] == "Error"
    messages = [
        s["state"]["waiting"]["message"]
        for s in seen
        if s["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff"
    ]
    assert messages[0].startswith("back-off 0.2s restarting failed container=server pod=llama-")
    assert any(m.startswith("back-off 0.4s") for m in messages)


async def test_delete_drains_then_removes(
    plane: ControlPlane, store: Store, changes: Changes, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pids"
    store.create(
        SERVICES,
        {
            "metadata": {"name": "llama"},
            "spec": {"selector": {"app": "llama"}, "ports": [{"port": 8000}]},
        },
    )
    args = f"--term-delay 0.5 --pidfile {pidfile}"
    store.create(
        DEPLOYMENTS,
        deployment(replicas=1, process=True, annotations={"sandbox.tidal.dev/args": args}),
    )
    pod = await changes.until(lambda: (p := only_pod(store)) and is_pod_ready(p) and p)
    (pid,) = pids(pidfile)
    # Scale to zero: the pod is deleted gracefully (5 s grace in the template).
    loop = asyncio.get_running_loop()
    started = loop.time()
    d = store.get(DEPLOYMENTS, "default", "llama")
    d["spec"]["replicas"] = 0
    store.update(DEPLOYMENTS, d)

    def terminating_endpoint() -> Obj | None:
        for s in items(store, ENDPOINTSLICES):
            for ep in s.get("endpoints") or ():
                if ep["conditions"]["terminating"]:
                    return dict(ep["conditions"])
        return None

    conds = await changes.until(terminating_endpoint)
    assert conds["ready"] is False
    assert alive(pid)  # still draining (0.5 s) within its 5 s grace period
    await changes.until(lambda: not items(store, PODS))
    # Removed when the process exited after its drain, not at the end of the grace period.
    assert loop.time() - started < 4.0
    assert not alive(pid)
    assert pod["metadata"]["name"] not in {p["metadata"]["name"] for p in items(store, PODS)}


async def test_sigterm_ignored_means_sigkill_after_grace(
    plane: ControlPlane, store: Store, changes: Changes, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pids"
    finals: list[Obj] = []

    def record(_rtype: object, _event: str, _old: object, new: Obj) -> None:
        if new.get("kind") == "Pod" and new["status"].get("phase") in ("Failed", "Succeeded"):
            finals.append(new["status"])

    store.add_listener(record)
    store.create(
        DEPLOYMENTS,
        deployment(
            replicas=1,
            process=True,
            annotations={"sandbox.tidal.dev/args": f"--ignore-term --pidfile {pidfile}"},
        ),
    )
    pod = await changes.until(lambda: (p := only_pod(store)) and is_pod_ready(p) and p)
    loop = asyncio.get_running_loop()
    started = loop.time()
    store.delete(PODS, "default", pod["metadata"]["name"], grace_period_s=1)
    await changes.until(
        lambda: not any(p["metadata"]["uid"] == pod["metadata"]["uid"] for p in items(store, PODS))
    )
    assert loop.time() - started >= 1.0
    assert not alive(pids(pidfile)[0])
    terminated = finals[-1]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 137 and finals[-1]["phase"] == "Failed"


async def test_preemption_removes_node_and_its_pods(
    plane: ControlPlane, store: Store, changes: Changes, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pids"
    on_node = {"kubernetes.io/hostname": "gpu-spot-1"}
    store.create(
        DEPLOYMENTS,
        deployment(
            replicas=1,
            process=True,
            node_selector=on_node,
            annotations={"sandbox.tidal.dev/args": f"--pidfile {pidfile}"},
        ),
    )
    store.create(DEPLOYMENTS, deployment("elsewhere", replicas=2))
    await changes.until(lambda: len([p for p in items(store, PODS) if is_pod_ready(p)]) == 3)
    (pid,) = pids(pidfile)
    doomed = {
        f"default/{p['metadata']['name']}"
        for p in items(store, PODS)
        if p["spec"]["nodeName"] == "gpu-spot-1"
    }
    preempt = asyncio.create_task(plane.nodes.preempt("gpu-spot-1", notice_s=0.2))
    node = await changes.until(
        lambda: (n := store.peek(NODES, "", "gpu-spot-1")) and n["spec"].get("unschedulable") and n
    )
    keys = {t["key"] for t in node["spec"]["taints"]}
    assert set(INTERRUPTION_TAINTS) | {"node.kubernetes.io/unschedulable"} <= keys
    result = await preempt
    assert set(result.pods_deleted) == doomed and result.notice_s == 0.2
    assert store.peek(NODES, "", "gpu-spot-1") is None
    assert not alive(pid)
    assert not any(p["spec"].get("nodeName") == "gpu-spot-1" for p in items(store, PODS))

    # The pinned Deployment's replacement cannot go anywhere else: Pending.
    def pending() -> bool:
        return any(not p["spec"].get("nodeName") for p in items(store, PODS))

    await changes.until(pending)
