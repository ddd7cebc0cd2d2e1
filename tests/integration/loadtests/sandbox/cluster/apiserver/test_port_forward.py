"""``kubectl port-forward`` against the emulated API server, to a pod's own address.

Covers: kubectl 1.32's WebSocket-tunnelled SPDY is answered (no fallback
needed): bytes sent to the local port reach the pod's port and the answer
comes back, over two connections one after the other; a pod port nothing
listens on gives kubectl the error, and kubectl ends the session as it does
against a real cluster.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from pathlib import Path

from loadtests.sandbox.cluster.apiserver import ApiServer
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.store import Store

PODS = by_group_version_plural("", "v1", "pods")


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1024):
        writer.write(b"echo:" + data)
        await writer.drain()
    writer.close()


async def _exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    answer = await asyncio.wait_for(reader.readexactly(len(data) + 5), 10)
    writer.close()
    return answer


async def test_forwards_to_the_pod_and_reports_a_refused_port(
    server: ApiServer,
    store: Store,
    kubeconfig: Path,
    tmp_path: Path,
    tool_path: Callable[[str], str],
) -> None:
    assert PODS is not None
    echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
    pod_port = echo.sockets[0].getsockname()[1]
    store.create(
        PODS,
        {
            "metadata": {"name": "one", "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "vllm/vllm-openai"}]},
            "status": {"phase": "Running", "podIP": "127.0.0.1"},
        },
    )
    process = await asyncio.create_subprocess_exec(
        tool_path("kubectl"),
        *("port-forward", "pod/one", f":{pod_port}", ":1"),
        env={**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        local: dict[int, int] = {}
        while len(local) < 2:
            line = (await asyncio.wait_for(process.stdout.readline(), 20)).decode()
            match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)", line)
            if match:
                local[int(match.group(2))] = int(match.group(1))
        assert await _exchange(local[pod_port], b"hello") == b"echo:hello"
        assert await _exchange(local[pod_port], b"again") == b"echo:again"
        refused = await asyncio.open_connection("127.0.0.1", local[1])
        error = (await asyncio.wait_for(process.stderr.readline(), 10)).decode()
        assert "error forwarding port 1 to pod one" in error, error
        refused[1].close()
        # kubectl 1.32 ends the session when a connection to the pod fails.
        await asyncio.wait_for(process.wait(), 10)
        assert "lost connection to pod" in (await process.stderr.read()).decode()
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()
        echo.close()
        await echo.wait_closed()
