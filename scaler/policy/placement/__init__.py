"""Placement's pure rules: spot and on-demand capacity, and what each costs (docs/placement.md).

- :mod:`scaler.policy.placement.split`: the spot/on-demand split (SkyServe's
  SpotHedge);
- :mod:`scaler.policy.placement.availability`: which spot replicas count as
  not available (pending too long, evicted, noticed);
- :mod:`scaler.policy.placement.fallback`: the split with its one piece of
  memory, the on-demand replicas covering for spot;
- :mod:`scaler.policy.placement.plan`: one target's placement step, from a
  decision to the writes and Events it needs;
- :mod:`scaler.policy.placement.companion`: the spot companion Deployment
  and the on-demand pin, as objects and patches;
- :mod:`scaler.policy.placement.providers`: the node labels and taints of
  each way of running GPU nodes (Karpenter, GKE, AKS, EKS, custom);
- :mod:`scaler.policy.placement.cost`: GPU-seconds and dollars per capacity
  type.

The I/O side (the plan per target, its writes, its settings) is
:mod:`scaler.placement`.
"""
