"""Throughput of one activator worker vs nginx, proxying the same backend.

Closed loop: 64 keep-alive connections send small requests back to back for
a few seconds, first straight to the backend (the ceiling of the tools), then
through nginx (one worker), then through the activator (one worker). Proxy
and load generator are pinned to different cores. Target: at least 4,000
requests/s per activator worker.
"""

from __future__ import annotations

import sys

from loadtests.bench.activator_harness import (
    cpus,
    run_load,
    start_activator,
    start_backend,
    start_nginx,
    stop,
    workdir,
)

TARGET_RPS = 4000


def main(argv: list[str]) -> int:
    duration = float(argv[0]) if argv else 5.0
    proxy_cpu, load_cpu, backend_cpu = cpus()
    with workdir() as tmp:
        backend, backend_port = start_backend(backend_cpu)
        procs = [backend]
        try:
            direct = run_load(load_cpu, port=backend_port, conns=64, duration_s=duration)
            nginx, nginx_port = start_nginx(proxy_cpu, backend_port, tmp)
            procs.append(nginx)
            via_nginx = run_load(load_cpu, port=nginx_port, conns=64, duration_s=duration)
            stop(nginx)
            routes = (
                "targets:\n  - name: bench/small\n    path_prefix: /\n"
                f'    endpoints: ["127.0.0.1:{backend_port}"]\n'
            )
            activator, port, _ = start_activator(proxy_cpu, routes, workdir=tmp)
            procs.append(activator)
            run_load(load_cpu, port=port, conns=64, duration_s=1.0)  # warm up
            via_activator = run_load(load_cpu, port=port, conns=64, duration_s=duration)
        finally:
            for proc in procs:
                stop(proc)
    for name, r in (("direct", direct), ("nginx", via_nginx), ("activator", via_activator)):
        print(
            f"{name:>10}: {r['rps']:8.0f} req/s  p50 {r['p50_ms']:.2f} ms  "
            f"p99 {r['p99_ms']:.2f} ms  statuses {r['statuses']}"
        )
    ratio = via_activator["rps"] / via_nginx["rps"]
    print(f"activator / nginx throughput: {ratio:.2f}")
    print(
        f"activator per worker: {via_activator['rps']:.0f} req/s "
        f"(target >= {TARGET_RPS}): {'MET' if via_activator['rps'] >= TARGET_RPS else 'NOT MET'}"
    )
    ok = set(via_activator["statuses"]) == {"200"}
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
