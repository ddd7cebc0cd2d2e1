"""Spot and on-demand placement beside the loop (docs/placement.md).

``placer.py`` plans each target's split and keeps its fallback state,
``actuation.py`` carries out the placement writes for the actuator (the
``<name>-spot`` companion, the on-demand pin, the spot scale, the Events),
``settings.py`` is the ``placement`` section of the scaler's settings. The
pure parts (the split, the plan, the providers, availability, prices, the
companion's shape) stay in :mod:`scaler.policy`, whose purity contract
keeps them free of I/O; the node and companion watch is
:mod:`scaler.kube.placement_watch`, the one place besides ``scaler.kube``'s
other modules allowed the Kubernetes client.
"""
