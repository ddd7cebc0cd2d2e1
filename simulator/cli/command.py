"""The command's order: check the flags, run each seed and variant, print the table or the JSON.

``--adapters`` and ``--shapes`` are their own commands (:mod:`simulator.adapter_cli`,
:mod:`simulator.shape_cli`) over the same flags. Otherwise each seed loads
its workload and options afresh and runs every variant
(:mod:`~simulator.cli.variants`); several seeds are averaged
(:mod:`~simulator.cli.seeds`). Any bad input (a trace, a flag, an
annotation) is one line on stderr naming it, and exit status 2. Charts
draw one variant's runs (the first cold start and routing), since a second
would repeat every name.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from scaler.policy import InvalidAnnotation
from simulator import adapter_cli, progress, shape_cli, traces
from simulator.classes import class_table
from simulator.cli.document import json_document
from simulator.cli.fleets import frontier_lines, verdicts_for
from simulator.cli.options import options_from
from simulator.cli.scorecard_table import table
from simulator.cli.seeds import mean_card, spread_table
from simulator.cli.variants import variant_policies
from simulator.cli.workload import load_requests
from simulator.runner import PolicyRun, task_count
from simulator.scorecard import Scorecard

__all__ = ["run"]


def _check_charts(args: argparse.Namespace) -> None:
    if args.chart_policy is not None and args.charts is None:
        raise ValueError("--chart-policy chooses the replicas chart of --charts DIR; give --charts")
    if args.charts is None:
        return
    try:
        args.charts.mkdir(parents=True, exist_ok=True)
        probe = args.charts / ".tidal-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ValueError(
            f"--charts {args.charts}: cannot write there ({error.strerror or error}); "
            "give a folder you can write to"
        ) from error


def _cpu_s() -> float:
    """CPU seconds of this process and of the workers it has waited for (``--jobs``)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run(args: argparse.Namespace) -> int:
    started = _cpu_s()
    if args.seeds < 1:
        print(f"tidal simulate: --seeds must be >= 1, got {args.seeds}", file=sys.stderr)
        return 2
    if args.adapters:
        try:
            return adapter_cli.run(args)
        except ValueError as error:
            print(f"tidal simulate: {error}", file=sys.stderr)
            return 2
    if args.trace is None:
        print("tidal simulate: --trace is required (or --adapters N)", file=sys.stderr)
        return 2
    if args.shapes:
        try:
            requests = load_requests(args)
            options = options_from(args)
        except (traces.TraceError, traces.TracesMissingError, ValueError) as error:
            print(f"tidal simulate: {error}", file=sys.stderr)
            return 2
        return shape_cli.run(args, requests, options)
    seeds = [args.seed + i for i in range(args.seeds)]
    per_seed: list[list[PolicyRun]] = []
    variants = len(args.routing or [None]) * len(args.cold_start)
    if args.progress if args.progress is not None else sys.stderr.isatty():
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        tasks = task_count(policies, spot=args.placement != "on-demand")
        progress.start(rows=len(seeds) * variants * tasks)
    try:
        _check_charts(args)
        for seed in seeds:
            seeded = argparse.Namespace(**{**vars(args), "seed": seed})
            requests = load_requests(seeded, warn=seed == seeds[0])
            options = options_from(seeded)
            # A bad annotation (--annotation, --sleep-after) says which in a ValueError.
            per_seed.append(variant_policies(requests, options, args))
    except (traces.TraceError, traces.TracesMissingError, InvalidAnnotation, ValueError) as error:
        print(f"tidal simulate: {error}", file=sys.stderr)
        return 2
    finally:
        progress.finish()
    # Charts draw one variant's runs (the first cold start and routing): a
    # second would repeat every name.
    runs = per_seed[0][: len(per_seed[0]) // variants]
    rows: list[tuple[Scorecard, dict[str, tuple[float, float]]]]
    if len(seeds) == 1:
        rows = [(r.scorecard, {}) for r in per_seed[0]]
    else:
        rows = [mean_card([s[i].scorecard for s in per_seed]) for i in range(len(per_seed[0]))]
    cards = [card for card, _ in rows]
    if args.charts is not None:
        from simulator import charts

        try:
            written = charts.write_charts(runs, args.charts, focus=args.chart_policy or "tidal")
        except charts.ChartsUnavailable as error:
            print(f"tidal simulate: {error}", file=sys.stderr)
            return 2
        for path in written:
            print(f"wrote {path}", file=sys.stderr if args.json else sys.stdout)
    elapsed = _cpu_s() - started
    results = [r.result for r in runs if r.result is not None]
    verdicts = verdicts_for(cards, per_seed)
    if args.json:
        document = json_document(args, rows, verdicts, per_seed, results, seeds)
        print(json.dumps({**document, "cpu_s": round(elapsed, 2)}))
    else:
        colds = ", ".join(f"{c:g}" for c in args.cold_start)
        print(
            f"{len(requests)} requests over {requests[-1].offset_s:.0f} s, cold start "
            f"{colds} s, {args.start} start, target concurrency "
            f"{options.target_concurrency:g} per replica, at most {options.max_replicas}"
            + (f"; mean of seeds {seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else "")
        )
        print(table(cards, verdicts))
        for line in frontier_lines(per_seed):
            print(line)
        if len(seeds) > 1:
            print(f"spread over {len(seeds)} seeds (min..max):")
            print(spread_table(rows))
        if args.class_field is not None:
            print(f"TTFT by class (seed {seeds[0]}):")
            print(class_table(results))
        print(f"simulated in {elapsed:.1f} s of CPU")
    return 0
