"""Which ready replica takes a request: the balancers, pure.

- :mod:`activator.balancing.least_loaded`: least in flight, the default;
- :mod:`activator.balancing.prefix_affinity`: prefix-aware routing, a
  consistent-hash ring with bounded loads plus a memory of where each
  prompt's blocks went;
- :mod:`activator.balancing.prefix_key`: a request body's prompt as chained
  block hashes.

The simulator runs these modules in simulated time, so the whole package is
held pure by an import contract: no clock, no event loop, no I/O, no other
activator module. The glue that feeds them live replicas is in
:mod:`activator.holding`.
"""
