"""The live set of targets: applies source snapshots, owns gates and the routing table.

A source (Kubernetes or the routes file) hands :meth:`Registry.apply` a whole
snapshot. The registry diffs it against what it has: a new target gets a
:class:`~activator.holding.gate.Gate` (with its endpoints, the shared clock and
wake queue, and the current activator count); a known one keeps them (its held requests
and in-flight counts survive) and takes the new limits and endpoint list; a
target that disappeared has its gate closed, which fails its held requests
with 404 (no target matches any more). The routing table is rebuilt only
when some target's routing keys changed, and is swapped as one reference.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Mapping

from activator.clock import Clock, loop_time
from activator.holding.gate import DrainEnded, Gate
from activator.replicas.readiness import TargetEndpoints
from activator.routing.table import RoutingTable
from activator.targets import TargetSpec

__all__ = ["Registry"]

log = logging.getLogger(__name__)


class Registry:
    """Targets by name, their gates, and the routing table (a TargetSink)."""

    def __init__(
        self,
        *,
        rng: random.Random | None = None,
        clock: Clock = loop_time,
        wake: Callable[[str], None] | None = None,
        on_update: Callable[[], None] | None = None,
    ) -> None:
        self.table = RoutingTable()
        self.specs: dict[str, TargetSpec] = {}
        self.gates: dict[str, Gate] = {}
        self._rng = rng or random.Random()
        self._clock = clock
        self._wake = wake
        self._on_update = on_update
        self._activators = 1
        self._sleeping: dict[str, frozenset[str]] = {}
        self.updates = 0

    def apply(self, targets: Mapping[str, TargetSpec]) -> None:
        old_specs = self.specs
        gates = dict(self.gates)
        for name, spec in targets.items():
            gate = gates.get(name)
            if gate is None:
                gate = Gate(
                    name,
                    max_buffered=spec.max_buffered,
                    container_concurrency=spec.container_concurrency,
                    cold_start_timeout_s=spec.cold_start_timeout_s,
                    activators=self._activators,
                    rng=self._rng,
                    clock=self._clock,
                    wake=self._wake,
                )
                gates[name] = gate
            else:
                gate.configure(
                    max_buffered=spec.max_buffered,
                    container_concurrency=spec.container_concurrency,
                    cold_start_timeout_s=spec.cold_start_timeout_s,
                )
            gate.set_balancing(spec.balancing)
            gate.counts_tokens = spec.counts_tokens
            gate.endpoints.set_sleeping(self._sleeping.get(name, frozenset()))
            gate.endpoints.update(spec.endpoints)
        for name in list(gates):
            if name not in targets:
                gates.pop(name).close()
        routing_changed = set(old_specs) != set(targets) or any(
            old_specs[n].routing_keys() != s.routing_keys() for n, s in targets.items()
        )
        self.specs = dict(targets)
        self.gates = gates
        if routing_changed:
            table = RoutingTable.build(targets.values())
            for conflict in table.conflicts:
                log.warning("routing conflict: %s", conflict)
            self.table = table
        self.updates += 1
        if self._on_update is not None:
            self._on_update()

    def endpoints(self) -> list[TargetEndpoints]:
        """Every target's endpoints (what the prober probes)."""
        return [gate.endpoints for gate in self.gates.values()]

    def set_sleeping(self, by_target: Mapping[str, Iterable[str]]) -> None:
        """The leading scaler's list of sleeping endpoints (``ip:port``) per target."""
        self._sleeping = {k: frozenset(v) for k, v in by_target.items()}
        for name, gate in self.gates.items():
            gate.endpoints.set_sleeping(self._sleeping.get(name, frozenset()))

    def set_activators(self, count: int) -> None:
        """How many activators the scaler counts; each gate takes its share of cc."""
        if count == self._activators:
            return
        self._activators = count
        for gate in self.gates.values():
            gate.set_activators(count)

    def end_drain(self) -> None:
        """The drain timeout ended: every request still held gets :class:`DrainEnded`."""
        for gate in self.gates.values():
            gate.close(DrainEnded)
