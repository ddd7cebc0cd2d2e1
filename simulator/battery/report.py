"""The battery's verdicts, its table (worst cell last) and its JSON.

Each cell's ``tidal`` row is judged against the fixed fleets and the
baselines (:func:`simulator.verdict.judge`) and against the cell's own
limits (:func:`simulator.battery.grid.limits`). One number orders the
cells, the **score**: the largest of

- for each fleet or baseline reaching ``tidal``'s attainment, ``tidal``'s
  GPU-hours over its, times 0.95 (above 1: it matches ``tidal`` for 0.95x
  or less);
- for each costing no more, its attainment over ``tidal``'s in half-points
  (above 1: half a point more for no more GPU-hours);
- where the load swings, ``tidal``'s GPU-hours over the smallest fleet
  reaching its attainment, over 0.75;
- on chat, those GPU-hours over 1.15x the smallest fleet reaching 99 %, and
  the attainment short of 99 % in half-points plus one.

A cell passes at 1 or less; the worst cell is printed last.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from simulator.battery.grid import WORKLOADS, Cell, cells, limits
from simulator.battery.runs import CellRuns
from simulator.frontier import FleetPoint
from simulator.scorecard import Scorecard
from simulator.verdict import ATTAINMENT_MARGIN, GPU_MARGIN, Point, Verdict, judge

__all__ = ["Judged", "from_json", "judge_cell", "table", "to_json", "write_block"]


@dataclass(frozen=True, slots=True)
class Judged:
    runs: CellRuns
    verdict: Verdict
    score: float
    why: str  # the verdict in words: "ok", or what the score's largest term says

    @property
    def cell(self) -> Cell:
        return self.runs.cell


def _point(card: Scorecard) -> Point:
    return Point(card.name, card.slo_attainment, card.gpu_seconds)


def _fleet(p: FleetPoint) -> Point:
    return Point(f"fleet {p.replicas}", p.slo_attainment, p.gpu_seconds)


def _pressure(other: Point, row: Point) -> float:
    """How close ``other`` comes to dominating ``row`` (above 1: it does)."""
    terms = [0.0]
    if other.attainment >= row.attainment - 1e-12 and other.gpu_seconds > 0:
        terms.append(GPU_MARGIN * row.gpu_seconds / other.gpu_seconds)
    if other.gpu_seconds <= row.gpu_seconds * (1 + 1e-9):
        terms.append((other.attainment - row.attainment) / ATTAINMENT_MARGIN)
    return max(terms)


def judge_cell(runs: CellRuns) -> Judged:
    """The cell's verdict, score and reason (module docstring)."""
    row = _point(runs.tidal)
    fleets = [_fleet(p) for p in runs.fleets]
    others = [_point(c) for c in runs.baselines]
    verdict = judge(row, fleets, others)
    terms: list[tuple[float, str]] = [(0.0, "ok")]
    for other in (*fleets, *others):
        pressure = _pressure(other, row)
        terms.append(
            (
                pressure,
                f"{other.name} {other.attainment * 100:.1f}% at {other.gpu_seconds / 3600:.2f}",
            )
        )
    cell_limits = limits(runs.cell)
    if cell_limits.swing_ratio is not None and verdict.gpu_ratio is not None:
        terms.append(
            (
                verdict.gpu_ratio / cell_limits.swing_ratio,
                f"swing: {verdict.gpu_ratio:.2f}x the fleet, over {cell_limits.swing_ratio:g}x",
            )
        )
    if cell_limits.chat_goal is not None and cell_limits.chat_ratio is not None:
        goal = cell_limits.chat_goal
        reaching = [f for f in fleets if f.attainment >= goal]
        smallest = min(reaching, key=lambda f: f.gpu_seconds, default=None)
        if smallest is not None:
            ratio = row.gpu_seconds / smallest.gpu_seconds
            terms.append(
                (
                    ratio / cell_limits.chat_ratio,
                    f"chat: {ratio:.2f}x {smallest.name}, over {cell_limits.chat_ratio:g}x",
                )
            )
        short = goal - row.attainment
        if short > 0:
            terms.append((1 + short / ATTAINMENT_MARGIN, f"chat: under {goal * 100:g}%"))
    score, why = max(terms, key=lambda t: t[0])
    return Judged(runs, verdict, score, why if score > 1 else "ok")


def _attained(p: Point | None) -> str:
    if p is None:
        return "-"
    return f"{p.name.removeprefix('fleet ')}: {p.attainment * 100:.1f}% {p.gpu_seconds / 3600:.2f}"


