"""CPU per proxied request: the activator's cost, free of scheduling noise.

Latency at a fixed rate (``bench_activator_latency``) is mostly queueing
behind the proxy's per-request CPU, and it moves with whatever else the
machine runs. The CPU a proxy spends per request does not: this benchmark
drives each proxy with ``wrk`` (50 keep-alive connections, small GETs, the
nginx backend, pooled upstream connections) and divides the CPU seconds its
process tree used (``/proc``) by the requests it served. nginx proxying the
same backend in the same run is the reference; the figure is the ratio.

In alternating rounds (nginx, activator, nginx, ...), each proxy alone on
its core; the figure is the median over the rounds, and each round's value
is printed so that the spread shows. There is no target in issue 14 for this
figure itself (it is what the latency targets depend on), so it reports
rather than judges: it fails only when a run had errors or the tools did not
outrun the proxy.
``python -m loadtests.bench.bench_activator_cpu [SECONDS [ROUNDS]]``.
"""

from __future__ import annotations

import sys

from loadtests.bench.activator_harness import (
    PROXY_CPU,
    TOOLS_CPU,
    Proc,
    load_report,
    median,
    outrun_check,
    routes_for,
    start_activator,
    start_nginx_backend,
    start_nginx_proxy,
    tree_cpu_s,
    workdir,
    wrk,
)

CONNS = 50


def _round(proc: Proc, duration_s: float) -> tuple[float, float, int]:
    """(µs of CPU per request, requests/s, errors) of one wrk run through ``proc``."""
    cpu0 = tree_cpu_s(proc.pid)
    result = wrk(TOOLS_CPU, proc.port, conns=CONNS, duration_s=duration_s)
    cpu = tree_cpu_s(proc.pid) - cpu0
    return cpu / max(result.requests, 1) * 1e6, result.rps, result.errors


def main(argv: list[str]) -> int:
    duration = float(argv[0]) if argv else 5.0
    rounds = int(argv[1]) if len(argv) > 1 else 3
    print(load_report())
    per_request: dict[str, list[float]] = {"nginx": [], "activator": []}
    rps: dict[str, list[float]] = {"nginx": [], "activator": [], "direct": []}
    errors = 0
    with workdir() as tmp:
        backend = start_nginx_backend(TOOLS_CPU, tmp)
        started: dict[str, Proc] = {}
        try:
            started["nginx"] = start_nginx_proxy(PROXY_CPU, tmp, backend.port)
            started["activator"], _ = start_activator(
                PROXY_CPU, tmp, routes_for("small", backend.port)
            )
            for proc in (backend, *started.values()):
                wrk(TOOLS_CPU, proc.port, conns=CONNS, duration_s=1)  # warm up
            for _ in range(rounds):
                rps["direct"].append(
                    wrk(TOOLS_CPU, backend.port, conns=CONNS, duration_s=duration).rps
                )
                for name, proc in started.items():
                    us, rate, errs = _round(proc, duration)
                    per_request[name].append(us)
                    rps[name].append(rate)
                    errors += errs
        finally:
            for proc in started.values():
                proc.stop()
            backend.stop()
    print(load_report())
    print(f"{rounds} rounds of {duration:g}s, wrk -c{CONNS}; medians, then each round:")
    for name, values in per_request.items():
        each = "  ".join(f"{v:.1f}" for v in values)
        print(
            f"{name:>10}: {median(values):6.1f} µs CPU/request at {median(rps[name]):8.0f} req/s"
            f"   ({each})"
        )
    ratio = median(per_request["activator"]) / median(per_request["nginx"])
    print(f"activator CPU per request: {ratio:.2f}x nginx's")
    ok = outrun_check(
        median(rps["direct"]),
        median(rps["activator"]),
        what="wrk + nginx backend",
        higher_is_better=True,
    )
    if errors:
        print(f"{errors} requests failed")
    return 0 if ok and not errors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
