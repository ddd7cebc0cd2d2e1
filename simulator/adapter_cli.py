"""``tidal simulate --adapters N``: the flags, the three runs and their table.

The workload and the fleets are :mod:`simulator.adapters`; the event loop
that serves them is :mod:`simulator.adapter_fleet`. This module only reads
the flags, runs the three modes on one workload and prints the table (or one
line of JSON with ``--json``).

Main decision: the modes share every flag the trace comparison has where
one applies (``--cold-start``, ``--slo-ttft``, ``--target-concurrency``,
``--seed``), so the two comparisons read alike.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict

from simulator.adapter_fleet import simulate
from simulator.adapters import MODES, AdapterWorkload, FleetParams, ModeResult, generate

__all__ = ["configure", "run"]


def _table(results: list[ModeResult], baseline: ModeResult) -> str:
    header = (
        f"{'mode':<12} {'requests':>8} {'attainment':>10} {'GPU-hours':>9} "
        f"{'vs per-adapter':>14} {'TTFT p99':>8} {'loads':>6} {'unloads':>7} {'peak':>5}"
    )
    rows = [header]
    for r in results:
        ratio = r.gpu_hours / baseline.gpu_hours if baseline.gpu_hours else float("nan")
        rows.append(
            f"{r.mode:<12} {r.requests:>8} {r.attainment:>10.2%} {r.gpu_hours:>9.1f} "
            f"{ratio:>13.3f}x {r.ttft_p99_s:>7.2f}s {r.loads:>6} {r.unloads:>7} "
            f"{r.peak_replicas:>5}"
        )
    return "\n".join(rows)


def configure(parser: argparse.ArgumentParser, duration: Callable[[str], float]) -> None:
    """The ``--adapters`` flags of ``tidal simulate`` (``duration`` parses Go-style durations)."""
    g = parser.add_argument_group(
        "LoRA adapters (--adapters N: compare per-adapter Deployments, adapters pinned to "
        "every replica and Tidal's on-demand loading instead of the trace's policies)"
    )
    g.add_argument(
        "--adapters",
        type=int,
        default=0,
        metavar="N",
        help="adapters of one base model; 0: off (default: 0)",
    )
    g.add_argument(
        "--adapter-zipf",
        type=float,
        default=1.0,
        metavar="S",
        help="popularity: adapter k asked for in proportion to k**-S (default: 1.0)",
    )
    g.add_argument(
        "--adapter-rate",
        type=float,
        default=20.0,
        metavar="RATE",
        help="requests per second, all adapters together (default: 20)",
    )
    g.add_argument(
        "--adapter-duration",
        type=duration,
        default=3600.0,
        metavar="DURATION",
        help="simulated time, warm-up included (default: 1h)",
    )
    g.add_argument(
        "--adapter-max-loras",
        type=int,
        default=8,
        metavar="N",
        help="vLLM --max-loras: distinct adapters one replica runs at once (default: 8)",
    )
    g.add_argument(
        "--adapter-load-time",
        type=duration,
        default=1.0,
        metavar="DURATION",
        help="time to load one adapter on a replica (default: 1s)",
    )
    g.add_argument(
        "--adapter-keep-alive",
        type=duration,
        default=600.0,
        metavar="DURATION",
        help="an adapter idle this long is unloaded (default: 10m, the annotation's)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the three modes and print the table (or one JSON line with ``--json``)."""
    colds = tuple(args.cold_start)
    if len(colds) != 1:
        print("tidal simulate: --adapters takes one --cold-start, not a list", file=sys.stderr)
        return 2
    workload = AdapterWorkload(
        adapters=args.adapters,
        zipf_s=args.adapter_zipf,
        rate_per_s=args.adapter_rate,
        duration_s=args.adapter_duration,
        seed=args.seed,
    )
    fleet = FleetParams(
        max_loras=args.adapter_max_loras,
        load_s=args.adapter_load_time,
        keep_alive_s=args.adapter_keep_alive,
        cold_start_s=colds[0],
        slo_ttft_s=args.slo_ttft,
        target_concurrency=args.target_concurrency,
    )
    requests = generate(workload, fleet)
    results = [simulate(requests, fleet, mode) for mode in MODES]
    if args.json:
        print(json.dumps({"adapters": [asdict(r) for r in results], "workload": asdict(workload)}))
        return 0
    top = workload.shares()
    print(
        f"{len(requests)} requests for {workload.adapters} adapters of one base model over "
        f"{workload.duration_s:.0f} s (Zipf {workload.zipf_s:g}: the top adapter "
        f"{top[0]:.1%}, the last {top[-1]:.2%}); TTFT objective {fleet.slo_ttft_s:g} s; "
        f"scored after {fleet.warmup_s:.0f} s"
    )
    print(_table(results, results[0]))
    return 0
