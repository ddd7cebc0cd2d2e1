"""Where a relayed request's CPU goes: Python calls, allocations and system calls per request.

A companion of the activator benchmarks (not run by ``make bench``: its
figures are counts, not rates). One activator runs in this process, under
uvloop as ``tidal activator`` runs it, in front of nginx answering a 2-byte
body (a native backend, so nothing in this process but the activator's work
is counted). A client in a subprocess sends small ``GET``s over ``C``
keep-alive connections, one request on each and then the answers, ``N / C``
times; a warm-up first opens and pools every connection. Then the same ``N``
requests are sent once per measurement, each with one instrument attached:

- **Python calls** (``sys.setprofile``): every call of a Python function,
  coroutine resumptions included, and every call of a C function from Python,
  counted by function;
- **allocations** (memray, when installed: ``pip install memray``): every
  allocation, pymalloc's included, counted by the Python function that made
  it; tracemalloc cannot count allocations, only the memory still held;
- **system calls** (``strace -c`` on the process's threads, when installed);
- **CPU** (the process's own counters, nothing attached): a rough figure on
  a busy machine, printed for context only.

The counts are deterministic for a given ``C`` (the per-request constant
of each phase's two pipe messages is under 0.01 per request at N=2000), so
they compare from one version of the code to the next on any machine, where
timings would not. ``python -m loadtests.bench.profile_relay [N [C [TOP]]]``
(defaults 2000 1 25).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib
import os
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

import uvloop

from activator import app
from activator.settings import ActivatorSettings
from loadtests.bench.activator_harness import (
    TOOLS_CPU,
    load_report,
    routes_for,
    start_nginx_backend,
    workdir,
)

# The client: C connections, one request on each, then every answer; "N\n" on
# stdin runs N requests and prints how many answers were not 200.
_CLIENT = r"""
import socket, sys
port, conns = int(sys.argv[1]), int(sys.argv[2])
REQUEST = (b"GET /v1/ping HTTP/1.1\r\nHost: profile.local\r\nUser-Agent: profile-relay\r\n"
           b"Accept: */*\r\n\r\n")
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
bufs = [b""] * conns
def answer(i):
    s, buf = socks[i], bufs[i]
    while b"\r\n\r\n" not in buf:
        more = s.recv(65536)
        if not more:
            raise SystemExit("the activator closed a connection")
        buf += more
    end = buf.index(b"\r\n\r\n") + 4
    head = buf[:end].lower()
    at = head.index(b"content-length:") + 15
    length = int(head[at:head.index(b"\r\n", at)])
    while len(buf) < end + length:
        buf += s.recv(65536)
    bufs[i] = buf[end + length:]
    return head[9:12] == b"200"
