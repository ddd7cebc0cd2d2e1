"""Latency at a fixed rate, 1,000 requests/s over 10 and over 50 connections.

The tool is ``hey -q`` (Debian has no ``wrk2``): each of ``c`` connections
sends ``1000 / c`` requests/s and hey keeps every request's latency (its CSV
output, 0.1 ms resolution), from which p50 and p99 are exact. hey's
connections tick in step, so each tick is a burst of ``c`` requests: a
harsher load than a smooth arrival process, and the same for every proxy.
hey waits for an answer before a connection's next request, so a proxy that
stalls would lower the rate rather than show its latency; the rate each run
achieved is checked (>= 95% of the asked rate). The tools show they have
room by their own CPU share in the direct runs.

In alternating rounds: the nginx backend directly, nginx and haproxy
proxying it, one activator worker proxying it; each proxy alone on its
core. Each figure is the median over the rounds. Targets (issue 14),
against the same run's nginx: over 10 connections p50 at most +0.5 ms and
p99 at most +1.5 ms; over 50 connections p50 at most +1 ms.
``python -m loadtests.bench.bench_activator_latency [SECONDS [ROUNDS]]``.
"""

from __future__ import annotations

import sys
import time

from loadtests.bench.activator_harness import (
    PROXIES,
    TOOLS_CPU,
    RateResult,
    headroom_check,
    hey_rate,
    load_report,
    median,
    proxies,
    start_nginx_backend,
    tools_cpu_s,
    verdict,
    workdir,
)

RATE = 1000.0
CONNS = (10, 50)


def main(argv: list[str]) -> int:
    duration = float(argv[0]) if argv else 6.0
    rounds = int(argv[1]) if len(argv) > 1 else 3
    print(load_report())
    runs: dict[tuple[str, int], list[RateResult]] = {}
    tools_cpu = tools_wall = 0.0
    with workdir() as tmp:
        backend = start_nginx_backend(TOOLS_CPU, tmp)
        try:
            with proxies(tmp, backend.port, "small") as started:
                ports = {"direct": backend.port} | {n: p.port for n, p in started.items()}
                for port in ports.values():
                    hey_rate(TOOLS_CPU, port, conns=50, rate=RATE, duration_s=1)  # warm up
                for _ in range(rounds):
                    for conns in CONNS:
                        for name, port in ports.items():
                            cpu0, t0 = tools_cpu_s(backend), time.monotonic()
                            result = hey_rate(
                                TOOLS_CPU, port, conns=conns, rate=RATE, duration_s=duration
                            )
                            if name == "direct":
                                tools_cpu += tools_cpu_s(backend) - cpu0
                                tools_wall += time.monotonic() - t0
                            runs.setdefault((name, conns), []).append(result)
        finally:
            backend.stop()
    print(load_report())
    p50 = {key: median([r.p50_ms for r in rs]) for key, rs in runs.items()}
    p99 = {key: median([r.p99_ms for r in rs]) for key, rs in runs.items()}
    print(f"{rounds} rounds of {duration:g}s at {RATE:.0f} req/s; medians, then each round:")
    for name in ("direct", *PROXIES):
        for conns in CONNS:
            rs = runs[(name, conns)]
            each = "  ".join(f"{r.p50_ms:.1f}/{r.p99_ms:.1f}" for r in rs)
            print(
                f"{name:>10} x{conns:<3} p50 {p50[(name, conns)]:5.2f} ms  "
                f"p99 {p99[(name, conns)]:6.2f} ms   [{each}]"
            )
    ok = headroom_check(tools_cpu, tools_wall, what=f"{RATE:.0f} req/s")
    for (name, conns), rs in runs.items():
        for r in rs:
            if r.achieved_rps < 0.95 * RATE or r.errors:
                ok = verdict(
                    f"{name} over {conns} connections ran at the asked rate without errors "
                    f"(got {r.achieved_rps:.0f}/s, {r.errors} errors)",
                    False,
                )
    act, ngx = "activator", "nginx"
    ok &= verdict(
        f"10 conns p50 <= nginx + 0.5 ms ({p50[(act, 10)]:.2f} vs {p50[(ngx, 10)]:.2f})",
        p50[(act, 10)] <= p50[(ngx, 10)] + 0.5,
    )
    ok &= verdict(
        f"10 conns p99 <= nginx + 1.5 ms ({p99[(act, 10)]:.2f} vs {p99[(ngx, 10)]:.2f})",
        p99[(act, 10)] <= p99[(ngx, 10)] + 1.5,
    )
    ok &= verdict(
        f"50 conns p50 <= nginx + 1 ms ({p50[(act, 50)]:.2f} vs {p50[(ngx, 50)]:.2f})",
        p50[(act, 50)] <= p50[(ngx, 50)] + 1.0,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
