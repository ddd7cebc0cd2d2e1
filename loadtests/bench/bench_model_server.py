"""Benchmark: one fake vLLM process streaming to 500 concurrent clients on one core.

The server runs pinned to CPU 0, the load generator (this process) to CPU 1.
500 streaming completions (ignore_eos, fixed lengths) start at once with
max_num_seqs 512, so all run in one batch. Figures, each against a reference
measured in the same run:

- **model ideal**: the same arrivals through the pure model on a simulated
  clock (``simulator.engine.simulate``): what a perfectly fast server would
  show. Ratios near 1 mean the process keeps up with its own model;
- **naive server**: a trivial aiohttp server streaming the same bytes at the
  same per-token pace with one timer per request and no model, the obvious
  way to write a fake. Its CPU seconds per token are the reference for ours.

Also printed: server CPU seconds, idle and peak RSS, start-to-listening time
(zygote fork vs fresh interpreter). Run: ``python -m loadtests.bench.bench_model_server``
(``--clients``, ``--tokens`` to change the load).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from loadtests.sandbox.servers.launcher import ZygoteLauncher
from loadtests.sandbox.servers.server import free_port
from loadtests.sandbox.servers.spec import ServerSpec
from simulator.engine import Arrival, LlmParams, simulate

SERVER_CPU = 0
CLIENT_CPU = 1


@dataclass(frozen=True, slots=True)
class RunResult:
    ttft_p50_s: float
    ttft_p99_s: float
    tokens_per_s: float
    wall_s: float
    cpu_s: float
    rss_kb: int
    hwm_kb: int
    failures: int


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_mem_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def _pin(cpu: int) -> None:
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu if cpu in cpus else min(cpus)})


async def _wait_listening(port: int, timeout_s: float = 30.0) -> float:
    started = time.perf_counter()
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{port}/health") as resp:
                    if resp.status == 200:
                        return time.perf_counter() - started
            except aiohttp.ClientError:
                pass
            if time.perf_counter() - started > timeout_s:
                raise TimeoutError(f"nothing listening on {port}")
            await asyncio.sleep(0.002)


async def _load(pid: int, port: int, *, clients: int, tokens: int) -> RunResult:
    url = f"http://127.0.0.1:{port}/v1/completions"
    body = {"prompt": "x" * 800, "max_tokens": tokens, "ignore_eos": True, "stream": True}
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=600)

    async def one(session: aiohttp.ClientSession) -> tuple[float, int]:
        started = time.perf_counter()
        first = 0.0
        count = 0
        async with session.post(url, json=body) as resp:
            async for chunk in resp.content.iter_any():
                if not first and b'"text":' in chunk:
                    first = time.perf_counter() - started
                count += chunk.count(b'"text":')
        return first, count

    cpu_before = _proc_cpu_s(pid)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(one(session) for _ in range(clients)), return_exceptions=True
        )
        wall = time.perf_counter() - started
    cpu = _proc_cpu_s(pid) - cpu_before
    ok = [r for r in results if isinstance(r, tuple) and r[1] == tokens]
    ttfts = sorted(r[0] for r in ok) or [float("nan")]
    return RunResult(
        ttft_p50_s=statistics.median(ttfts),
        ttft_p99_s=ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))],
        tokens_per_s=sum(r[1] for r in ok) / wall,
        wall_s=wall,
        cpu_s=cpu,
        rss_kb=_proc_mem_kb(pid, "VmRSS"),
        hwm_kb=_proc_mem_kb(pid, "VmHWM"),
        failures=clients - len(ok),
    )


# --- the naive reference server -----------------------------------------------------


async def _naive_server(port: int, step_s: float) -> None:
    """Same bytes, same pace, one sleep per token per request, no model."""
    from aiohttp import web

    prefix = b'data: {"id":"cmpl-x","object":"text_completion","created":0,"model":"m","choices":[{"index":0,"text":"'  # noqa: E501
    suffix = b'","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for _ in range(int(body["max_tokens"])):
            await asyncio.sleep(step_s)
            await resp.write(prefix + b" word" + suffix)
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def health(request: web.Request) -> web.Response:
        return web.Response()

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/health", health)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=2048).start()
    await asyncio.Event().wait()


# --- main ----------------------------------------------------------------------------


def _row(name: str, value: float, ref: float, unit: str) -> str:
    ratio = value / ref if ref else float("nan")
    return f"  {name:<28} {value:>10.3f} {unit:<8} ref {ref:>10.3f}   ratio {ratio:6.2f}"


async def _run(args: argparse.Namespace) -> int:
    _pin(CLIENT_CPU)
    params = LlmParams(max_num_seqs=512)
    # The model's ideal: all clients arrive at once, 200 prompt tokens each.
    ideal = simulate([Arrival(0.0, 200, args.tokens) for _ in range(args.clients)], params)
    ideal_ttft = sorted(r.ttft_s for r in ideal.records)
    ideal_p50 = statistics.median(ideal_ttft)
    ideal_p99 = ideal_ttft[int(0.99 * len(ideal_ttft))]
    ideal_tps = ideal.output_tokens_per_s
    step_s = params.step_time_s(decoding=args.clients, prefill_tokens=0)

    # Start-up: zygote fork vs fresh interpreter.
    launcher = ZygoteLauncher()
    try:
        await launcher.ensure_zygote()
        port = free_port()
        started = time.perf_counter()
        spec = ServerSpec(engine="vllm", model="m", host="127.0.0.1", port=port)
        process = await launcher.start(spec)
        await _wait_listening(port)
        zygote_start_s = time.perf_counter() - started
        idle_rss_kb = _proc_mem_kb(process.pid, "VmRSS")
        process.terminate()
        await process.wait()
    finally:
        await launcher.close()

    def spawn(argv: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", *argv],
            preexec_fn=lambda: _pin(SERVER_CPU),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    port = free_port()
    started = time.perf_counter()
    server = spawn(
        ["loadtests.sandbox.servers.cli", "--port", str(port), "--model", "m",
         "--max-num-seqs", "512"]
    )  # fmt: skip
    try:
        await _wait_listening(port)
        fresh_start_s = time.perf_counter() - started
        fake = await _load(server.pid, port, clients=args.clients, tokens=args.tokens)
    finally:
        server.terminate()
        server.wait()

    port = free_port()
    naive = spawn(["loadtests.bench.bench_model_server", "--naive-server", str(port), str(step_s)])
    try:
        await _wait_listening(port)
        ref = await _load(naive.pid, port, clients=args.clients, tokens=args.tokens)
    finally:
        naive.terminate()
        naive.wait()

    tokens = args.clients * args.tokens
    print(f"{args.clients} concurrent streams x {args.tokens} tokens, server pinned to one core")
    print("fake vLLM vs the model's ideal (simulated clock):")
    print(_row("TTFT p50", fake.ttft_p50_s, ideal_p50, "s"))
    print(_row("TTFT p99", fake.ttft_p99_s, ideal_p99, "s"))
    print(_row("throughput", fake.tokens_per_s, ideal_tps, "tok/s"))
    print("fake vLLM vs a naive per-request-timer server (same bytes, same pace):")
    print(_row("server CPU per 1000 tokens", 1000 * fake.cpu_s / tokens,
               1000 * ref.cpu_s / tokens, "s"))  # fmt: skip
    print(_row("server CPU share of a core", fake.cpu_s / fake.wall_s, ref.cpu_s / ref.wall_s,
               ""))  # fmt: skip
    print(_row("throughput (naive: no prefill)", fake.tokens_per_s, ref.tokens_per_s, "tok/s"))
    print(_row("peak RSS", fake.hwm_kb / 1024, ref.hwm_kb / 1024, "MiB"))
    print("process start to listening:")
    print(_row("zygote fork vs fresh python", zygote_start_s, fresh_start_s, "s"))
    print(f"  idle RSS of a forked server     {idle_rss_kb / 1024:.1f} MiB")
    print(f"  failed streams: fake {fake.failures}, naive {ref.failures}")
    return 0 if fake.failures == 0 else 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench_model_server")
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--naive-server", nargs=2, metavar=("PORT", "STEP_S"), default=None)
    args = parser.parse_args(argv)
    if args.naive_server is not None:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_naive_server(int(args.naive_server[0]), float(args.naive_server[1])))
        return 0
    return asyncio.run(_run(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
