"""Several seeds as one row: each column's mean, and its spread (min..max) as a second table.

Names and routings are joined when they differ across seeds (a fixed fleet
may differ in size); failure reasons are averaged per reason; a column
``None`` for any seed stays ``None``; ``reaches_target`` holds only if it
held for every seed.
"""

from __future__ import annotations

import statistics
from dataclasses import fields
from typing import Any

from simulator.scorecard import Scorecard

__all__ = ["mean_card", "spread_table"]


def mean_card(cards: list[Scorecard]) -> tuple[Scorecard, dict[str, tuple[float, float]]]:
    """One policy over several seeds: each numeric column's mean, and its (min, max)."""
    values: dict[str, Any] = {}
    spread: dict[str, tuple[float, float]] = {}
    for f in fields(Scorecard):
        column = [getattr(c, f.name) for c in cards]
        if f.name in ("name", "routing") and column[0] is not None:
            names = list(dict.fromkeys(column))
            values[f.name] = names[0] if len(names) == 1 else "/".join(names)
        elif f.name == "failed_by_reason":
            reasons = sorted({k for c in column for k in c})
            values[f.name] = {k: statistics.fmean(c.get(k, 0) for c in column) for k in reasons}
        elif f.name == "reaches_target":
            values[f.name] = None if column[0] is None else all(column)
        elif any(v is None for v in column):
            values[f.name] = None
        else:
            values[f.name] = statistics.fmean(column)
            spread[f.name] = (min(column), max(column))
    return Scorecard(**values), spread


def spread_table(rows: list[tuple[Scorecard, dict[str, tuple[float, float]]]]) -> str:
    def span(spread: dict[str, tuple[float, float]], key: str, scale: float, digits: int) -> str:
        lo, hi = spread.get(key, (0.0, 0.0))
        return f"{lo * scale:.{digits}f}..{hi * scale:.{digits}f}"

    names = [c.name if c.routing is None else f"{c.name} {c.routing}" for c, _ in rows]
    width = max([18, *(len(n) for n in names)])
    header = (
        f"{'policy':<{width}} {'SLO %':>13} {'GPU-h':>13} {'cost':>15} {'cold':>9} {'failed':>11}"
    )
    lines = [header, "-" * len(header)]
    for name, (_, spread) in zip(names, rows, strict=True):
        lines.append(
            f"{name:<{width}} {span(spread, 'slo_attainment', 100, 1):>13} "
            f"{span(spread, 'gpu_seconds', 1 / 3600, 2):>13} {span(spread, 'cost', 1, 2):>15} "
            f"{span(spread, 'cold_starts', 1, 0):>9} {span(spread, 'failed', 1, 0):>11}"
        )
    return "\n".join(lines)
