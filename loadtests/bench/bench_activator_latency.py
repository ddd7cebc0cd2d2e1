"""Latency the activator adds over a direct connection, at fixed request rates.

Open loop: requests are scheduled at a fixed rate over 32 keep-alive
connections and each latency counts from its scheduled time (queueing is not
hidden). Each rate runs straight to the backend, then through one activator
worker; the figures are the differences of the percentiles. Target at 1,000
requests/s: p50 added < 1 ms, p99 added < 3 ms.
"""

from __future__ import annotations

import sys

from loadtests.bench.activator_harness import (
    cpus,
    run_load,
    start_activator,
    start_backend,
    stop,
    workdir,
)

RATES = (250, 500, 1000, 2000)


def main(argv: list[str]) -> int:
    duration = float(argv[0]) if argv else 5.0
    proxy_cpu, load_cpu, backend_cpu = cpus()
    results = []
    with workdir() as tmp:
        backend, backend_port = start_backend(backend_cpu)
        routes = (
            "targets:\n  - name: bench/small\n    path_prefix: /\n"
            f'    endpoints: ["127.0.0.1:{backend_port}"]\n'
        )
        activator, port, _ = start_activator(proxy_cpu, routes, workdir=tmp)
        try:
            run_load(load_cpu, port=port, conns=32, duration_s=1.0)  # warm up
            for rate in RATES:
                direct = run_load(
                    load_cpu, port=backend_port, conns=32, rate=rate, duration_s=duration
                )
                proxied = run_load(load_cpu, port=port, conns=32, rate=rate, duration_s=duration)
                results.append((rate, direct, proxied))
        finally:
            stop(activator)
            stop(backend)
    met = True
    print("rate/s   direct p50/p99 ms   activator p50/p99 ms   added p50/p99 ms")
    for rate, d, p in results:
        add50, add99 = p["p50_ms"] - d["p50_ms"], p["p99_ms"] - d["p99_ms"]
        print(
            f"{rate:6d}   {d['p50_ms']:7.3f} / {d['p99_ms']:7.3f}   "
            f"{p['p50_ms']:9.3f} / {p['p99_ms']:8.3f}      {add50:7.3f} / {add99:7.3f}"
        )
        if rate == 1000:
            met = add50 < 1.0 and add99 < 3.0
    print(f"target at 1000/s (p50 < 1 ms, p99 < 3 ms added): {'MET' if met else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
