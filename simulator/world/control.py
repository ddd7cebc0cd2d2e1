"""The control loop in a world: the autoscaler asked, its answer checked and given to the fleet.

The autoscaler is pluggable (:class:`~simulator.world.plugins.Autoscaler`):
Tidal's adapter (:mod:`simulator.tidal`) calls ``scaler.policy.decide``;
the baselines (:mod:`simulator.baselines`) implement HPA, KEDA and Knative
as their docs describe. It is asked every simulated second, and at once,
with ``activation=True``, when a request finds its model at zero replicas
(the activator's ``/v1/activate``). Placement (``scaler.policy.split``)
then turns its total into spot and on-demand counts
(:meth:`~simulator.world.fleet.Fleet.reconcile`).

Main decision: **an answer the world cannot carry out is an error, not a
guess**: a negative count, or in a world of GPU shapes a shape it does not
offer, stops the run with what was asked and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping

from simulator.world.fleet import Fleet
from simulator.world.plugins import Autoscaler
from simulator.world.signals import Signals

__all__ = ["Control"]


class Control:
    """The autoscaler, what it sees, and the fleet it sizes."""

    def __init__(self, autoscaler: Autoscaler, *, fleet: Fleet, signals: Signals) -> None:
        self.autoscaler = autoscaler
        self._fleet = fleet
        self._signals = signals
        self._shape_names = tuple(s.name for s in fleet.config.shapes)

    def start(self) -> None:
        """The autoscaler's initial replicas, warm at time 0 (in a world of shapes, of
        its first shape)."""
        initial = self.autoscaler.initial
        if initial > 0:
            first = {self._shape_names[0]: initial} if self._shape_names else None
            self._fleet.aim(initial, first)
            self._fleet.reconcile(warm=True)

    def decide(self, *, activation: bool, concurrency: float) -> None:
        """Ask the autoscaler (``concurrency``: the load it is told) and size the fleet."""
        desired = self.autoscaler.tick(self._signals.view(concurrency), activation=activation)
        fleet = self._fleet
        if isinstance(desired, Mapping):
            if any(n < 0 for n in desired.values()) or set(desired) - set(self._shape_names):
                raise ValueError(
                    f"{self.autoscaler.name} asked for {dict(desired)}; the shapes are "
                    f"{', '.join(self._shape_names)}, each at 0 or more"
                )
            fleet.aim(sum(desired.values()), dict(desired))
        elif desired is not None and desired != fleet.target:
            if desired < 0:
                raise ValueError(f"{self.autoscaler.name} asked for {desired} replicas")
            fleet.aim(desired)
        fleet.reconcile()
