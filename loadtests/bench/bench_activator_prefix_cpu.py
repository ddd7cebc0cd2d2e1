"""CPU per request with prefix-aware balancing against least-loaded, at full records.

``routing.tidal.dev/balancing: prefix`` adds to each request a JSON walk of
its prompt, its block hashes, a longest-match walk over the block index and
the record of what was sent (:mod:`activator.balancing.prefix_affinity`).
This benchmark measures what that costs the activator per request: two
activators on the same static target (four replicas: one nginx on four
ports), one balancing by load, one by prefix, both routing by ``model`` so
both parse the body; ``wrk`` posts 6 kB chat bodies (a shared 1,000-character
system prompt, then a user message that starts with one of 16,000
conversation ids), which keeps every replica's record at its capacity
(6,250 blocks, above 4,000 tracked prefixes per replica) after the warm-up.
The figure is the prefix activator's CPU per request over the least-loaded
one's, measured in alternating rounds on the same core (median; each round
printed). The target: at most 1.10.

It is a companion to ``bench_activator_cpu`` (GETs, no body), not part of
the test suite. ``python -m loadtests.bench.bench_activator_prefix_cpu
[SECONDS [ROUNDS]]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from loadtests.bench.activator_harness import (
    PROXY_CPU,
    TOOLS_CPU,
    Proc,
    load_report,
    median,
    start_activator,
    start_nginx_backends,
    tree_cpu_s,
    verdict,
    workdir,
    wrk,
)

CONNS = 50
REPLICAS = 4
CONVERSATIONS = 16_000
TARGET = 1.10

# Each request: one of CONVERSATIONS chats, 6 kB, its id at the start of the
# user message so that every block after the system prompt is its own.
_LUA = """
local system = string.rep("You are a careful assistant. ", 36)
local filler = string.rep("Please summarise the following passage carefully. ", 100)
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  local id = math.random(%d)
  local body = '{"model":"bench","max_tokens":16,"messages":[' ..
    '{"role":"system","content":"' .. system .. '"},' ..
    '{"role":"user","content":"conversation ' .. id .. ': ' .. filler .. '"}]}'
  return wrk.format(nil, "/v1/chat/completions", nil, body)
end
"""


def _routes(name: str, ports: list[int], balancing: str) -> str:
    endpoints = ", ".join(f'"127.0.0.1:{p}"' for p in ports)
    return (
        f"targets:\n  - name: bench/{name}\n    models: [bench]\n"
        f"    endpoints: [{endpoints}]\n    balancing: {balancing}\n"
    )


def _round(proc: Proc, duration_s: float, script: Path) -> tuple[float, float, int]:
    """(µs of CPU per request, requests/s, errors) of one wrk run through ``proc``."""
    cpu0 = tree_cpu_s(proc.pid)
    result = wrk(TOOLS_CPU, proc.port, conns=CONNS, duration_s=duration_s, script=script)
    cpu = tree_cpu_s(proc.pid) - cpu0
    return cpu / max(result.requests, 1) * 1e6, result.rps, result.errors


def main(argv: list[str]) -> int:
    duration = float(argv[0]) if argv else 5.0
    rounds = int(argv[1]) if len(argv) > 1 else 3
    print(load_report())
    modes = ("least-loaded", "prefix")
    per_request: dict[str, list[float]] = {m: [] for m in modes}
    rps: dict[str, list[float]] = {m: [] for m in modes}
    errors = 0
    with workdir() as tmp:
        script = tmp / "chat.lua"
        script.write_text(_LUA % CONVERSATIONS)
        backends, ports = start_nginx_backends(TOOLS_CPU, tmp, REPLICAS)
        started: dict[str, Proc] = {}
        try:
            for mode in modes:
                started[mode], _ = start_activator(PROXY_CPU, tmp, _routes(mode, ports, mode))
            for proc in started.values():  # warm up: fill the prefix records
                wrk(TOOLS_CPU, proc.port, conns=CONNS, duration_s=max(3.0, duration), script=script)
            for _ in range(rounds):
                for mode, proc in started.items():
                    us, rate, errs = _round(proc, duration, script)
                    per_request[mode].append(us)
                    rps[mode].append(rate)
                    errors += errs
        finally:
            for proc in started.values():
                proc.stop()
            backends.stop()
    print(load_report())
    print(f"{rounds} rounds of {duration:g}s, wrk -c{CONNS}, 6 kB chat bodies; medians, then each:")
    for mode, values in per_request.items():
        each = "  ".join(f"{v:.1f}" for v in values)
        print(
            f"{mode:>12}: {median(values):6.1f} µs CPU/request at {median(rps[mode]):8.0f} req/s"
            f"   ({each})"
        )
    ratio = median(per_request["prefix"]) / median(per_request["least-loaded"])
    ok = verdict(
        f"prefix balancing CPU per request <= {TARGET:.2f}x least-loaded's (got {ratio:.2f}x)",
        ratio <= TARGET,
    )
    if errors:
        print(f"{errors} requests failed")
    return 0 if ok and not errors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
