"""Where a row stands against the fixed-fleet frontier and the other rows: pure.

A policy's row is judged the way a platform team would judge it: could a
fixed fleet, or another autoscaler, have done as well for less, or better
for as much? Against the frontier (every fixed fleet, :mod:`simulator.frontier`)
:func:`judge` gives

- **GPU-hours over the frontier at equal attainment**: the row's GPU-hours
  over those of the smallest fixed fleet whose attainment reaches the
  row's (``None`` where no fleet reaches it: the row is above the frontier);
- **attainment under the frontier at equal GPU-hours**: the best
  attainment of a fixed fleet costing no more than the row, less the row's
  (negative: the row does better than any fleet it could afford).

and whether the row is **dominated**: another point (a fixed fleet or
another row) reaches its attainment with at most ``gpu_margin`` (0.95) of
its GPU-hours, or ``attainment_margin`` (half a point) more attainment
with no more GPU-hours. The margins keep noise from deciding: a run's
attainment moves by tenths of a point from seed to seed, and its GPU-hours
by a few per cent.

Main decision: fleets are compared as the discrete points they are, never
interpolated: a fleet of 2.5 replicas cannot be bought, and a line between
two fleets would judge a row against a point no one can run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ATTAINMENT_MARGIN", "GPU_MARGIN", "Point", "Verdict", "judge"]

#: Another point dominates a row that it matches with this share of its GPU-hours.
GPU_MARGIN = 0.95
#: ... or that it beats by this much attainment (a share) for no more GPU-hours.
ATTAINMENT_MARGIN = 0.005


@dataclass(frozen=True, slots=True)
class Point:
    """A row or a fixed fleet: its name, attainment (a share) and GPU-seconds."""

    name: str
    attainment: float
    gpu_seconds: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """A row against the frontier and the others (see the module docstring)."""

    fleet_at_attainment: Point | None  # the smallest fleet reaching the row's attainment
    gpu_ratio: float | None  # the row's GPU-seconds over that fleet's (None: none reaches it)
    fleet_at_gpu: Point | None  # the best fleet costing no more than the row
    attainment_gap: float | None  # that fleet's attainment less the row's (None: none is cheaper)
    dominated_by: tuple[Point, ...]

    @property
    def dominated(self) -> bool:
        return bool(self.dominated_by)

    def summary(self) -> str:
        """One short phrase for a table cell: ``1.43x fleet 2, -1.1 pt`` and a mark."""
        ratio = "above" if self.gpu_ratio is None else f"{self.gpu_ratio:.2f}x"
        gap = "-" if self.attainment_gap is None else f"{-self.attainment_gap * 100:+.1f}pt"
        mark = "dominated" if self.dominated else "ok"
        return f"{ratio} {gap} {mark}"

    def as_json(self) -> dict[str, object]:
        def point(p: Point | None) -> dict[str, object] | None:
            if p is None:
                return None
            return {
                "name": p.name,
                "slo_attainment": round(p.attainment, 4),
                "gpu_seconds": round(p.gpu_seconds, 1),
            }

        return {
            "gpu_ratio": None if self.gpu_ratio is None else round(self.gpu_ratio, 4),
            "fleet_at_attainment": point(self.fleet_at_attainment),
            "attainment_gap": (
                None if self.attainment_gap is None else round(self.attainment_gap, 4)
            ),
            "fleet_at_gpu": point(self.fleet_at_gpu),
            "dominated_by": [point(p) for p in self.dominated_by],
        }


def _dominates(other: Point, row: Point) -> bool:
    cheaper = other.gpu_seconds <= GPU_MARGIN * row.gpu_seconds
    if other.attainment >= row.attainment - 1e-12 and cheaper:
        return True
    better = other.attainment >= row.attainment + ATTAINMENT_MARGIN - 1e-12
    return better and other.gpu_seconds <= row.gpu_seconds * (1 + 1e-9)


def judge(row: Point, fleets: Sequence[Point], others: Sequence[Point] = ()) -> Verdict:
    """``row`` against the fixed ``fleets`` and the ``others`` rows (module docstring)."""
    reaching = [f for f in fleets if f.attainment >= row.attainment - 1e-12]
    at_attainment = min(reaching, key=lambda f: f.gpu_seconds, default=None)
    affordable = [f for f in fleets if f.gpu_seconds <= row.gpu_seconds * (1 + 1e-9)]
    at_gpu = max(affordable, key=lambda f: (f.attainment, -f.gpu_seconds), default=None)
    dominated_by = tuple(p for p in (*fleets, *others) if p.name != row.name and _dominates(p, row))
    return Verdict(
        fleet_at_attainment=at_attainment,
        gpu_ratio=(
            None
            if at_attainment is None or at_attainment.gpu_seconds <= 0
            else row.gpu_seconds / at_attainment.gpu_seconds
        ),
        fleet_at_gpu=at_gpu,
        attainment_gap=None if at_gpu is None else at_gpu.attainment - row.attainment,
        dominated_by=dominated_by,
    )


def row_verdicts(
    rows: Sequence[tuple[str, float, float, object]],
    frontiers: Sequence[tuple[object, Sequence[Point]]],
) -> list[Verdict | None]:
    """A verdict for each autoscaler row of a scorecard, against the frontier of its variant.

    ``rows``: ``(name, attainment, gpu_seconds, variant)``; ``frontiers``:
    ``(variant, fleets)``, the variant being whatever tells one run's rows
    from another's (a cold start, a routing). Fixed fleets (``always-on``)
    and the oracle (a bound, not a run) get ``None``, as does every row of a
    variant with no frontier. Each row is also judged against the other
    autoscaler rows of its variant."""
    fleets_of = {variant: list(points) for variant, points in frontiers}
    judged = [
        (name, Point(name, attainment, gpu), variant)
        for name, attainment, gpu, variant in rows
        if not name.startswith("always-on") and name != "oracle"
    ]
    out: list[Verdict | None] = []
    for name, _, _, variant in rows:
        fleets = fleets_of.get(variant)
        mine = next((p for n, p, v in judged if n == name and v == variant), None)
        if fleets is None or mine is None:
            out.append(None)
            continue
        others = [p for n, p, v in judged if v == variant and n != name]
        out.append(judge(mine, fleets, others))
    return out
