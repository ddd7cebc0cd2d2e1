"""10,000 requests held through a cold start: memory, and every one answered.

The activator starts with a target whose only endpoint is not listening.
10,000 connections each send one request (from a separate, pinned load
process); once the activator reports them all held, its resident memory is
compared with its idle memory measured in the same run (the reference).
Then the backend starts and every request must be answered 200.
``container-concurrency`` 200 keeps the upstream connections bounded.
Target: under 150 MB extra.
"""

from __future__ import annotations

import json
import sys
import time

from loadtests.bench.activator_harness import (
    cpus,
    free_port,
    metric,
    raise_fd_limit,
    rss_mb,
    spawn_load,
    start_activator,
    start_backend,
    stop,
    workdir,
)

HELD = 10_000
TARGET_MB = 150.0


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else HELD
    raise_fd_limit()
    proxy_cpu, load_cpu, backend_cpu = cpus()
    backend_port = free_port()
    with workdir() as tmp:
        routes = (
            "targets:\n  - name: bench/cold\n    path_prefix: /\n"
            f'    endpoints: ["127.0.0.1:{backend_port}"]\n'
            f"    max_buffered: {count + 100}\n    container_concurrency: 200\n"
        )
        activator, port, admin = start_activator(
            proxy_cpu, routes, "--limits-backlog", "16384", workdir=tmp
        )
        procs = [activator]
        try:
            time.sleep(1.0)
            idle_mb = rss_mb(activator.pid)
            load = spawn_load(load_cpu, port=port, conns=count, burst=True, timeout_s=120)
            procs.append(load)
            started = time.monotonic()
            held = 0.0
            while time.monotonic() - started < 60:
                held = metric(admin, "tidal_activator_requests_buffered")
                if held >= count:
                    break
                time.sleep(0.2)
            time.sleep(0.5)
            held_mb = rss_mb(activator.pid)
            backend, _ = start_backend(backend_cpu, port=backend_port)
            procs.append(backend)
            out, _ = load.communicate(timeout=120)
            result = json.loads(out)
        finally:
            for proc in procs:
                stop(proc)
    extra = held_mb - idle_mb
    print(f"held at once: {held:.0f} of {count}")
    print(f"activator RSS idle {idle_mb:.1f} MB (reference), holding {held_mb:.1f} MB")
    print(
        f"extra: {extra:.1f} MB = {extra * 1024 / max(held, 1):.1f} KiB per held request "
        f"(x{held_mb / idle_mb:.2f} of idle); target < {TARGET_MB:.0f} MB: "
        f"{'MET' if extra < TARGET_MB else 'NOT MET'}"
    )
    print(f"answered: {result['statuses']} in {result['elapsed_s']:.1f}s after the burst")
    ok = result["statuses"] == {"200": count} and held >= count
    print("all answered" if ok else "NOT all answered")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
