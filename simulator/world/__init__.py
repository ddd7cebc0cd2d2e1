"""One model's world in simulated time: requests, the activator, replicas, an autoscaler.

:func:`run_world` replays a trace against an autoscaler and returns a
:class:`RunResult` for the scorecard. A discrete-event simulation: nothing
sleeps, and a one-hour trace runs in seconds. What runs inside is the
product's own code, not a copy (the activator's balancing and hold queue,
the scaler's placement split, Tidal's policy through its adapter); each
part of the world has one owner:

- :mod:`~simulator.world.config`: what a world is given (:class:`WorldConfig`:
  the engine, cold starts, placement, spot, the activator's limits, GPU shapes);
- :mod:`~simulator.world.plugins`: what it plugs in and what each sees
  (:class:`Autoscaler` and its :class:`View`, :class:`Balancer`);
- :mod:`~simulator.world.agenda`: simulated time, its events in order;
- :mod:`~simulator.world.requests`: each request's row, and the open ones;
- :mod:`~simulator.world.hold`: the activator: a request sent to a replica
  or held until one has room;
- :mod:`~simulator.world.fleet`: the replicas and their engines, sized by
  placement; :mod:`~simulator.world.spot_market`: spot capacity by zone;
- :mod:`~simulator.world.signals`: each second's counts and the view the
  autoscaler sees; :mod:`~simulator.world.control`: the autoscaler asked
  and its answer applied;
- :mod:`~simulator.world.loop`: the event loop, and the engines stepped;
- :mod:`~simulator.world.result`: what a run leaves.

Main decision: the world is the same for every policy; only the plugs
differ, so a difference on the scorecard comes from the policy. Each part's
own decision is in its module's docstring.
"""

from simulator.world.config import (
    ON_DEMAND,
    SPOT,
    STEPPERS,
    ColdStart,
    SpotModel,
    WorldConfig,
    WorldShape,
)
from simulator.world.loop import run_world
from simulator.world.plugins import Autoscaler, Balancer, R, ServingReplica, ShapeView, View
from simulator.world.result import ReplicaLife, RunResult, Second

__all__ = [
    "ON_DEMAND",
    "SPOT",
    "STEPPERS",
    "Autoscaler",
    "Balancer",
    "ColdStart",
    "R",
    "ReplicaLife",
    "RunResult",
    "Second",
    "ServingReplica",
    "ShapeView",
    "SpotModel",
    "View",
    "WorldConfig",
    "WorldShape",
    "run_world",
]
