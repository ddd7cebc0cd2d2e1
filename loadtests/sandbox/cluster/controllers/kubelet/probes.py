"""Readiness probes as the real kubelet runs them: what a container's probe asks, and one attempt.

A container's ``readinessProbe`` gives the kind (``httpGet`` path and port,
``tcpSocket``), ``periodSeconds``, ``initialDelaySeconds``,
``timeoutSeconds``, ``successThreshold`` and ``failureThreshold``;
``exec``/``grpc`` probes are read as TCP probes of the container port. An
HTTP probe succeeds on a status from 200 to 399, and a failure reads as the
real kubelet's message in the ``Unhealthy`` Event.

Main decision: without a probe, a TCP connect to the port every
``tcp_probe_period_s`` decides. The real kubelet would call a running
container ready at once, but a model server in its cold start is running
and not yet listening, and that is exactly what the sandbox exists to show.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, replace
from typing import Any

from loadtests.sandbox.cluster.controllers.base import Obj
from loadtests.sandbox.cluster.controllers.kubelet.settings import KubeletSettings

__all__ = ["Probe", "check", "probe_for"]


@dataclass(frozen=True, slots=True)
class Probe:
    kind: str  # "http" or "tcp"
    host: str
    port: int
    path: str
    period_s: float
    initial_delay_s: float
    timeout_s: float
    success_threshold: int
    failure_threshold: int
    explicit: bool  # declared in the pod: its failures are Unhealthy Events


def probe_for(container: Obj, *, ip: str, port: int, settings: KubeletSettings) -> Probe:
    probe = container.get("readinessProbe")
    if not probe:
        return Probe("tcp", ip, port, "", settings.tcp_probe_period_s, 0.0, 1.0, 1, 1, False)

    def resolve(value: Any) -> int:
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
        for p in container.get("ports") or ():
            if p.get("name") == value:
                return int(p["containerPort"])
        return port

    base = Probe(
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


async def check(probe: Probe) -> tuple[bool, str]:
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
