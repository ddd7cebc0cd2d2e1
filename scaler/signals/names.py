"""The names of the demand sources, defined once.

Every :class:`~scaler.signals.base.DemandSource` answers to one of these: a
pulled source's arrival is announced to the hub by name, and the name is
what logs, metrics and ``tidal status`` say. How a source's readings are
combined follows from the signals it measures, not from its name.
"""

from __future__ import annotations

__all__ = ["ACTIVATOR", "PROMETHEUS", "SCRAPE", "SOURCE_NAMES"]

#: Activator reports, pushed to ``POST /v1/stats`` every period.
ACTIVATOR = "activator"
#: The server view: each ready pod's ``/metrics``, pulled by the scaler.
SCRAPE = "scrape"
#: DCGM GPU utilization by pod, from a Prometheus server, pulled by the scaler.
PROMETHEUS = "prometheus"

SOURCE_NAMES = (ACTIVATOR, SCRAPE, PROMETHEUS)
