"""Which target a request is for, and where the set of targets comes from.

- :mod:`activator.routing.table`: the immutable routing table (host, path,
  model), rebuilt and swapped whole;
- :mod:`activator.routing.registry`: the live set of targets; applies a
  source's snapshots, keeps one :class:`~activator.holding.target.Target`
  per name and the table;
- :mod:`activator.routing.routes_file`: targets from a static YAML file, for
  running without Kubernetes (the Kubernetes source is
  :mod:`activator.kube`).
"""
