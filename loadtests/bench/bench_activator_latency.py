"""Latency at a fixed rate, 1,000 requests/s over 10 and over 50 connections.

The tool is ``hey -q`` (Debian has no ``wrk2``): each of ``c`` connections
sends ``1000 / c`` requests/s and hey keeps every request's latency (its CSV
output), from which p50 and p99 are exact. hey's connections tick in step,
so each tick is a burst of ``c`` requests: a harsher load than a smooth
arrival process, and the same for every proxy. hey waits for an answer
before a connection's next request, so a proxy that stalls would lower the
rate rather than the latency; the rate each run achieved is printed and
checked (>= 95% of the asked rate).

In one run and in turn: the nginx backend directly, nginx and haproxy
proxying it, one activator worker proxying it; each proxy alone on its core.
Targets (issue 14), against the same run's nginx: over 10 connections p50
at most +0.5 ms and p99 at most +1.5 ms; over 50 connections p50 at most
+1 ms.
"""

from __future__ import annotations

import sys

from loadtests.bench.activator_harness import (
    PROXY_CPU,
    TOOLS_CPU,
    Proc,
    RateResult,
    hey_rate,
    load_report,
    outrun_check,
    routes_for,
    start_activator,
    start_haproxy,
    start_nginx_backend,
    start_nginx_proxy,
    verdict,
    workdir,
)

RATE = 1000.0
CONNS = (10, 50)


def _measure(port: int, duration: float) -> dict[int, RateResult]:
    return {c: hey_rate(TOOLS_CPU, port, conns=c, rate=RATE, duration_s=duration) for c in CONNS}


def main(argv: list[str]) -> int:
    duration = float(argv[0]) if argv else 8.0
    print(load_report())
    results: dict[str, dict[int, RateResult]] = {}
    with workdir() as tmp:
        backend = start_nginx_backend(TOOLS_CPU, tmp)
        try:
            results["direct"] = _measure(backend.port, duration)
            for name in ("nginx", "haproxy", "activator"):
                proxy: Proc
                if name == "nginx":
                    proxy = start_nginx_proxy(PROXY_CPU, tmp, backend.port)
                elif name == "haproxy":
                    proxy = start_haproxy(PROXY_CPU, tmp, backend.port)
                else:
                    proxy, _ = start_activator(PROXY_CPU, tmp, routes_for("small", backend.port))
                try:
                    hey_rate(TOOLS_CPU, proxy.port, conns=50, rate=RATE, duration_s=1)  # warm up
                    results[name] = _measure(proxy.port, duration)
                finally:
                    proxy.stop()
        finally:
            backend.stop()
    print(load_report())
    print("                     10 conns p50 / p99 ms   rate    50 conns p50 / p99 ms   rate")
    for name, by_conns in results.items():
        cells = "   ".join(
            f"{r.p50_ms:8.2f} / {r.p99_ms:6.2f}   {r.achieved_rps:5.0f}/s"
            for r in (by_conns[c] for c in CONNS)
        )
        print(f"{name:>10}:   {cells}")
    nginx, act, direct = results["nginx"], results["activator"], results["direct"]
    # The tools must be far from their limit at this rate: their direct p50
    # (50 connections, the harder case) well under the activator's.
    ok = outrun_check(
        direct[50].p50_ms, act[50].p50_ms, what="p50 ms at 50 connections", higher_is_better=False
    )
    for name, by_conns in results.items():
        for c, r in by_conns.items():
            if r.achieved_rps < 0.95 * RATE or r.errors:
                ok = verdict(
                    f"{name} over {c} connections: rate {r.achieved_rps:.0f}/s, {r.errors} errors",
                    False,
                )
    ok &= verdict(
        f"10 conns p50 <= nginx + 0.5 ms ({act[10].p50_ms:.2f} vs {nginx[10].p50_ms:.2f})",
        act[10].p50_ms <= nginx[10].p50_ms + 0.5,
    )
    ok &= verdict(
        f"10 conns p99 <= nginx + 1.5 ms ({act[10].p99_ms:.2f} vs {nginx[10].p99_ms:.2f})",
        act[10].p99_ms <= nginx[10].p99_ms + 1.5,
    )
    ok &= verdict(
        f"50 conns p50 <= nginx + 1 ms ({act[50].p50_ms:.2f} vs {nginx[50].p50_ms:.2f})",
        act[50].p50_ms <= nginx[50].p50_ms + 1.0,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
