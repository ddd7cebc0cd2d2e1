"""Holding requests until a replica can take them, and waking the model.

- :mod:`activator.holding.gate`: one Gate per target, a bounded FIFO of
  waiting requests and a per-replica concurrency limit;
- :mod:`activator.holding.prefix_balancing`: a Gate's prefix-aware choice
  among its live replicas;
- :mod:`activator.holding.held_bodies`: the cap on body bytes kept while
  requests wait.

Waking the model is the scaler link's (:mod:`activator.scaler_link`): a gate
only calls the ``wake`` callback it was given.
"""
