"""Every flag of ``tidal simulate``, in the order ``--help`` lists their groups.

:func:`configure` adds the groups one after another: the workload and the
trace's fields (:mod:`~simulator.cli.workload_flags`), the world, the warm
tier, spot and prices (:mod:`~simulator.cli.world_flags`, the LoRA adapters'
group last among them), the output, the GPU shapes
(:mod:`simulator.shape_cli`) and how the run uses the machine
(:func:`speed_flags`). Defaults are the ones the simulated parts take
themselves, so a flag left out changes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from simulator import shape_cli
from simulator.cli.workload_flags import workload_flags
from simulator.cli.world_flags import spot_flags, warm_flags, world_flags
from simulator.fleet_cache import CACHE_DIR_ENV
from simulator.world import STEPPERS

__all__ = ["configure", "speed_flags"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Replay a request trace in simulated time through Tidal's own policy and the "
        "baselines (always-on, Kubernetes HPA, KEDA + HTTP add-on, Knative KPA, NVIDIA "
        "Dynamo's SLA planner) and the oracle (a lower bound on the GPU-hours any schedule "
        "needs for its SLO), and print the scorecard: SLO "
        "attainment, goodput, cold starts, failures, GPU-seconds and cost. Durations are "
        "Go-style (90s, 5m, 1h)."
    )
    workload_flags(parser)
    world_flags(parser)
    warm_flags(parser)
    spot_flags(parser)
    _output_flags(parser)
    shape_cli.configure(parser)
    speed_flags(parser)


def _output_flags(parser: argparse.ArgumentParser) -> None:
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON line, last on stdout")
    out.add_argument(
        "--charts", type=Path, default=None, metavar="DIR", help="write PNG charts to this folder"
    )
    out.add_argument(
        "--chart-policy",
        default=None,
        metavar="POLICY",
        help="policy for the replicas-vs-load chart (default tidal; needs --charts)",
    )


def speed_flags(parser: argparse.ArgumentParser) -> None:
    """How the run uses the machine: processes, the fixed-fleet cache, the progress bar."""
    speed = parser.add_argument_group("speed")
    speed.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="run the rows side by side in N processes (default 1); the answers are the same",
    )
    speed.add_argument(
        "--stepper",
        choices=STEPPERS,
        default="jump",
        help="how replicas' engines are simulated: jump from one batch change to the next, or "
        "step, every engine step (the reference the jumps are checked against; slower, same "
        "scorecard; default jump)",
    )
    speed.add_argument(
        "--fleet-cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep fixed fleets' runs in this folder and reuse them across rows and runs "
        f"(default ${CACHE_DIR_ENV}, else ~/.cache/tidal/fleets; {CACHE_DIR_ENV}=off: none)",
    )
    speed.add_argument(
        "--no-fleet-cache",
        action="store_true",
        help="run every fixed fleet, reusing nothing from earlier runs",
    )
    speed.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr for runs over a few seconds (default: when stderr is "
        "a terminal)",
    )
