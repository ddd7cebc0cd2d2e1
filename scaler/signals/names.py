"""The names of the demand sources, defined once (DESIGN §4).

Every :class:`~scaler.signals.base.DemandSource` answers to one of these, and
:mod:`scaler.signals.combine` and :mod:`scaler.signals.hub` key on them: which
view a reading is (activator or server) and which signals an arrival from it
feeds. A source of any other name (a test's fake) is treated as feeding every
signal.
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
