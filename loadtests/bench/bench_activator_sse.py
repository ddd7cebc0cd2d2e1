"""Server-sent events relayed: CPU per event and per-event lateness, against nginx.

``sse_tool`` (a small C program, ``sse_tool.c``) is both ends: its server
streams 100 events/s on each of 200 streams (20,000 events/s, streams
phase-shifted so they are not sent in bursts), each event carrying its send
time on CLOCK_MONOTONIC; its client reads the 200 streams and takes every
event's arrival minus send time. In one run and in turn: directly (the
tools' own lateness, and their CPU share, which shows they have room), then
through nginx and haproxy (the references) and one activator worker, each
alone on its core. A proxy's CPU per relayed event comes from its own
``/proc/PID/stat`` counters over the run, divided by the events relayed.

Targets (issue 14), against the same run's nginx: CPU per event at most
1.5x nginx's; lateness p99 within 2 ms of nginx's.
"""

from __future__ import annotations

import json
import sys
import time

from loadtests.bench.activator_harness import (
    PROXY_CPU,
    TOOLS_CPU,
    Proc,
    headroom_check,
    load_report,
    routes_for,
    sse_load,
    start_activator,
    start_haproxy,
    start_nginx_proxy,
    start_sse_backend,
    tools_cpu_s,
    tree_cpu_s,
    verdict,
    workdir,
)

STREAMS = 200
RATE = 100


def main(argv: list[str]) -> int:
    duration = float(argv[0]) if argv else 8.0
    events = int(RATE * duration)
    print(load_report())
    results: dict[str, tuple[dict[str, float], float]] = {}
    with workdir() as tmp:
        backend = start_sse_backend(TOOLS_CPU, rate=RATE, events=events)
        try:
            cpu0, t0 = tools_cpu_s(backend), time.monotonic()
            results["direct"] = (
                sse_load(TOOLS_CPU, backend.port, streams=STREAMS, timeout_s=duration + 30),
                0.0,
            )
            tools_cpu, tools_wall = tools_cpu_s(backend) - cpu0, time.monotonic() - t0
            for name in ("nginx", "haproxy", "activator"):
                proxy: Proc
                if name == "nginx":
                    proxy = start_nginx_proxy(PROXY_CPU, tmp, backend.port)
                elif name == "haproxy":
                    proxy = start_haproxy(PROXY_CPU, tmp, backend.port)
                else:
                    proxy, _ = start_activator(PROXY_CPU, tmp, routes_for("sse", backend.port))
                try:
                    before = tree_cpu_s(proxy.pid)
                    found = sse_load(
                        TOOLS_CPU, proxy.port, streams=STREAMS, timeout_s=duration + 30
                    )
                    used = tree_cpu_s(proxy.pid) - before
                    results[name] = (found, used / max(found["events"], 1) * 1e6)
                finally:
                    proxy.stop()
        finally:
            backend_out = backend.stop()
    print(load_report())
    print(f"backend: {backend_out.decode().strip()}")
    expected = STREAMS * events
    print(f"{'':>10}  events    complete  CPU/event  lateness p50 / p90 / p99 / max ms")
    for name, (r, us) in results.items():
        cpu = f"{us:6.1f} us" if name != "direct" else "       -"
        print(
            f"{name:>10}: {r['events']:7.0f}  {r['completed']:4.0f}/{STREAMS}  {cpu}   "
            f"{r['p50_ms']:6.2f} / {r['p90_ms']:6.2f} / {r['p99_ms']:6.2f} / {r['max_ms']:6.1f}"
        )
    ok = headroom_check(tools_cpu, tools_wall, what="SSE at 20,000 events/s")
    for name, (r, _) in results.items():
        if r["events"] != expected or r["completed"] != STREAMS:
            ok = verdict(f"{name}: every event of every stream ({json.dumps(r)})", False)
    (nginx, nginx_us), (act, act_us) = results["nginx"], results["activator"]
    ok &= verdict(
        f"CPU per event <= 1.5x nginx's ({act_us:.1f} us vs {nginx_us:.1f} us, "
        f"{act_us / nginx_us:.2f}x)",
        act_us <= 1.5 * nginx_us,
    )
    ok &= verdict(
        f"lateness p99 <= nginx's + 2 ms ({act['p99_ms']:.2f} vs {nginx['p99_ms']:.2f})",
        act["p99_ms"] <= nginx["p99_ms"] + 2.0,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
