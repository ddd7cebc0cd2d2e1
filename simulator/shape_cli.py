"""``tidal simulate --shapes``: Tidal on each GPU shape alone, and on their mix, with their prices.

The flags (:func:`configure`) name the shapes of :data:`~simulator.gpu_shapes.LIST_PRICES`
to offer (``--shapes all`` or a comma list, the first the base: whole H100s
in the table's order) and how many replicas of each the cluster holds at
once (``--shape-supply mig-3g.40gb=8,l4=16``). :func:`run` takes the trace
and options ``tidal simulate`` read, runs the rows of :mod:`simulator.shape_rows`
and prints one line per row: the attainment, the cost at the shapes'
prices and against the first shape's row, the replica-hours of each shape,
and the requests sent to a shape too slow for them (``--json``: one JSON
line). docs/shapes.md quotes its table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from simulator.gpu_shapes import LIST_PRICES, sim_shapes
from simulator.runner import SimulationOptions
from simulator.shape_rows import MIX, ShapeRow, ratio, shape_rows
from simulator.traces import TraceRequest

__all__ = ["configure", "render", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("GPU shapes (docs/shapes.md)")
    group.add_argument(
        "--shapes",
        default=None,
        metavar="NAMES",
        help="run Tidal on each of these GPU shapes alone and on their mix, priced per "
        f"replica-hour from public list prices: all, or a comma list of {', '.join(LIST_PRICES)}"
        " (the first is the base, the shape the pod template asks for; default: none, the "
        "usual rows)",
    )
    group.add_argument(
        "--shape-supply",
        default="",
        metavar="NAME=N,...",
        help="with --shapes: the most replicas of a shape the cluster holds at once (more stay "
        "Pending until one ends; default: no bound)",
    )


def _supply(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, eq, value = item.partition("=")
        if not eq or not value.strip().isdigit():
            raise ValueError(
                f"--shape-supply: {item!r} is not NAME=N with N a whole number of replicas"
            )
        out[name.strip()] = int(value)
    return out


def render(rows: list[ShapeRow]) -> str:
    """The table: one line per row (see the module docstring)."""
    against = rows[0].scorecard.cost  # plain Tidal on whole GPUs of the first shape
    lines = [
        f"{'row':<20} {'SLO %':>6} {'cost $':>9} {'x tidal':>9} {'too slow':>9}  replica-hours"
    ]
    for row in rows:
        card = row.scorecard
        hours = (
            ", ".join(f"{name or 'whole'} {h:.2f}" for name, h in row.replica_hours.items()) or "-"
        )
        lines.append(
            f"{card.name:<20} {100 * card.slo_attainment:>6.2f} {card.cost:>9.2f} "
            f"{ratio(card.cost, against):>9.3f} {row.too_slow:>9}  {hours}"
        )
    return "\n".join(lines)


def run(
    args: argparse.Namespace, requests: Sequence[TraceRequest], options: SimulationOptions
) -> int:
    """The rows for ``args``, over the trace and options ``tidal simulate`` read from them
    (see the module docstring); the exit status."""
    started = time.process_time()
    try:
        names = None if args.shapes == "all" else [n.strip() for n in args.shapes.split(",")]
        shapes = sim_shapes(
            names=names, engine=options.world.engine, supply=_supply(args.shape_supply)
        )
        rows = shape_rows(requests, options, shapes)
    except ValueError as error:
        print(f"tidal simulate: {error}", file=sys.stderr)
        return 2
    if args.json:
        document = {
            "shapes": {c.shape.name: c.shape.prices.on_demand for c in shapes.chosen},
            "rows": [r.as_json() for r in rows],
            "mix_over_tidal": ratio(rows[-1].scorecard.cost, rows[0].scorecard.cost),
            "cpu_s": round(time.process_time() - started, 2),
        }
        print(json.dumps(document))
        return 0
    print(
        f"{len(requests)} requests, objective {options.slo_ttft_s:g}s TTFT, cold start "
        f"{options.cold_start.median_s:g}s, {options.start} start; prices $/replica-hour: "
        + ", ".join(f"{n} {p:.2f}" for n, p in shapes.prices.items())
    )
    print(render(rows))
    assert rows[-1].scorecard.name == MIX
    print(f"simulated in {time.process_time() - started:.1f} s of CPU")
    return 0
