"""SLO-first scaling: size a model in tokens for its time-to-first-token objective (pure).

With ``autoscaling.tidal.dev/slo-ttft`` set, a model is sized against the
capacity Tidal learns for it rather than per-replica targets
(docs/slo-scaling.md):

- :mod:`scaler.policy.slo.decide`: the decision, step by step;
- :mod:`scaler.policy.slo.load`: the load in tokens per decision interval and
  the prompt-only capacity;
- :mod:`scaler.policy.slo.phases`: a replica's capacity in both phases
  (prefill and decode), learned from its busy intervals;
- :mod:`scaler.policy.slo.sizing`: the replicas the recent load needs, and
  which phase binds;
- :mod:`scaler.policy.slo.replay`: the history replayed through ``n``
  replicas (prompts queued, decode in its slots), and
  :mod:`scaler.policy.slo.blocking`: requests stuck behind a long prompt on
  their own replica;
- :mod:`scaler.policy.slo.level`: whether the history knows the load yet, and
  whether the load has fallen;
- :mod:`scaler.policy.slo.knee`: where one more replica stops buying
  attainment worth its GPU-hours;
- :mod:`scaler.policy.slo.floor`: the fading floor that keeps a count the
  sizing no longer asks for through a break-even time;
- :mod:`scaler.policy.slo.state`: the state the policy carries between
  decisions.

Nothing is re-exported here, so that the policy state can import
:mod:`~scaler.policy.slo.state` without the decision, which imports it.
"""
