"""Holding requests until a replica can take them, and waking the model.

- :mod:`activator.holding.gate`: one Gate per target, a bounded FIFO of
  waiting requests and a per-replica concurrency limit;
- :mod:`activator.holding.prefix_balancing`: a Gate's prefix-aware choice
  among its live replicas;
- :mod:`activator.holding.held_bodies`: the cap on body bytes kept while
  requests wait;
- :mod:`activator.holding.wake_queue`: targets to wake, for the reporter;
- :mod:`activator.holding.wake_refusal`: the scaler's refusal to wake a
  target, and the answer its held requests get.
"""
