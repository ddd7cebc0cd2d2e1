"""The battery's grid: the workloads, the cold starts, and what each cell is held to.

Each workload is a ``tidal simulate`` command line (its workload flags), so
any cell can be run again, with every column of the scorecard, by the
command the battery prints under its table. The grid:

- the Azure 2023 code and conversation traces at load factors 0.5, 1, 2, 4
  and 8 (one hour each; ``--load-factor`` sends each request that many
  times within its second, so bursts stay bursts);
- ``synthetic:chat`` at 5,500 requests a minute (the ten minutes after the
  first five, while conversations accumulate), ``bursts`` (BurstGPT's Gamma
  arrivals at the code trace's rate) and ``long-context`` (Mooncake's
  prompts, a heavy tail);
- ``synthetic:diurnal``: a production day at the Azure 2024 code service's
  rate (its default), peak ten times the trough, its 24 hours drawn over 4
  real ones (the trough to the peak in two hours: a swing over hours, as a
  day's, not over minutes; a whole day's rows cost more CPU than the battery
  can spend per cell);
- ``synthetic:long-prompt`` (:mod:`simulator.production_shapes`) at 180,
  480 and 1,200 requests a minute, the rates at which the fixed-fleet
  frontier turns flat at about 3, 8 and 20 replicas;
- ``synthetic:reasoning`` over two real hours, the rate swinging fivefold
  and back, at mean rates whose peaks need about 5 and 20 replicas;

each at cold starts of 60, 20 and 5 s. Fixed fleets start warm and never
change, so the cold start does not move them: the frontier is run once per
workload.

What a cell is held to (:func:`limits`): every cell, not dominated (no
fixed fleet or other row reaches ``tidal``'s attainment with 0.95x its
GPU-hours, nor half a point more with no more); where the load swings
(``reasoning``, ``diurnal``, the code trace at 5 s), at most 0.75x the
GPU-hours of the smallest fleet reaching ``tidal``'s attainment; chat at
99 % or more for at most 1.15x the smallest fleet reaching 99 %.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BASELINES",
    "COLD_STARTS_S",
    "MAX_REPLICAS",
    "WORKLOADS",
    "Cell",
    "Limits",
    "Workload",
    "cells",
    "limits",
]

#: The cold starts every workload runs at.
COLD_STARTS_S = (60.0, 20.0, 5.0)
#: The ceiling of every row and of the frontier.
MAX_REPLICAS = 30
#: The rows ``tidal`` is compared with besides the fixed fleets.
BASELINES = ("hpa", "keda-http", "knative-kpa", "planner", "reactive")


@dataclass(frozen=True, slots=True)
class Workload:
    """One workload of the grid: a name and the ``tidal simulate`` flags that make it."""

    name: str
    flags: tuple[str, ...]
    swings: bool = False  # the load swings: tidal must save against fixed fleets
    chat: bool = False  # held to 99 % at most 1.15x the smallest 99 % fleet


def _trace(name: str, factor: float) -> Workload:
    flags = ("--trace", name) if factor == 1 else ("--trace", name, "--load-factor", f"{factor:g}")
    return Workload(f"{name}@{factor:g}x", flags)


def _synthetic(name: str, kind: str, *flags: str, swings: bool = False) -> Workload:
    return Workload(name, ("--trace", f"synthetic:{kind}", *flags), swings=swings)


WORKLOADS: tuple[Workload, ...] = (
    *(_trace("code", f) for f in (0.5, 1, 2, 4, 8)),
    *(_trace("conv", f) for f in (0.5, 1, 2, 4, 8)),
    Workload(
        "chat",
        (
            "--trace",
            "synthetic:chat",
            "--synthetic-rate",
            "5500",
            "--synthetic-duration",
            "15m",
            "--skip",
            "5m",
        ),
        chat=True,
    ),
    _synthetic("bursts", "bursts"),
    _synthetic("long-context", "long-context"),
    _synthetic("diurnal", "diurnal", "--day-length", "4h", swings=True),
    *(
        _synthetic(
            f"long-prompt@{n}",
            "long-prompt",
            "--synthetic-rate",
            rate,
            "--synthetic-duration",
            "30m",
        )
        for n, rate in ((3, "180"), (8, "480"), (20, "1200"))
    ),
    *(
        _synthetic(
            f"reasoning@{n}",
            "reasoning",
            "--synthetic-rate",
            rate,
            "--synthetic-duration",
            "2h",
            swings=True,
        )
        for n, rate in ((5, "1000"), (20, "4000"))
    ),
)


@dataclass(frozen=True, slots=True)
class Cell:
    workload: Workload
    cold_start_s: float

    @property
    def name(self) -> str:
        return f"{self.workload.name} {self.cold_start_s:g}s"

    def flags(self) -> tuple[str, ...]:
        """The ``tidal simulate`` flags of this cell (less ``--policies``)."""
        return (
            *self.workload.flags,
            "--cold-start",
            f"{self.cold_start_s:g}s",
            "--max-replicas",
            str(MAX_REPLICAS),
        )


@dataclass(frozen=True, slots=True)
class Limits:
    """What a cell's ``tidal`` row is held to besides not being dominated."""

    swing_ratio: float | None = None  # at most this x the smallest fleet reaching its SLO
    chat_goal: float | None = None  # at least this attainment ...
    chat_ratio: float | None = None  # ... for at most this x the smallest fleet reaching it


def limits(cell: Cell) -> Limits:
    """The cell's targets (see the module docstring)."""
    workload = cell.workload
    if workload.chat:
        return Limits(chat_goal=0.99, chat_ratio=1.15)
    if workload.swings or (workload.name == "code@1x" and cell.cold_start_s <= 5):
        return Limits(swing_ratio=0.75)
    return Limits()


def cells(workloads: Sequence[str] = (), cold_starts_s: Sequence[float] = ()) -> tuple[Cell, ...]:
    """The cells of the named workloads (all without) at the given cold starts (all without).

    A name matches a workload exactly or as the part before its ``@``
    (``code`` is every load factor of the code trace)."""
    known = {w.name for w in WORKLOADS} | {w.name.split("@")[0] for w in WORKLOADS}
    unknown = [n for n in workloads if n not in known]
    if unknown:
        raise ValueError(
            f"unknown workloads {unknown}; choose from {sorted(known)} (a name before '@' "
            "selects every variant)"
        )
    chosen = [
        w
        for w in WORKLOADS
        if not workloads or w.name in workloads or w.name.split("@")[0] in workloads
    ]
    colds = tuple(cold_starts_s) or COLD_STARTS_S
    return tuple(Cell(w, c) for w in chosen for c in colds)
