"""Server-sent events relayed: CPU per event and per-event lateness, against nginx.

``sse_tool`` (a small C program, ``sse_tool.c``) is both ends: its server
streams 100 events/s on each of 200 streams (20,000 events/s, streams
phase-shifted so they are not sent in bursts), each event carrying its send
time on CLOCK_MONOTONIC; its client reads the 200 streams and takes every
event's arrival minus send time. In alternating rounds: directly (the
tools' own lateness, and their CPU share, which shows they have room), then
through nginx and haproxy (the references) and one activator worker, each
alone on its core. A proxy's CPU per relayed event comes from its own
``/proc/PID/stat`` counters over the run, divided by the events relayed.
Each figure is the median over the rounds.

Targets (issue 14), against the same run's nginx: CPU per event at most
1.5x nginx's; lateness p99 within 2 ms of nginx's.
``python -m loadtests.bench.bench_activator_sse [SECONDS [ROUNDS]]``.
"""

from __future__ import annotations

import json
import sys
import time

from loadtests.bench.activator_harness import (
    TOOLS_CPU,
    headroom_check,
    load_report,
    median,
    proxies,
    sse_load,
    start_sse_backend,
    tools_cpu_s,
    tree_cpu_s,
    verdict,
    workdir,
)

STREAMS = 200
RATE = 100


def main(argv: list[str]) -> int:
    duration = float(argv[0]) if argv else 6.0
    rounds = int(argv[1]) if len(argv) > 1 else 3
    events = int(RATE * duration)
    print(load_report())
    runs: dict[str, list[tuple[dict[str, float], float]]] = {}
    tools_cpu = tools_wall = 0.0
    with workdir() as tmp:
        backend = start_sse_backend(TOOLS_CPU, rate=RATE, events=events)
        try:
            with proxies(tmp, backend.port, "sse") as started:
                targets = {"direct": None} | dict(started)
                for _ in range(rounds):
                    for name, proxy in targets.items():
                        port = backend.port if proxy is None else proxy.port
                        cpu0, t0 = tools_cpu_s(backend), time.monotonic()
                        before = tree_cpu_s(proxy.pid) if proxy is not None else 0.0
                        found = sse_load(TOOLS_CPU, port, streams=STREAMS, timeout_s=duration + 30)
                        if proxy is None:
                            tools_cpu += tools_cpu_s(backend) - cpu0
                            tools_wall += time.monotonic() - t0
                            us = 0.0
                        else:
                            used = tree_cpu_s(proxy.pid) - before
                            us = used / max(found["events"], 1) * 1e6
                        runs.setdefault(name, []).append((found, us))
        finally:
            backend_out = backend.stop()
    print(load_report())
    print(f"backend: {backend_out.decode().strip()}")
    expected = STREAMS * events
    cpu = {name: median([us for _, us in rs]) for name, rs in runs.items()}
    late = {
        (name, q): median([r[f"{q}_ms"] for r, _ in rs])
        for name, rs in runs.items()
        for q in ("p50", "p90", "p99")
    }
    print(
        f"{rounds} rounds of {STREAMS} streams x {RATE} events/s x {duration:g}s; medians, "
        "then each round's p99:"
    )
    print(f"{'':>10}  CPU/event  lateness p50 / p90 / p99 ms")
    for name, rs in runs.items():
        per_event = f"{cpu[name]:6.1f} us" if name != "direct" else "       -"
        each = ", ".join(f"{r['p99_ms']:.1f}" for r, _ in rs)
        print(
            f"{name:>10}: {per_event}   {late[(name, 'p50')]:6.2f} / {late[(name, 'p90')]:6.2f}"
            f" / {late[(name, 'p99')]:6.2f}   [{each}]"
        )
    ok = headroom_check(tools_cpu, tools_wall, what=f"SSE at {STREAMS * RATE:,} events/s")
    for name, rs in runs.items():
        for r, _ in rs:
            if r["events"] != expected or r["completed"] != STREAMS:
                ok = verdict(f"{name}: every event of every stream ({json.dumps(r)})", False)
    act, ngx = cpu["activator"], cpu["nginx"]
    ok &= verdict(
        f"CPU per event <= 1.5x nginx's ({act:.1f} us vs {ngx:.1f} us, {act / ngx:.2f}x)",
        act <= 1.5 * ngx,
    )
    act99, ngx99 = late[("activator", "p99")], late[("nginx", "p99")]
    ok &= verdict(
        f"lateness p99 <= nginx's + 2 ms ({act99:.2f} vs {ngx99:.2f})", act99 <= ngx99 + 2.0
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
