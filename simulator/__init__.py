"""The policy simulator (``tidal simulate``): Tidal and the baselines on a trace, in simulated time.

- :mod:`~simulator.traces`: reading traces (CSV, JSONL; ``loadtests`` shares it);
  :mod:`~simulator.trace_stream`: a trace read afresh for each row, as a
  stream; :mod:`~simulator.synthetic`: workloads from published statistics;
- :mod:`~simulator.world`: the discrete-event world of one model (requests,
  the activator's hold and balancing, replicas running the engine model,
  cold starts, placement, spot);
- :mod:`~simulator.tidal`: Tidal's own policy path (signal hub, PurePolicy);
  :mod:`~simulator.baselines`: always-on, HPA, KEDA + HTTP add-on, Knative
  KPA; :mod:`~simulator.planner`: Dynamo's SLA planner (its profiles:
  :mod:`~simulator.profile`);
- the yardsticks: :mod:`~simulator.frontier` (every fixed fleet to the
  ceiling), :mod:`~simulator.reactive` (demand known, capacity a cold start
  late; also the warm start's size) and :mod:`~simulator.oracle` (the lower
  bound every policy is measured against);
- :mod:`~simulator.scorecard`, :mod:`~simulator.runner`, :mod:`~simulator.cli`,
  :mod:`~simulator.charts`, :mod:`~simulator.tuning`: scoring, running every
  policy, the command, its charts, and the tuning of ``tidal-tuned``;
- :mod:`~simulator.harness`: the small one-target stepper the policy's
  scenario tests use; :mod:`~simulator.engine`: the engine models (shared
  with the sandbox's fake servers; ``engine.jump`` steps them from one
  batch change to the next);
- speed: :mod:`~simulator.fleet_cache` (fixed fleets run once per trace and
  world), :mod:`~simulator.parallel` (``--jobs``), :mod:`~simulator.progress`
  (the progress bar), :mod:`~simulator.columns` (a run's per-request
  columns, packed).
"""
