"""The fixed-fleet frontier over the seeds: the lines under the table, the JSON, the verdicts.

Each always-on row (one per variant) carries the frontier it was chosen
from; here each fleet's point is averaged over the seeds, written as the
"fixed fleets" lines or as ``--json``'s ``fleets``, and every row of its
variant is judged against it (:mod:`simulator.verdict`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from simulator.frontier import FleetPoint
from simulator.runner import PolicyRun
from simulator.scorecard import Scorecard
from simulator.verdict import Point, Verdict, row_verdicts

__all__ = ["fleets_json", "frontier_lines", "verdicts_for"]


def verdicts_for(
    cards: Sequence[Scorecard], per_seed: list[list[PolicyRun]]
) -> list[Verdict | None]:
    """Each card's verdict against the frontier of its variant (cold start, routing)."""
    frontiers = [
        (
            (card.cold_start_s, card.routing),
            [Point(f"fleet {p.replicas}", p.slo_attainment, p.gpu_seconds) for p in points],
        )
        for card, points in _seed_frontiers(per_seed)
    ]
    rows = [(c.name, c.slo_attainment, c.gpu_seconds, (c.cold_start_s, c.routing)) for c in cards]
    return row_verdicts(rows, frontiers)


def frontier_lines(per_seed: list[list[PolicyRun]]) -> list[str]:
    """The frontier under the table: each fleet's attainment and GPU-hours (seed means)."""
    lines = []
    for card, points in _seed_frontiers(per_seed):
        tags = []
        if card.cold_start_s is not None:
            tags.append(f"cold start {card.cold_start_s:g}s")
        if card.routing is not None:
            tags.append(card.routing)
        label = f" ({', '.join(tags)})" if tags else ""
        cells = [
            f"{p.replicas}: {p.slo_attainment * 100:.1f}% {p.gpu_seconds / 3600:.2f}"
            + ("" if p.simulated else "~")
            for p in points
        ]
        lines.append(f"fixed fleets{label} (replicas: SLO, GPU-h): " + ", ".join(cells))
    if lines:
        lines.append(
            "~ not simulated: above the first fleet that meets every request any schedule "
            "can, or where two sizes in a row added under 0.1 %; carried from it (same "
            "requests met, GPU-h in proportion)"
        )
    return lines


def fleets_json(per_seed: list[list[PolicyRun]]) -> list[dict[str, object]]:
    """The fixed-fleet frontier of every always-on row, each point's mean over the seeds."""
    out: list[dict[str, object]] = []
    for card, points in _seed_frontiers(per_seed):
        for p in points:
            point = p.as_json()
            if card.cold_start_s is not None:
                point["cold_start_s"] = card.cold_start_s
            if card.routing is not None:
                point["routing"] = card.routing
            out.append(point)
    return out


def _seed_frontiers(per_seed: list[list[PolicyRun]]) -> list[tuple[Scorecard, list[FleetPoint]]]:
    """Per always-on row (one per variant): its card and its frontier, averaged over seeds."""
    rows = []
    for index, first in enumerate(per_seed[0]):
        if not first.fleets:
            continue
        series = [runs[index].fleets for runs in per_seed]
        points = [
            FleetPoint(
                replicas=column[0].replicas,
                slo_attainment=statistics.fmean(p.slo_attainment for p in column),
                gpu_seconds=statistics.fmean(p.gpu_seconds for p in column),
                cost=statistics.fmean(p.cost for p in column),
                simulated=all(p.simulated for p in column),
            )
            for column in zip(*series, strict=True)
        ]
        rows.append((first.scorecard, points))
    return rows