for line in sys.stdin:
    bad = 0
    for _ in range(int(line) // conns):
        for s in socks:
            s.sendall(REQUEST)
        for i in range(conns):
            bad += not answer(i)
    print(bad, flush=True)
"""


class Client:
    """The client subprocess, driven over its pipes."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, port: int, conns: int) -> Client:
        proc = await asyncio.create_subprocess_exec(
            *_pinned(), sys.executable, "-c", _CLIENT, str(port), str(conns),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(proc)

    async def run(self, n: int) -> int:
        """Send ``n`` requests; how many answers were not 200."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(b"%d\n" % n)
        line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the client exited")
        return int(line)

    async def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        await self.proc.wait()


def _pinned() -> list[str]:
    return ["taskset", "-c", TOOLS_CPU] if shutil.which("taskset") else []


def _where(code: Any) -> str:
    path = code.co_filename
    for root in ("activator/", "asyncio/", "site-packages/"):
        at = path.rfind(root)
        if at >= 0:
            path = path[at:].removeprefix("site-packages/")
            break
    else:
        path = os.path.basename(path)
    return f"{path}: {code.co_qualname}"


async def count_calls(run: Callable[[], Awaitable[int]]) -> tuple[Counter[str], Counter[str]]:
    """Python and C calls made while ``run`` runs, by function."""
    python: Counter[Any] = collections.Counter()
    native: Counter[str] = collections.Counter()

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            python[frame.f_code] += 1
        elif event == "c_call":
            native[getattr(arg, "__qualname__", None) or repr(arg)] += 1

    sys.setprofile(hook)
    try:
        await run()
    finally:
        sys.setprofile(None)
    named: Counter[str] = collections.Counter()
    for code, count in python.items():
        named[_where(code)] += count
    return named, native


async def count_allocations(run: Callable[[], Awaitable[int]], tmp: Path) -> Counter[str] | None:
    """Allocations made while ``run`` runs, by the Python function that made them;
    None without memray."""
    try:
        # Optional, and imported by name: the profile runs (without this count) where
        # it is not installed, and type-checks there too.
        memray = importlib.import_module("memray")
    except ImportError:
        return None
    path = tmp / "allocations.bin"
    with memray.Tracker(path, trace_python_allocators=True):
        await run()
    by: Counter[str] = collections.Counter()
    frees = {memray.AllocatorType.FREE, memray.AllocatorType.PYMALLOC_FREE}
    frees.add(memray.AllocatorType.MUNMAP)
    reader = memray.FileReader(path)
    for record in reader.get_allocation_records():
        if memray.AllocatorType(record.allocator) in frees:
            continue
        stack = record.stack_trace(max_stacks=1)
        where = f"{_short(stack[0][1])}: {stack[0][0]}" if stack else "(no Python frame)"
        by[where] += record.n_allocations
    return by


def _short(path: str) -> str:
    for root in ("activator/", "asyncio/", "site-packages/"):
        at = path.rfind(root)
        if at >= 0:
            return path[at:].removeprefix("site-packages/")
    return os.path.basename(path)


async def count_syscalls(run: Callable[[], Awaitable[int]], tmp: Path) -> Counter[str] | None:
    """System calls of this process's threads while ``run`` runs; None without strace."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    out = tmp / "strace.txt"
    tids = [f"-p{t}" for t in os.listdir("/proc/self/task")]
    proc = await asyncio.create_subprocess_exec(
        strace, "-c", "-o", str(out), *tids, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stderr is not None
    # strace says "attached" for each thread before it counts anything.
    attached = 0
    while attached < len(tids):
        said = await proc.stderr.readline()
        if not said:
            return None
        attached += b"attached" in said
    await run()
    proc.send_signal(signal.SIGINT)
    await proc.wait()
    calls: Counter[str] = collections.Counter()
    for line in out.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            calls[fields[-1]] += int(fields[3])
    return calls


def _table(title: str, counts: Counter[str], n: int, top: int) -> None:
    total = sum(counts.values())
    print(f"\n{title}: {total / n:.2f} per request")
    for name, count in counts.most_common(top):
        print(f"  {count / n:8.2f}  {name}")
    rest = len(counts) - top
    if rest > 0:
        print(f"  ({rest} more)")


def _split(counts: Counter[str]) -> dict[str, Counter[str]]:
    parts: dict[str, Counter[str]] = {
        "activator": collections.Counter(),
        "asyncio": collections.Counter(),
        "other": collections.Counter(),
    }
    for name, count in counts.items():
        part = name.split("/", 1)[0] if name.startswith(("activator/", "asyncio/")) else "other"
        parts[part][name] += count
    return parts


async def profile(n: int, conns: int, top: int) -> int:
    with workdir() as tmp:
        backend = start_nginx_backend(TOOLS_CPU, tmp)
        routes = tmp / "routes.yaml"
        routes.write_text(routes_for("profile", backend.port))
        settings = ActivatorSettings(
            host="127.0.0.1", port=0, admin_port=0, routes=routes,
            scaler_url="http://127.0.0.1:9", log_level="ERROR",
            # Nothing in the background while counting: one probe to see the
            # endpoint ready, then none.
            probe_interval_s=0.05, recheck_ready_s=3600, report_period_s=3600,
            routes_poll_s=3600,
        )  # fmt: skip
        activator = await app.start(settings, source=app.make_source(settings), serve_admin=False)
        client = await Client.start(activator.data_port, conns)
        try:
            return await _measure(client, n, conns, top, tmp)
        finally:
            await client.stop()
            await activator.close()
            backend.stop()


async def _measure(client: Client, n: int, conns: int, top: int, tmp: Path) -> int:
    n -= n % conns

    async def run() -> int:
        bad = await client.run(n)
        if bad:
            raise RuntimeError(f"{bad} answers were not 200")
        return bad

    await client.run(max(200, 4 * conns))  # warm: every connection opened and pooled
    await run()
    print(load_report())
    print(f"{n} requests over {conns} connection(s), small GETs, nginx backend")
    started = time.process_time()
    wall = time.perf_counter()
    await run()
    cpu = time.process_time() - started
    print(
        f"CPU (nothing attached, busy-machine noise): {cpu / n * 1e6:.1f} us per request "
        f"({n / (time.perf_counter() - wall):.0f} req/s)"
    )
    python, native = await count_calls(run)
    parts = _split(python)
    _table("Python calls in activator/", parts["activator"], n, top)
    _table("Python calls in asyncio/", parts["asyncio"], n, top)
    _table("Python calls elsewhere", parts["other"], n, top)
    _table("C calls from Python", native, n, top)
    allocations = await count_allocations(run, tmp)
    if allocations is None:
        print("\nallocations: not counted (pip install memray)")
    else:
        _table("allocations (memray), by the Python function that made them", allocations, n, top)
    syscalls = await count_syscalls(run, tmp)
    if syscalls is None:
        print("\nsystem calls: not counted (strace is not installed)")
    else:
        _table("system calls (strace -c)", syscalls, n, top)
    return 0


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 2000
    conns = int(argv[1]) if len(argv) > 1 else 1
    top = int(argv[2]) if len(argv) > 2 else 25
    if n < conns or conns < 1:
        print("usage: profile_relay [N [C [TOP]]] with N >= C >= 1", file=sys.stderr)
        return 2
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(profile(n, conns, top))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
