"""The battery: ``tidal`` against the fixed-fleet frontier and the baselines, cell by cell.

A change to the scaling policy is judged here, on every workload of the
grid at every cold start, never on one scenario: ``make frontier`` (``python
-m simulator.battery``) runs them all and prints one verdict per cell, the
worst last. The parts:

- :mod:`~simulator.battery.grid`: the workloads, the cold starts and what
  each cell is held to;
- :mod:`~simulator.battery.runs`: the runs, one task per row and per
  frontier, in parallel with ``--jobs``;
- :mod:`~simulator.battery.report`: the verdicts (:mod:`simulator.verdict`),
  the table and the JSON;
- :mod:`~simulator.battery.__main__`: the command.
"""
