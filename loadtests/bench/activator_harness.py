"""Shared pieces of the activator benchmarks (not a benchmark itself).

Three kinds of process, each pinned to its own core where the machine has
enough (``taskset``), so the proxy under test does not share a core with the
load that drives it:

- a raw asyncio **backend** (``python -m loadtests.bench.activator_harness
  backend PORT MODE``): ``small`` answers every request with a 2-byte body;
  ``sse`` streams chunks that carry their send time (CLOCK_MONOTONIC, which
  every process on the machine shares);
- a raw asyncio **load generator** (``... load ...``) over keep-alive
  connections: closed loop (as fast as it can, for throughput) or open loop
  (requests scheduled at a fixed rate, latency measured from the scheduled
  time, so queueing is not hidden);
- the **activator** itself (``tidal activator --routes``) or **nginx** (with
  a temporary config), proxying to the same backend.

Raw protocols keep the load generator and the backend cheap, so the figures
describe the proxy rather than the tools around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "cpus",
    "free_port",
    "percentile",
    "rss_mb",
    "run_load",
    "start_activator",
    "start_backend",
    "start_nginx",
    "stop",
]

SMALL_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpus() -> tuple[str, str, str]:
    """(proxy, load, backend) core lists: separate cores when there are enough."""
    n = os.cpu_count() or 1
    if n >= 3:
        return "0", "1", "2"
    if n == 2:
        return "0", "1", "1"
    return "0", "0", "0"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _spawn(cpu: str, args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    prefix = ["taskset", "-c", cpu] if shutil.which("taskset") else []
    return subprocess.Popen([*prefix, *args], **kwargs)


def _wait_port(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout_s}s")


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_backend(
    cpu: str, *, mode: str = "small", port: int | None = None, wait: bool = True
) -> tuple[subprocess.Popen[bytes], int]:
    port = port or free_port()
    proc = _spawn(
        cpu, [sys.executable, "-m", "loadtests.bench.activator_harness", "backend", str(port), mode]
    )
    if wait:
        _wait_port(port)
    return proc, port


def start_activator(
    cpu: str,
    routes_text: str,
    *extra: str,
    workdir: Path,
) -> tuple[subprocess.Popen[bytes], int, int]:
    port, admin = free_port(), free_port()
    routes = workdir / "routes.yaml"
    routes.write_text(routes_text)
    proc = _spawn(
        cpu,
        [
            sys.executable, "-m", "scaler.cli", "activator", "--routes", str(routes),
            "--host", "127.0.0.1", "--port", str(port), "--admin-host", "127.0.0.1",
            "--admin-port", str(admin), "--scaler-url", "http://127.0.0.1:9",
            "--log-level", "ERROR", *extra,
        ],
    )  # fmt: skip
    _wait_port(admin)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"http://127.0.0.1:{admin}/readyz", timeout=2) as r,
        ):
            if r.status == 200:
                break
        time.sleep(0.05)
    return proc, port, admin


def start_nginx(cpu: str, backend_port: int, workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        raise RuntimeError(
            "nginx is not installed; 'apt-get install nginx' (or make bench as root)"
        )
    port = free_port()
    conf = workdir / "nginx.conf"
    conf.write_text(
        f"""
worker_processes 1;
daemon off;
pid {workdir}/nginx.pid;
error_log {workdir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {workdir}/body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    upstream backend {{ server 127.0.0.1:{backend_port}; keepalive 256; }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""
    )
    proc = _spawn(
        cpu, [nginx, "-p", str(workdir), "-c", str(conf), "-e", str(workdir / "nginx-error.log")]
    )
    _wait_port(port)
    return proc, port


def spawn_load(cpu: str, **params: Any) -> subprocess.Popen[bytes]:
    """The load generator in the background (read its JSON from stdout)."""
    return _spawn(
        cpu,
        [sys.executable, "-m", "loadtests.bench.activator_harness", "load", json.dumps(params)],
        stdout=subprocess.PIPE,
    )


def raise_fd_limit() -> None:
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def metric(admin_port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith((name + "{", name + " "))
    )


def run_load(cpu: str, **params: Any) -> dict[str, Any]:
    """Run the load generator in its own pinned process; its JSON result."""
    out = subprocess.run(
        [
            *(["taskset", "-c", cpu] if shutil.which("taskset") else []),
            sys.executable, "-m", "loadtests.bench.activator_harness", "load", json.dumps(params),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    return dict(json.loads(out.stdout))


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="tidal-bench-") as tmp:
        yield Path(tmp)


# --- the backend process ----------------------------------------------------------


class _Backend(asyncio.Protocol):
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            length = 0
            marker = head.find(b"content-length:")
            if marker >= 0:
                length = int(head[marker + 15 :].split(b"\r\n", 1)[0])
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            self.buffer = self.buffer[total:]
            assert self.transport is not None
            if self.mode == "sse":
                asyncio.get_running_loop().create_task(self._sse(self.transport))
            else:
                self.transport.write(SMALL_RESPONSE)

    async def _sse(self, transport: asyncio.Transport) -> None:
        transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for _ in range(50):
            await asyncio.sleep(0.02)
            payload = f"data: {time.monotonic():.9f}\n\n".encode()
            transport.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        transport.write(b"0\r\n\r\n")


async def _serve_backend(port: int, mode: str) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Backend(mode), "127.0.0.1", port, backlog=4096)
    stop_event = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop_event.set)
    await stop_event.wait()
    server.close()


