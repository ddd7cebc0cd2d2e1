"""Benchmark: ``tidal simulate`` over one hour of the Azure code trace, every policy.

Runs what ``tidal simulate --trace code`` runs (always-on's search for the
smallest fleet, HPA, KEDA + HTTP add-on, Knative KPA with its own and with
Tidal's idle settings, the Dynamo planner, Tidal's defaults, tuned and
adaptive, and the oracle's bound; 60 s cold starts) in this one process, pinned to one
core, and measures its CPU time (``time.process_time``: the simulator is
single-threaded, so that is the time on one core) and wall time.

Target (issue 12): under 30 s on one core. A missed target prints so and
exits 1. The trace ships with the package (``simulator/data``).

``python -m loadtests.bench.bench_simulate``
"""

from __future__ import annotations

import os
import sys
import time

from simulator import traces
from simulator.runner import SimulationOptions, run_policies

TARGET_CPU_S = 30.0


def main(argv: list[str]) -> int:
    path = traces.find_trace("code")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    wall = time.monotonic()
    cpu = time.process_time()
    requests = traces.read_trace(path)
    runs = run_policies(requests, SimulationOptions())
    cpu_s = time.process_time() - cpu
    wall_s = time.monotonic() - wall
    for run in runs:
        c = run.scorecard
        print(
            f"  {c.name:<16} SLO {c.slo_attainment * 100:5.1f}%  GPU-h {c.gpu_seconds / 3600:5.2f}"
            f"  cold starts {c.cold_starts:3d}  failed {c.failed}"
        )
    ok = cpu_s < TARGET_CPU_S
    print(
        f"simulate: {len(requests)} requests (one hour of the code trace), {len(runs)} policies "
        f"in {cpu_s:.1f} s CPU on one core ({wall_s:.1f} s wall); target < {TARGET_CPU_S:.0f} s: "
        f"{'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
