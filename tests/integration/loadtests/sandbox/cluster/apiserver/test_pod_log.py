"""``kubectl logs`` against the emulated API server, reading the kubelet's log files.

Covers: the whole log, ``--tail``, ``-c`` (and the errors for a pod with
several containers and none named, and for a container it lacks);
``-f`` prints what is appended while it follows and ends when the pod is
deleted; a pod whose container has not started is refused with the real
wording.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadtests.sandbox.cluster.apiserver import ApiServer
from loadtests.sandbox.cluster.pod_logs import container_log_path
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.store import Store

PODS = by_group_version_plural("", "v1", "pods")


def _pod(store: Store, name: str, containers: list[str], phase: str = "Running") -> None:
    assert PODS is not None
    store.create(
        PODS,
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": c, "image": "vllm/vllm-openai"} for c in containers]},
            "status": {"phase": phase},
        },
    )


async def test_logs_tail_container_and_errors(
    server: ApiServer, store: Store, kubectl: Any, api: Any, tmp_path: Path
) -> None:
    server.log_dir = tmp_path / "logs"
    server.log_dir.mkdir()
    _pod(store, "one", ["vllm"])
    _pod(store, "two", ["vllm", "sidecar"])
    _pod(store, "cold", ["vllm"], phase="Pending")
    lines = "".join(f"line {i}\n" for i in range(5))
    container_log_path(server.log_dir, "default", "one", "vllm").write_text(lines)
    container_log_path(server.log_dir, "default", "two", "sidecar").write_text("side\n")

    whole = await kubectl("logs", "one")
    assert (whole.code, whole.out) == (0, lines), whole.err
    tail = await kubectl("logs", "one", "--tail=2")
    assert tail.out == "line 3\nline 4\n", tail.err
    side = await kubectl("logs", "two", "-c", "sidecar")
    assert side.out == "side\n", side.err
    # kubectl picks the first container itself; the server refuses to guess.
    code, body, _ = await api.call("GET", "/api/v1/namespaces/default/pods/two/log")
    assert code == 400
    assert body["message"] == (
        "a container name must be specified for pod two, choose one of: [vllm sidecar]"
    )
    wrong = await kubectl("logs", "one", "-c", "nope")
    assert "container nope is not valid for pod one" in wrong.err
    cold = await kubectl("logs", "cold")
    assert 'container "vllm" in pod "cold" is waiting to start: ContainerCreating' in cold.err


async def test_follow_prints_appends_and_ends_with_the_pod(
    server: ApiServer,
    store: Store,
    kubeconfig: Path,
    tmp_path: Path,
    tool_path: Callable[[str], str],
) -> None:
    assert PODS is not None
    server.log_dir = tmp_path / "logs"
    server.log_dir.mkdir()
    _pod(store, "one", ["vllm"])
    path = container_log_path(server.log_dir, "default", "one", "vllm")
    path.write_text("old\nlast\n")
    process = await asyncio.create_subprocess_exec(
        tool_path("kubectl"),
        *("logs", "-f", "one", "--tail=1"),
        env={**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        assert await asyncio.wait_for(process.stdout.readline(), 20) == b"last\n"
        with path.open("a") as file:
            file.write("appended\n")
        assert await asyncio.wait_for(process.stdout.readline(), 5) == b"appended\n"
        store.delete(PODS, "default", "one")
        assert await asyncio.wait_for(process.wait(), 5) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