# --- the load generator process ---------------------------------------------------


class _Client(asyncio.Protocol):
    def __init__(self, on_response: Callable[[_Client, int], None]) -> None:
        self.on_response = on_response
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.sent_at = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buffer[:end].lower()
        marker = head.find(b"content-length:")
        length = int(head[marker + 15 :].split(b"\r\n", 1)[0]) if marker >= 0 else 0
        if len(self.buffer) < end + 4 + length:
            return
        status = int(self.buffer[9:12])
        self.buffer = self.buffer[end + 4 + length :]
        self.on_response(self, status)


async def _load(params: dict[str, Any]) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    port = int(params["port"])
    conns = int(params.get("conns", 32))
    duration = float(params.get("duration_s", 5))
    rate = float(params.get("rate", 0))
    request = (
        f"{params.get('method', 'GET')} {params.get('path', '/')} HTTP/1.1\r\n"
        f"Host: {params.get('host', 'bench')}\r\nContent-Length: 0\r\n\r\n"
    ).encode()
    # perf_counter, not loop.time(): uvloop's clock has millisecond steps.
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    free: deque[_Client] = deque()
    waiting: deque[float] = deque()
    done = loop.create_future()
    state = {"outstanding": 0, "stop": False, "completed": 0, "warming": True}

    def send(client: _Client, scheduled: float) -> None:
        client.sent_at = scheduled
        state["outstanding"] += 1
        assert client.transport is not None
        client.transport.write(request)

    def on_response(client: _Client, status: int) -> None:
        now = time.perf_counter()
        state["outstanding"] -= 1
        state["completed"] += 1
        statuses[status] = statuses.get(status, 0) + 1
        latencies.append(now - client.sent_at)
        if state["warming"]:
            return
        if rate <= 0:
            if not state["stop"]:
                send(client, now)
        elif waiting:
            send(client, waiting.popleft())
        else:
            free.append(client)
        if state["stop"] and state["outstanding"] == 0 and not done.done():
            done.set_result(None)

    clients = []
    for _ in range(conns):
        _, proto = await loop.create_connection(lambda: _Client(on_response), "127.0.0.1", port)
        clients.append(proto)
    if params.get("burst"):
        # One request per connection, all at once; wait for every answer.
        state["warming"] = False
        state["stop"] = True
        started = time.perf_counter()
        for c in clients:
            send(c, started)
        await asyncio.wait_for(done, float(params.get("timeout_s", 120)))
        for c in clients:
            if c.transport is not None:
                c.transport.close()
        return {
            "completed": state["completed"],
            "statuses": statuses,
            "elapsed_s": time.perf_counter() - started,
        }
    # Warm-up: one request per connection, not measured.
    for c in clients:
        send(c, time.perf_counter())
    while state["outstanding"]:  # noqa: ASYNC110 - plain counter, no event to await
        await asyncio.sleep(0.01)
    latencies.clear()
    statuses.clear()
    state["completed"] = 0
    state["warming"] = False
    started = time.perf_counter()
    if rate <= 0:
        for c in clients:
            send(c, time.perf_counter())
        await asyncio.sleep(duration)
    else:
        free.extend(clients)
        total = int(rate * duration)
        for i in range(total):
            scheduled = started + i / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if free:
                send(free.popleft(), scheduled)
            else:
                waiting.append(scheduled)
    state["stop"] = True
    measured_s = time.perf_counter() - started
    if state["outstanding"] or waiting:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done, 30)
    completed = state["completed"]
    for c in clients:
        if c.transport is not None:
            c.transport.close()
    lat_ms = [x * 1000 for x in latencies]
    return {
        "completed": completed,
        "rps": completed / measured_s if rate <= 0 else completed / max(measured_s, duration),
        "p50_ms": percentile(lat_ms, 50),
        "p90_ms": percentile(lat_ms, 90),
        "p99_ms": percentile(lat_ms, 99),
        "statuses": statuses,
    }


def main(argv: list[str]) -> int:
    import uvloop

    if argv[0] == "backend":
        raise_fd_limit()
        uvloop.run(_serve_backend(int(argv[1]), argv[2]))
        return 0
    if argv[0] == "load":
        raise_fd_limit()
        print(json.dumps(uvloop.run(_load(json.loads(argv[1])))))
        return 0
    print(f"unknown role {argv[0]!r}; use backend or load", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
