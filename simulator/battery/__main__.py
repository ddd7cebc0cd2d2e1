"""``python -m simulator.battery``: run the battery's grid and print its verdicts.

Every cell by default; ``--workload`` and ``--cold-start`` choose a subset
while iterating on the policy, ``--tidal-only`` leaves the baselines out
(the fixed fleets still run: the verdict needs them), ``--jobs`` runs that
many tasks at once, ``--json`` prints one JSON document instead of the
table, and ``--annotation`` tries a ``tidal`` knob across the grid.
``--save FILE`` keeps a run's JSON, ``--render FILE...`` judges saved runs
again (a long grid run in parts), and ``--doc PAGE`` rewrites the table in
docs/slo-scaling.md. The exit status is 1 when any cell fails its limits,
so that a script can gate on it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from groundwork.rules.durations import parse_duration_s
from simulator.battery.grid import COLD_STARTS_S, WORKLOADS, cells
from simulator.battery.report import from_json, judge_cell, table, to_json, write_block
from simulator.battery.runs import run_cells

__all__ = ["main"]


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def _colds(text: str) -> list[float]:
    try:
        return [parse_duration_s(n.strip()) for n in text.split(",") if n.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma list of durations (60s,5s)") from error


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m simulator.battery",
        description="Run tidal, the baselines and every fixed fleet over the battery's grid "
        "of workloads and cold starts, and print one verdict per cell, the worst last.",
    )
    parser.add_argument(
        "--workload",
        type=_names,
        default=[],
        metavar="LIST",
        help="comma list of workloads (default: all): "
        + ", ".join(w.name for w in WORKLOADS)
        + "; a name before '@' (code, conv, long-prompt, reasoning) selects every variant",
    )
    parser.add_argument(
        "--cold-start",
        type=_colds,
        default=[],
        metavar="LIST",
        help="comma list of cold starts (default: "
        + ",".join(f"{c:g}s" for c in COLD_STARTS_S)
        + ")",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, metavar="N", help="tasks run at once (default 1)"
    )
    parser.add_argument(
        "--tidal-only",
        action="store_true",
        help="run tidal and the fixed fleets only, not the baselines",
    )
    parser.add_argument(
        "--annotation",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Tidal annotation for the tidal row (as tidal simulate --annotation), repeatable",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--save",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the run's JSON document to FILE (for --render)",
    )
    parser.add_argument(
        "--render",
        type=Path,
        nargs="+",
        default=None,
        metavar="FILE",
        help="run nothing: judge the cells of saved runs (--save), a later file's cell "
        "replacing an earlier one's (a --tidal-only run only its tidal row), and print or "
        "--doc them",
    )
    parser.add_argument(
        "--doc",
        type=Path,
        default=None,
        metavar="PAGE",
        help="also rewrite the battery's table in PAGE between its generated:battery markers "
        "(docs/slo-scaling.md)",
    )
    return parser


def _command(argv: Sequence[str]) -> str:
    """The command line that runs these cells again (what a saved run and the page
    quote): ``make frontier`` for the whole grid, else the module with its selection."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--save", "--doc"):
            skip = True
        elif not arg.startswith(("--save=", "--doc=")) and arg != "--json":
            kept.append(arg)
    return "make frontier" if not kept else "python -m simulator.battery " + shlex.join(kept)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.jobs < 1:
        print(f"--jobs must be >= 1, got {args.jobs}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        if args.render:
            texts = [p.read_text() for p in args.render]
            judged = [judge_cell(r) for r in from_json(texts)]
            commands = [json.loads(t).get("command", "make frontier") for t in texts]
        else:
            commands = [_command(argv)]
            chosen = cells(args.workload, args.cold_start)
            runs = run_cells(
                chosen, jobs=args.jobs, annotations=args.annotation, tidal_only=args.tidal_only
            )
            judged = [judge_cell(r) for r in runs]
    except (ValueError, OSError) as error:
        print(f"python -m simulator.battery: {error}", file=sys.stderr)
        return 2
    document = json.dumps(
        {
            "cells": to_json(judged),
            "command": commands[0] if len(commands) == 1 else commands,
            "wall_s": round(time.monotonic() - started),
        }
    )
    if args.save is not None:
        args.save.write_text(document + "\n")
    if args.doc is not None:
        write_block(args.doc, table(judged), commands=commands)
    if args.json:
        print(document)
    else:
        print(table(judged))
        print(
            "each cell: tidal simulate FLAGS --policies "
            "always-on,tidal,hpa,keda-http,knative-kpa,planner,reactive, FLAGS from --json"
        )
    return 1 if any(j.score > 1 for j in judged) else 0


if __name__ == "__main__":
    sys.exit(main())
