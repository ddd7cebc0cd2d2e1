"""The policy simulator (``tidal simulate``): Tidal and the baselines on a trace, in simulated time.

- :mod:`~scaler.sim.traces`: reading traces (CSV, JSONL; ``loadtests`` shares it);
  :mod:`~scaler.sim.synthetic`: workloads from published statistics;
- :mod:`~scaler.sim.world`: the discrete-event world of one model (requests,
  the activator's hold and balancing, replicas running the engine model,
  cold starts, placement, spot);
- :mod:`~scaler.sim.tidal`: Tidal's own policy path (signal hub, PurePolicy);
  :mod:`~scaler.sim.baselines`: always-on, HPA, KEDA + HTTP add-on, Knative
  KPA; :mod:`~scaler.sim.planner`: Dynamo's SLA planner (its profiles:
  :mod:`~scaler.sim.profile`);
- the yardsticks: :mod:`~scaler.sim.frontier` (every fixed fleet to the
  ceiling), :mod:`~scaler.sim.reactive` (demand known, capacity a cold start
  late; also the warm start's size) and :mod:`~scaler.sim.oracle` (the lower
  bound every policy is measured against);
- :mod:`~scaler.sim.scorecard`, :mod:`~scaler.sim.runner`, :mod:`~scaler.sim.cli`,
  :mod:`~scaler.sim.charts`, :mod:`~scaler.sim.tuning`: scoring, running every
  policy, the command, its charts, and the tuning of ``tidal-tuned``;
- :mod:`~scaler.sim.harness`: the small one-target stepper the policy's
  scenario tests use; :mod:`~scaler.sim.engine`: the engine models (shared
  with the sandbox's fake servers).
"""
