"""Tune Tidal's annotations on one trace, to be scored on another.

``python -m simulator.tuning --trace conv`` runs Tidal over a small grid of
knobs (stable window, scale-down delay, panic window) on the given trace and
prints each point and the winner as annotations. The winner is the point
with the fewest GPU-seconds among those whose SLO attainment is at least
Tidal's defaults' on the same trace: cheaper at no loss of latency. Ties go
to the point that changes the fewest defaults: a knob the tuning trace
cannot tell apart keeps its default.

The panic window is in the grid because with minutes-long cold starts it
is the knob that decides how much a short burst costs: Knative's 10 % of
the stable window (6 s) was chosen for pods that start in seconds, and a
scale-up it triggers arrives a whole cold start later. The scale-to-zero
grace period is not: the conversation trace never idles, so every value
ties (an earlier grid had it; it never changed the winner).
:data:`simulator.runner.TUNED_ANNOTATIONS` holds the result on the
conversation trace, so that the scorecard on the code trace shows settings
that were not fitted to it.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from simulator import traces
from simulator.runner import SimulationOptions, run_policies
from simulator.scorecard import Scorecard
from simulator.world import ColdStart

__all__ = ["DEFAULTS", "GRID", "TuningPoint", "best", "tune"]

_A = "autoscaling.tidal.dev/"

#: docs/annotations.md defaults of the knobs in the grid.
DEFAULTS: Mapping[str, str] = {
    _A + "window": "60s",
    _A + "scale-down-delay": "60s",
    _A + "panic-window-percentage": "10",
}

GRID: Mapping[str, Sequence[str]] = {
    _A + "window": ("30s", "60s", "120s"),
    _A + "scale-down-delay": ("0s", "60s", "120s"),
    _A + "panic-window-percentage": ("10", "50", "100"),
}


@dataclass(frozen=True, slots=True)
class TuningPoint:
    annotations: dict[str, str]
    scorecard: Scorecard


def tune(
    requests: Sequence[traces.TraceRequest],
    options: SimulationOptions,
    grid: Mapping[str, Sequence[str]] = GRID,
) -> tuple[Scorecard, list[TuningPoint]]:
    """Tidal's defaults, then every grid point, scored on ``requests``."""
    base = replace(options, policies=("tidal",), spot_placement=None)
    default = run_policies(requests, base)[0].scorecard
    points: list[TuningPoint] = []
    keys = list(grid)
    for values in itertools.product(*(grid[k] for k in keys)):
        annotations = dict(zip(keys, values, strict=True))
        run = run_policies(requests, replace(base, tidal_annotations=annotations))[0]
        points.append(TuningPoint(annotations, run.scorecard))
    return default, points


def best(default: Scorecard, points: Sequence[TuningPoint]) -> TuningPoint | None:
    """The cheapest point that keeps at least the defaults' SLO attainment."""
    fit = [p for p in points if p.scorecard.slo_attainment >= default.slo_attainment - 1e-9]

    def changed(point: TuningPoint) -> int:
        return sum(1 for k, v in point.annotations.items() if DEFAULTS.get(k) != v)

    return min(fit, key=lambda p: (round(p.scorecard.gpu_seconds), changed(p)), default=None)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator.tuning", description=__doc__)
    parser.add_argument("--trace", default="conv")
    parser.add_argument("--cold-start-s", type=float, default=60.0)
    args = parser.parse_args(argv)
    requests = traces.read_trace(traces.find_trace(args.trace))
    options = SimulationOptions(
        world=replace(SimulationOptions().world, cold_start=ColdStart(args.cold_start_s))
    )
    default, points = tune(requests, options)
    print(
        f"defaults: SLO {default.slo_attainment:.4f} GPU-s {default.gpu_seconds:.0f} "
        f"cold starts {default.cold_starts}"
    )
    for p in points:
        c = p.scorecard
        knobs = " ".join(f"{k.removeprefix(_A)}={v}" for k, v in p.annotations.items())
        print(
            f"{knobs:<70} SLO {c.slo_attainment:.4f} GPU-s {c.gpu_seconds:.0f} cold {c.cold_starts}"
        )
    winner = best(default, points)
    if winner is None:
        print("no grid point keeps the defaults' SLO attainment")
        return 1
    kept = {k: v for k, v in winner.annotations.items() if DEFAULTS.get(k) != v}
    print("tuned (changes from the defaults):", kept)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
