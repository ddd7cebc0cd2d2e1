"""Small requests, 64 connections: the activator's throughput against nginx's.

``wrk`` (one thread, 64 keep-alive connections, closed loop) drives, in
alternating rounds: the nginx backend directly (the tools' ceiling), nginx
and haproxy proxying it (the references), and one activator worker proxying
it. Each proxy runs alone on its core; ``wrk`` and the backend share the
other. Figures are medians over the rounds (after a warm-up run of each).
The tools must outrun the activator (direct >= 1.5x its figure), and the
activator must reach at least 0.30x nginx's throughput (issue 14).
``python -m loadtests.bench.bench_activator_throughput [SECONDS [ROUNDS]]``.
"""

from __future__ import annotations

import sys

from loadtests.bench.activator_harness import (
    PROXIES,
    TOOLS_CPU,
    load_report,
    median,
    outrun_check,
    proxies,
    start_nginx_backend,
    verdict,
    workdir,
    wrk,
)

CONNS = 64
TARGET_RATIO = 0.30


def main(argv: list[str]) -> int:
    duration = float(argv[0]) if argv else 5.0
    rounds = int(argv[1]) if len(argv) > 1 else 3
    print(load_report())
    rps: dict[str, list[float]] = {name: [] for name in ("direct", *PROXIES)}
    errors: dict[str, int] = dict.fromkeys(rps, 0)
    with workdir() as tmp:
        backend = start_nginx_backend(TOOLS_CPU, tmp)
        try:
            with proxies(tmp, backend.port, "small") as started:
                ports = {"direct": backend.port} | {n: p.port for n, p in started.items()}
                for port in ports.values():
                    wrk(TOOLS_CPU, port, conns=CONNS, duration_s=1)  # warm up
                for _ in range(rounds):
                    for name, port in ports.items():
                        result = wrk(TOOLS_CPU, port, conns=CONNS, duration_s=duration)
                        rps[name].append(result.rps)
                        errors[name] += result.errors
        finally:
            backend.stop()
    print(load_report())
    figures = {name: median(values) for name, values in rps.items()}
    nginx = figures["nginx"]
    print(f"{rounds} rounds of {duration:g}s, median (and each round) in requests/s:")
    for name, figure in figures.items():
        each = ", ".join(f"{v:.0f}" for v in rps[name])
        print(
            f"{name:>10}: {figure:9.0f} req/s  ({figure / nginx:.2f}x nginx)  "
            f"[{each}]  {errors[name]} errors"
        )
    act = figures["activator"]
    ok = outrun_check(figures["direct"], act, what="req/s", higher_is_better=True)
    ok &= verdict(f"no errors (got {sum(errors.values())})", not any(errors.values()))
    ok &= verdict(
        f"activator >= {TARGET_RATIO:.2f}x nginx (got {act / nginx:.2f}x)",
        act >= TARGET_RATIO * nginx,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
