"""Running the battery's cells: one task per fixed-fleet frontier and per row, in parallel.

A cell's rows are ``tidal simulate`` runs of its flags, one policy each, so
that ``--jobs`` can spread them over cores; the frontier is one task per
workload (fixed fleets start warm and never scale, so the cold start does
not move them). Each task builds its workload from the flags in the
process that runs it (a seeded generator or a trace file: the same
requests in every process) and hands back only scorecards and fleet
points.

Main decision: the tasks run longest first (the frontier, then the rows of
the largest workloads), so that with several jobs the last to finish is
not a long one started late.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from simulator import cli
from simulator.battery.grid import BASELINES, Cell, Workload
from simulator.frontier import FleetPoint
from simulator.runner import run_policies
from simulator.scorecard import Scorecard

__all__ = ["TIDAL", "CellRuns", "run_cells"]

TIDAL = "tidal"


@dataclass(frozen=True, slots=True)
class CellRuns:
    """What the battery measured in one cell."""

    cell: Cell
    tidal: Scorecard
    baselines: tuple[Scorecard, ...]
    fleets: tuple[FleetPoint, ...]
    cpu_s: float  # the cell's rows and its share of the frontier's CPU


@dataclass(frozen=True, slots=True)
class _Task:
    workload: Workload
    cold_start_s: float | None  # None: the frontier
    policy: str


def _parse(flags: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tidal simulate")
    cli.configure(parser)
    return parser.parse_args(list(flags))


def _run(task: _Task, annotations: tuple[str, ...]) -> tuple[list[Scorecard | FleetPoint], float]:
    started = time.process_time()
    cold = task.cold_start_s if task.cold_start_s is not None else 60.0
    flags = [*Cell(task.workload, cold).flags(), "--policies", task.policy]
    for pair in annotations:
        flags += ["--annotation", pair]
    args = _parse(flags)
    requests = cli.load_requests(args, warn=False)
    runs = run_policies(requests, cli.options_from(args))
    out: list[Scorecard | FleetPoint] = (
        list(runs[0].fleets) if task.cold_start_s is None else [runs[0].scorecard]
    )
    return out, time.process_time() - started


def _tasks(cells: Sequence[Cell], tidal_only: bool) -> list[_Task]:
    workloads = list(dict.fromkeys(c.workload for c in cells))
    tasks = [_Task(w, None, "always-on") for w in workloads]
    for cell in cells:
        for policy in (TIDAL,) if tidal_only else (TIDAL, *BASELINES):
            tasks.append(_Task(cell.workload, cell.cold_start_s, policy))
    return tasks


def run_cells(
    cells: Sequence[Cell],
    *,
    jobs: int = 1,
    annotations: Sequence[str] = (),
    tidal_only: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[CellRuns]:
    """Every row and frontier the ``cells`` need; ``tidal_only`` leaves the baselines out.

    ``annotations``: ``KEY=VALUE`` pairs for the ``tidal`` row (as
    ``tidal simulate --annotation``), to try a knob across the battery."""
    say = progress or (lambda line: print(line, file=sys.stderr))
    tasks = _tasks(cells, tidal_only)
    results: dict[_Task, tuple[list[Scorecard | FleetPoint], float]] = {}
    extra = tuple(annotations)
    if jobs <= 1:
        for n, task in enumerate(tasks, 1):
            results[task] = _run(task, extra if task.policy == TIDAL else ())
            say(_line(n, len(tasks), task, results[task][1]))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures: dict[Future[tuple[list[Scorecard | FleetPoint], float]], _Task] = {
                pool.submit(_run, task, extra if task.policy == TIDAL else ()): task
                for task in tasks
            }
            for n, future in enumerate(as_completed(futures), 1):
                task = futures[future]
                results[task] = future.result()
                say(_line(n, len(tasks), task, results[task][1]))
    return [_gather(cell, results, tidal_only) for cell in cells]


def _line(n: int, total: int, task: _Task, cpu_s: float) -> str:
    where = "frontier" if task.cold_start_s is None else f"{task.cold_start_s:g}s {task.policy}"
    return f"[{n}/{total}] {task.workload.name} {where}: {cpu_s:.0f} s of CPU"


def _gather(
    cell: Cell,
    results: dict[_Task, tuple[list[Scorecard | FleetPoint], float]],
    tidal_only: bool,
) -> CellRuns:
    frontier, frontier_cpu = results[_Task(cell.workload, None, "always-on")]
    fleets = tuple(p for p in frontier if isinstance(p, FleetPoint))
    cards: list[Scorecard] = []
    cpu = 0.0
    for policy in (TIDAL,) if tidal_only else (TIDAL, *BASELINES):
        rows, spent = results[_Task(cell.workload, cell.cold_start_s, policy)]
        cards.extend(r for r in rows if isinstance(r, Scorecard))
        cpu += spent
    return CellRuns(cell, cards[0], tuple(cards[1:]), fleets, cpu + frontier_cpu)
