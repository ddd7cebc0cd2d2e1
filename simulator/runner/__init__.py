"""Run a trace through Tidal and every baseline, and score each run.

What ``tidal simulate`` and the benchmark call. The policies, all with the
same per-replica concurrency target and replica ceiling; each baseline holds
requests as its own proxy does (:data:`simulator.baselines.HOLD_TIMEOUTS_S`):

- ``always-on``: the smallest fixed fleet whose SLO attainment reaches
  99 %, or the ceiling when even that misses, and then its scorecard says
  ``reaches_target`` false; the run scores every fleet from 1 to the
  ceiling on the way (the frontier, :func:`simulator.frontier.fleet_frontier`);
  ``always-on-N`` runs the fleet of N alone;
- ``hpa``, ``keda-http``, ``knative-kpa``, ``knative-tidal-idle`` (Knative
  with Tidal's grace period and scale-down delay), ``planner`` (Dynamo's
  SLA planner, prefill and decode sized on profiles of the engine model,
  :mod:`simulator.planner`): :mod:`simulator.baselines`;
- ``reactive``: the best a purely reactive policy can do, demand measured
  perfectly and capacity one cold start late (:mod:`simulator.reactive`);
- ``oracle``: not a run but a lower bound on the GPU-seconds of any
  schedule meeting the attainment goal (:mod:`simulator.oracle`);
- ``tidal``: the scaler's defaults with the scorecard's objective as its
  ``slo-ttft`` annotation (SLO-first scaling, :mod:`scaler.policy.slo.decide`);
  only the shared ceiling besides (the shared concurrency target is not
  used with an SLO);
- ``tidal-concurrency`` (only when asked for): the scaler's
  concurrency-based defaults, no objective, so that sweeps of their
  annotations (``panic-window-percentage``, ``scale-to-zero-grace-period``)
  move the row;
- ``tidal-tuned``: the annotations in :data:`TUNED_ANNOTATIONS`, found by
  :func:`simulator.tuning.tune` on the *conversation* trace, so that an
  evaluation on the code trace is not fitted to it;
- ``tidal-adaptive``: the defaults with ``scale-to-zero-grace-period: adaptive``;
- ``tidal-pool`` and ``tidal-warm`` (only when asked for: ``--policies``):
  ``tidal``'s annotations with every model on one pool of time-sliced GPUs
  (:mod:`simulator.warm_tier`), scale-to-zero alone against the warm tier
  (``sleep-after``, :data:`WARM_ANNOTATIONS` unless the caller's
  annotations set it); the pool model decides only when a model's one pod
  starts, sleeps and goes to zero, so the objective does not size them;
- ``tidal-spot`` (only when a spot placement is given): ``tidal``'s policy
  with that placement (``scaler.policy.split`` each tick, spot
  interruptions as the world's spot model says), beside ``tidal``, which
  stays all on-demand, so that one run compares the two. The three
  variants carry exactly ``tidal``'s annotations (:func:`tidal_annotations`)
  and differ only in what their names say.

Its parts: :mod:`~simulator.runner.options` (the rows by name, the shared
knobs, the Tidal rows' annotations), :mod:`~simulator.runner.autoscalers`
(the autoscaler each name builds, its world, the fleet it starts with as
``--start`` says),
:mod:`~simulator.runner.models` (a trace split by model, the runs merged),
:mod:`~simulator.runner.fixed_rows` (the frontier and the fixed-fleet rows),
:mod:`~simulator.runner.oracle_row` (the bound as a row),
:mod:`~simulator.runner.result` (a row's run) and
:mod:`~simulator.runner.rows` (every row over a trace, side by side).
Everything a caller uses is importable from here.
"""

from __future__ import annotations

from simulator.runner.autoscalers import world_for
from simulator.runner.fixed_rows import smallest_always_on
from simulator.runner.models import by_model, merge_runs
from simulator.runner.options import (
    OPTIONAL_POLICIES,
    POLICY_NAMES,
    STARTS,
    TUNED_ANNOTATIONS,
    WARM_ANNOTATIONS,
    SimulationOptions,
    tidal_annotations,
)
from simulator.runner.result import PolicyRun
from simulator.runner.rows import run_policies, task_count

__all__ = [
    "OPTIONAL_POLICIES",
    "POLICY_NAMES",
    "STARTS",
    "TUNED_ANNOTATIONS",
    "WARM_ANNOTATIONS",
    "PolicyRun",
    "SimulationOptions",
    "by_model",
    "merge_runs",
    "run_policies",
    "smallest_always_on",
    "task_count",
    "tidal_annotations",
    "world_for",
]
