"""What the activators are told of a model's GPU shapes: each endpoint's shape, weight and reach.

The activator balances a model on several shapes by each replica's capacity
and sends a prompt only some shapes prefill within the objective to one of
those (docs/shapes.md, "Routing across shapes"). It knows endpoints
(``ip:port``, from the EndpointSlices) but not pods' labels, nor what the
scaler learned. So the leading scaler's answer to every stats report (and
to an activation) carries, beside the warm tier's ``sleeping``, a
``shapes`` object: per model with shapes, per endpoint::

    "shapes": {
      "default/llama": {
        "10.0.0.7:8000": {"shape": "h100", "weight": 1.0, "reach": 24000},
        "10.0.0.9:8000": {"shape": "mig-3g.40gb", "weight": 0.41, "reach": 6100}
      }
    }

- ``weight``: how much one replica of the shape takes against the others,
  its learned rate in the phase that binds the model (the largest 1;
  without an objective, the shape's prior ratio from the catalog);
- ``reach``: the longest prompt, in the activator's estimated tokens, the
  shape prefills within the objective and short of its ``--max-model-len``
  (absent: any; a model without an objective has none).

The answer's schema, :class:`~groundwork.rules.stats_report.ShapeRoute`
included, is :mod:`groundwork.rules.stats_report`'s, read by the activator
from the same module.

Main decision: the whole list is sent each time, for every model with
shapes, and none when no model has shapes (so the answer is as it always
was without them): a leader's answer without ``shapes`` says no model has
any. A model that drops its shapes or a pod that goes away leaves the
activators' word with the next answer. Followers send none, as for
``sleeping``: their learning is warm, but only the leader's word is taken.
"""

from __future__ import annotations

from collections.abc import Mapping

from groundwork.rules.stats_report import ShapeRoute
from scaler.policy.shapes.decide import ShapesOutcome

__all__ = ["shape_routes"]


def shape_routes(outcome: ShapesOutcome, endpoints: Mapping[str, str]) -> dict[str, ShapeRoute]:
    """The ``shapes`` entry of one model: ``endpoints`` (``ip:port`` -> its pod's shape)
    with the weight and reach of each endpoint's shape; an endpoint of a shape the
    decision does not know (one no longer listed) is left out."""
    out: dict[str, ShapeRoute] = {}
    for key, shape in sorted(endpoints.items()):
        weight = outcome.weights.get(shape)
        if weight is None:
            continue
        reach = outcome.limits.get(shape)
        out[key] = ShapeRoute(shape, round(weight, 4), None if reach is None else round(reach))
    return out
