"""``--json``'s document: one row per policy, the fixed fleets, the start, the seeds.

Each row is its scorecard, its frontier verdict, the CPU it took (mean per
seed; the always-on row carries the frontier's) and, over several seeds,
its spread; TTFT by class when the trace has classes. The command adds the
run's CPU last.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from typing import Any

from simulator.classes import ttft_by_class
from simulator.cli.fleets import fleets_json
from simulator.runner import PolicyRun
from simulator.scorecard import Scorecard

__all__ = ["json_document"]


def json_document(
    args: argparse.Namespace,
    rows: Sequence[tuple[Scorecard, dict[str, tuple[float, float]]]],
    verdicts: Sequence[Any],
    per_seed: list[list[PolicyRun]],
    results: Sequence[Any],
    seeds: Sequence[int],
) -> dict[str, object]:
    """``--json``'s document: a row per policy (its frontier verdict, its CPU, its
    spread over seeds), the fixed fleets, and TTFT by class when asked."""
    policies = []
    for index, ((card, spread), verdict) in enumerate(zip(rows, verdicts, strict=True)):
        row = card.as_json()
        if verdict is not None:
            row["frontier"] = verdict.as_json()
        # What the row cost, per seed (the always-on row carries the frontier's).
        row["cpu_s"] = round(statistics.fmean(s[index].cpu_s for s in per_seed), 3)
        if len(seeds) > 1:
            row["spread"] = {k: [round(lo, 4), round(hi, 4)] for k, (lo, hi) in spread.items()}
        policies.append(row)
    document: dict[str, object] = {
        "policies": policies,
        "fleets": fleets_json(per_seed),
        "start": args.start,
        "seeds": list(seeds),
    }
    if args.class_field is not None:
        document["ttft_by_class"] = {
            r.name: {k: v.as_json() for k, v in ttft_by_class(r).items()} for r in results
        }
    return document
