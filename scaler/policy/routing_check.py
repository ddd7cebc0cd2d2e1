"""The scaler's check of a Deployment's ``routing.tidal.dev/*`` annotations.

Routing belongs to the activator, which reads these annotations, uses the
default for a bad value (one typo must not take a model off the data path)
and ignores a key it does not know. Left there, a typo shows only in an
activator's log. The scaler, which watches the same Deployments and already
raises Events on them, checks them too, so that each problem becomes an
``InvalidRouting`` Warning Event and a line in ``tidal status``.

Main decisions:

- **A warning, not a refusal.** Unlike an ``autoscaling.tidal.dev/``
  problem, a routing problem does not stop scaling: the activator routes
  with the defaults meanwhile, so the model is served.
- **The activator's own reading.** Both services read the keys with
  :func:`groundwork.rules.routing_keys.read_routing`, so a value is bad for
  both or for neither; unknown keys are named with the closest known key
  and a pointer to the reference page (the list of every key would not fit
  an Event's 1,024 bytes).
"""

from __future__ import annotations

from collections.abc import Mapping

from groundwork.rules.annotation_keys import Problem
from groundwork.rules.routing_keys import ROUTING_PREFIX, read_routing

__all__ = ["routing_problems"]


def routing_problems(annotations: Mapping[str, str]) -> tuple[Problem, ...]:
    """Every bad ``routing.tidal.dev/*`` annotation (unknown key or value out of range)."""
    if not any(key.startswith(ROUTING_PREFIX) for key in annotations):
        return ()  # the common case, and nothing to read
    return read_routing(annotations).problems
