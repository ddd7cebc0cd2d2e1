"""GPU shapes' pure rules: what a model may run on, and a shape's pod template (docs/shapes.md).

- :mod:`scaler.policy.shapes.declarations`: the cluster's ``tidal-shapes``
  table (per shape a resource and count, a node selector, prices per hour,
  a capacity prior against the reference GPU) and a Deployment's
  ``placement.tidal.dev/shapes`` with its per-shape arguments, environment
  and prices, each problem named as for every other key;
- :mod:`scaler.policy.shapes.template`: a shape's pod template built from
  the user's (device, node selector, arguments, environment, label), and
  which listed shape the user's template already is.

The capacity prior comes from :mod:`groundwork.gpu_catalog`, the one
module outside the policy that it may import.
"""
