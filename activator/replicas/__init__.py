"""What the activator knows of each replica endpoint, apart from routing.

- :mod:`activator.replicas.readiness`: per-endpoint load and readiness, and
  waiting for a ready one;
- :mod:`activator.replicas.probing`: direct probes that find a cold replica
  the moment it listens;
- :mod:`activator.replicas.denylist`: endpoint paths a client never reaches.
"""
