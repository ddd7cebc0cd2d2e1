"""Holding requests until a replica can take them: one owner per target, and its parts.

- :mod:`activator.holding.target`: the Target, one owner per target (its
  spec, endpoints, gate, balancing, token tally, adapter slots), and the
  verbs the request path and the registry call;
- :mod:`activator.holding.gate`: a target's Gate, its held requests in
  release order (by class, then across tenants) and its counts, with the
  per-replica limit; :mod:`activator.holding.hold_errors`, what a hold can
  end in; :mod:`activator.holding.shed_counts`, sheds by class and cause;
  :mod:`activator.holding.wake_clock`, how long a wake is expected to take;
- :mod:`activator.holding.scaler_word`: the scaler's word on the fleet (the
  activator count, sleeping endpoints), kept once and read by every target;
- :mod:`activator.holding.adapters` and
  :mod:`activator.holding.adapter_keeper`: a target's LoRA adapters on its
  replicas, and the task that keeps them learned and unloads the idle;
- :mod:`activator.holding.request_class`: a held request's class, tenant
  and cost, from its headers;
- :mod:`activator.holding.prefix_balancing`: a target's prefix-aware choice
  among its ready replicas; :mod:`activator.holding.token_tally`, the
  period's estimated tokens;
- :mod:`activator.holding.held_bodies`: the cap on body bytes kept while
  requests wait.

Waking the model is the scaler link's (:mod:`activator.scaler_link`): a gate
only calls the ``wake`` callback it was given.
"""
