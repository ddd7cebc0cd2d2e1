"""Per-chunk delay the activator adds to server-sent events.

The backend (its own pinned process) streams 50 chunks, 20 ms apart, each
carrying its send time on CLOCK_MONOTONIC (shared by every process on the
machine). A client reads 20 such streams at once, straight from the backend
(the reference) and then through one activator worker, and takes each
chunk's arrival minus send time. The added delay is the difference of the
percentiles.
"""

from __future__ import annotations

import asyncio
import sys
import time

import aiohttp
import uvloop

from loadtests.bench.activator_harness import (
    cpus,
    percentile,
    start_activator,
    start_backend,
    stop,
    workdir,
)

STREAMS = 20


async def delays(port: int) -> list[float]:
    found: list[float] = []

    async def one(session: aiohttp.ClientSession) -> None:
        async with session.get(f"http://127.0.0.1:{port}/v1/stream") as resp:
            buffer = b""
            async for chunk in resp.content.iter_any():
                now = time.monotonic()
                buffer += chunk
                *events, buffer = buffer.split(b"\n\n")
                for event in events:
                    if event.startswith(b"data: "):
                        found.append((now - float(event[6:])) * 1000)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(*(one(session) for _ in range(STREAMS)))
    return found


def main(argv: list[str]) -> int:
    proxy_cpu, _, backend_cpu = cpus()  # the client runs here, unpinned
    with workdir() as tmp:
        backend, backend_port = start_backend(backend_cpu, mode="sse")
        routes = (
            "targets:\n  - name: bench/sse\n    path_prefix: /\n"
            f'    endpoints: ["127.0.0.1:{backend_port}"]\n'
        )
        activator, port, _ = start_activator(proxy_cpu, routes, workdir=tmp)
        try:
            direct = uvloop.run(delays(backend_port))
            via = uvloop.run(delays(port))
        finally:
            stop(activator)
            stop(backend)
    print(f"chunks: direct {len(direct)}, via activator {len(via)} (expected {STREAMS * 50} each)")
    for q in (50, 90, 99):
        d, v = percentile(direct, q), percentile(via, q)
        print(f"p{q}: direct {d:.3f} ms, via activator {v:.3f} ms, added {v - d:.3f} ms")
    return 0 if len(via) == len(direct) == STREAMS * 50 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
