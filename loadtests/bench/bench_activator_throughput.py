"""Small requests, 64 connections: the activator's throughput against nginx's.

``wrk`` (one thread, 64 keep-alive connections, closed loop) drives, in one
run and in turn: the nginx backend directly (the tools' ceiling), nginx and
haproxy proxying it (the references), then one activator worker proxying
it. Each proxy runs alone on its core; ``wrk`` and the backend share the
other. The tools must outrun the activator (direct >= 1.5x its figure), and
the activator must reach at least 0.30x nginx's throughput (issue 14).
"""

from __future__ import annotations

import sys

from loadtests.bench.activator_harness import (
    PROXY_CPU,
    TOOLS_CPU,
    ThroughputResult,
    load_report,
    outrun_check,
    routes_for,
    start_activator,
    start_haproxy,
    start_nginx_backend,
    start_nginx_proxy,
    verdict,
    workdir,
    wrk,
)

CONNS = 64
TARGET_RATIO = 0.30


def main(argv: list[str]) -> int:
    duration = float(argv[0]) if argv else 8.0
    print(load_report())
    results: dict[str, ThroughputResult] = {}
    with workdir() as tmp:
        backend = start_nginx_backend(TOOLS_CPU, tmp)
        try:
            results["direct"] = wrk(TOOLS_CPU, backend.port, conns=CONNS, duration_s=duration)
            for start in (start_nginx_proxy, start_haproxy):
                proxy = start(PROXY_CPU, tmp, backend.port)
                try:
                    wrk(TOOLS_CPU, proxy.port, conns=CONNS, duration_s=1)  # warm up
                    results[proxy.name] = wrk(
                        TOOLS_CPU, proxy.port, conns=CONNS, duration_s=duration
                    )
                finally:
                    proxy.stop()
            activator, _ = start_activator(PROXY_CPU, tmp, routes_for("small", backend.port))
            try:
                wrk(TOOLS_CPU, activator.port, conns=CONNS, duration_s=1)  # warm up
                results["activator"] = wrk(
                    TOOLS_CPU, activator.port, conns=CONNS, duration_s=duration
                )
            finally:
                activator.stop()
        finally:
            backend.stop()
    print(load_report())
    nginx = results["nginx"].rps
    for name, r in results.items():
        print(
            f"{name:>10}: {r.rps:9.0f} req/s  ({r.rps / nginx:.2f}x nginx)  "
            f"{r.requests} requests, {r.errors} errors"
        )
    act = results["activator"]
    ok = outrun_check(results["direct"].rps, act.rps, what="req/s", higher_is_better=True)
    ok &= verdict(f"errors 0 (got {act.errors})", act.errors == 0)
    ok &= verdict(
        f"activator >= {TARGET_RATIO:.2f}x nginx (got {act.rps / nginx:.2f}x)",
        act.rps >= TARGET_RATIO * nginx,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
