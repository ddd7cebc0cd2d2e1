"""10,000 requests held through a cold start: memory, and every one answered.

The activator starts with a target whose only endpoint does not listen yet.
``hey`` (from its own pinned process) opens 10,000 connections with one
request each; once the activator reports them all held, its resident memory
is compared with its idle memory measured in the same run (the reference).
Then the backend (nginx) starts on the endpoint's port and every request
must be answered 200. ``container-concurrency`` 200 keeps the upstream
connections bounded. Target (issue 14): under 80 MB extra, all answered.
"""

from __future__ import annotations

import sys
import time

from loadtests.bench.activator_harness import (
    PROXY_CPU,
    TOOLS_CPU,
    Proc,
    free_port,
    hey_burst,
    hey_statuses,
    load_report,
    metric,
    raise_fd_limit,
    routes_for,
    rss_mb,
    start_activator,
    start_nginx_backend,
    verdict,
    workdir,
)

HELD = 10_000
TARGET_MB = 80.0


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else HELD
    raise_fd_limit()
    print(load_report())
    backend_port = free_port()
    procs: list[Proc] = []
    with workdir() as tmp:
        routes = routes_for(
            "cold", backend_port, max_buffered=count + 100, container_concurrency=200
        )
        activator, admin = start_activator(PROXY_CPU, tmp, routes, "--limits-backlog", "16384")
        procs.append(activator)
        try:
            time.sleep(1.0)
            idle_mb = rss_mb(activator.pid)
            load = hey_burst(TOOLS_CPU, activator.port, count=count, timeout_s=120)
            try:
                started = time.monotonic()
                held = 0.0
                while time.monotonic() - started < 60:
                    held = metric(admin, "tidal_activator_requests_buffered")
                    if held >= count:
                        break
                    time.sleep(0.2)
                time.sleep(0.5)
                held_mb = rss_mb(activator.pid)
                released = time.monotonic()
                procs.append(start_nginx_backend(TOOLS_CPU, tmp, backend_port))
                summary, _ = load.communicate(timeout=180)
                answered_s = time.monotonic() - released
            finally:
                if load.poll() is None:
                    load.kill()
                    load.wait()
        finally:
            for proc in procs:
                proc.stop()
    print(load_report())
    statuses = hey_statuses(summary)
    extra = held_mb - idle_mb
    print(f"held at once: {held:.0f} of {count}")
    print(f"activator RSS idle {idle_mb:.1f} MB (reference), holding {held_mb:.1f} MB")
    print(f"extra: {extra:.1f} MB = {extra * 1024 / max(held, 1):.1f} KiB per held request")
    print(f"answered: {statuses} within {answered_s:.1f}s of the backend starting")
    ok = verdict(f"held {count} at once (got {held:.0f})", held >= count)
    ok &= verdict(f"extra memory < {TARGET_MB:.0f} MB (got {extra:.1f})", extra < TARGET_MB)
    ok &= verdict(f"all {count} answered 200", statuses == {"200": count})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
