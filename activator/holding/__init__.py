"""Holding requests until a replica can take them: one owner per target, its gate.

- :mod:`activator.holding.target`: one owner per target: its spec, its gate,
  its sleeping endpoints and its activator count, replaced whole when the
  spec changes;
- :mod:`activator.holding.gate`: a target's Gate, a bounded queue of
  waiting requests (released by class, then across tenants) and a
  per-replica concurrency limit;
- :mod:`activator.holding.request_class`: a held request's class, tenant
  and cost, from its headers;
- :mod:`activator.holding.prefix_balancing`: a Gate's prefix-aware choice
  among its live replicas;
- :mod:`activator.holding.held_bodies`: the cap on body bytes kept while
  requests wait.

Waking the model is the scaler link's (:mod:`activator.scaler_link`): a gate
only calls the ``wake`` callback it was given.
"""
