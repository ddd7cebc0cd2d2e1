"""Discovery watches for the activator: opted-in Deployments and EndpointSlices.

- :mod:`activator.kube.source`: the watches, handing whole snapshots to the
  registry;
- :mod:`activator.kube.translate`: Deployments and EndpointSlices into
  targets;
- :mod:`activator.kube.notice_taints`: node taints that announce a spot
  interruption (their endpoints drain).
"""
