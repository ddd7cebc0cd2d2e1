"""One row's run: :class:`PolicyRun`, its scorecard with the run behind it.

The oracle's row has no run (it is a bound, not a schedule); an ``always-on``
row carries the fixed-fleet frontier it was chosen from; every row says the
CPU it took, so that ``--json`` can say what each row cost to simulate.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.frontier import FleetPoint
from simulator.scorecard import Scorecard
from simulator.world import RunResult

__all__ = ["PolicyRun"]


@dataclass(frozen=True, slots=True)
class PolicyRun:
    scorecard: Scorecard
    result: RunResult | None  # None: the oracle, a bound rather than a run
    # always-on: every fleet from 1 to the ceiling (the frontier); else empty.
    fleets: tuple[FleetPoint, ...] = ()
    # CPU seconds the row took (the first fixed-fleet row carries the frontier's).
    cpu_s: float = 0.0