def table(judged: Sequence[Judged]) -> str:
    """One line per cell, the worst (highest score) last."""
    ordered = sorted(judged, key=lambda j: j.score)
    header = (
        f"{'cell':<20} {'tidal':>6} {'GPU-h':>6}  {'fleet at its SLO':>17} {'x':>5}  "
        f"{'fleet at its GPU-h':>18} {'pt':>5}  {'best baseline':>24}  {'score':>5}  verdict"
    )
    lines = [header, "-" * len(header)]
    for j in ordered:
        t, v = j.runs.tidal, j.verdict
        ratio = "-" if v.gpu_ratio is None else f"{v.gpu_ratio:.2f}"
        gap = "-" if v.attainment_gap is None else f"{-v.attainment_gap * 100:+.1f}"
        row = _point(t)
        best = max(j.runs.baselines, key=lambda c: _pressure(_point(c), row), default=None)
        base = (
            "-"
            if best is None
            else f"{best.name} {best.slo_attainment * 100:.1f}% {best.gpu_seconds / 3600:.2f}"
        )
        lines.append(
            f"{j.cell.name:<20} {t.slo_attainment * 100:>5.1f}% {t.gpu_seconds / 3600:>6.2f}  "
            f"{_attained(v.fleet_at_attainment):>17} {ratio:>5}  {_attained(v.fleet_at_gpu):>18} "
            f"{gap:>5}  {base:>24}  {j.score:>5.2f}  {j.why}"
        )
    failing = sum(1 for j in judged if j.score > 1)
    lines.append(
        f"{len(judged)} cells, {failing} failing; score: the largest of the dominance, swing "
        "and chat terms (1 or less passes; see python -m simulator.battery --help)"
    )
    return "\n".join(lines)


def to_json(judged: Sequence[Judged]) -> list[dict[str, object]]:
    """Every cell, the worst last, with its rows, frontier and verdict."""
    out: list[dict[str, object]] = []
    for j in sorted(judged, key=lambda j: j.score):
        out.append(
            {
                "cell": j.cell.name,
                "workload": j.cell.workload.name,
                "cold_start_s": j.cell.cold_start_s,
                "flags": list(j.cell.flags()),
                "tidal": j.runs.tidal.as_json(),
                "baselines": [c.as_json() for c in j.runs.baselines],
                "fleets": [p.as_json() for p in j.runs.fleets],
                "frontier": j.verdict.as_json(),
                "score": round(j.score, 4),
                "verdict": j.why,
                "cpu_s": round(j.runs.cpu_s, 1),
            }
        )
    return out


def from_json(documents: Sequence[str]) -> list[CellRuns]:
    """The cells of saved runs (``--save``), a later document's cell replacing an
    earlier one's (a ``--tidal-only`` run replaces only the ``tidal`` row, the
    baselines kept from the earlier run), in the grid's order."""
    found: dict[str, CellRuns] = {}
    workloads = {w.name: w for w in WORKLOADS}
    for text in documents:
        for cell in json.loads(text)["cells"]:
            workload = workloads.get(cell["workload"])
            if workload is None:
                raise ValueError(f"a saved cell names no workload of the grid: {cell['workload']}")
            baselines = tuple(_card(b) for b in cell["baselines"])
            earlier = found.get(cell["cell"])
            if not baselines and earlier is not None:
                baselines = earlier.baselines
            found[cell["cell"]] = CellRuns(
                Cell(workload, float(cell["cold_start_s"])),
                _card(cell["tidal"]),
                baselines,
                tuple(FleetPoint(**p) for p in cell["fleets"]),
                float(cell.get("cpu_s", 0.0)),
            )
    order = {c.name: i for i, c in enumerate(cells())}
    return sorted(found.values(), key=lambda r: order.get(r.cell.name, len(order)))


def _card(data: dict[str, Any]) -> Scorecard:
    known = {f.name for f in fields(Scorecard)}
    return Scorecard(**{k: v for k, v in data.items() if k in known})


_BEGIN = "<!-- BEGIN generated:battery by `make frontier` -->"
_END = "<!-- END generated:battery -->"


def write_block(page: Path, text: str, *, commands: Sequence[str] = ("make frontier",)) -> None:
    """``page`` with the text between its battery markers replaced by ``text``, under
    the commands that ran its cells (a saved run's, when it was rendered again)."""
    content = page.read_text()
    start, end = content.find(_BEGIN), content.find(_END)
    if start < 0 or end < start:
        raise ValueError(f"{page}: no {_BEGIN} ... {_END} block to write the table in")
    shown = "\n".join(f"$ {c}" for c in dict.fromkeys(commands))
    block = f"{_BEGIN}\n```\n{shown}\n{text}\n```\n"
    page.write_text(content[:start] + block + content[end:])
