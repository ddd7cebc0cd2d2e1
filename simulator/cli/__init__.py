"""``tidal simulate``: replay a trace through Tidal and the baselines, print the scorecard.

Reads a trace (a file, ``code`` or ``conv`` for the Azure 2023 traces
shipped with the package, or ``synthetic:KIND``), runs every policy of
:mod:`simulator.runner` over it in simulated time, and prints a table, or
with ``--json`` one line of JSON (the last line on stdout)::

    {"policies": [{"name": ..., "slo_attainment": ..., "gpu_seconds": ...,
                   "cost": ..., "cold_starts": ..., "failed": ..., ...}, ...]}

``--seeds N`` runs seeds ``--seed`` to ``--seed + N - 1`` (the world's
randomness, thinning, synthetic workloads) and reports each column's mean,
with its spread (min and max over the seeds) under ``"spread"`` in JSON and
in a second table. A trace whose span or rate suggests the wrong time unit
draws a warning on stderr naming the flag to set.

``--charts DIR`` writes PNG charts (matplotlib, from the ``loadtest`` extra,
imported only then). Durations are Go-style (``60s``, ``2m``), as in the
annotations.

The command's parts, each with the rule it keeps: its flags
(:mod:`~simulator.cli.flags`, over :mod:`~simulator.cli.flag_types`,
:mod:`~simulator.cli.workload_flags` and :mod:`~simulator.cli.world_flags`),
the requests they describe (:mod:`~simulator.cli.workload`), the run's
options (:mod:`~simulator.cli.options`), the rows per variant
(:mod:`~simulator.cli.variants`), the output (the table,
:mod:`~simulator.cli.scorecard_table`; the frontier and the verdicts,
:mod:`~simulator.cli.fleets`; the mean and spread over seeds,
:mod:`~simulator.cli.seeds`; the JSON, :mod:`~simulator.cli.document`) and
the command's order (:mod:`~simulator.cli.command`). ``tidal`` loads this
package for ``configure`` and ``run``; the other names are here for the
scripts, benchmarks and tests that drive the simulator as the command does.
"""

from __future__ import annotations

from simulator.cli.command import run
from simulator.cli.flags import configure
from simulator.cli.options import options_from
from simulator.cli.scorecard_table import table
from simulator.cli.variants import variant_policies
from simulator.cli.workload import load_requests, scale_load

__all__ = [
    "configure",
    "load_requests",
    "options_from",
    "run",
    "scale_load",
    "table",
    "variant_policies",
]
