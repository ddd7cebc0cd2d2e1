"""The live set of targets: applies source snapshots, keeps one Target per name and the table.

A source (Kubernetes or the routes file) hands :meth:`Registry.apply` a whole
snapshot. The registry diffs it against what it has: a new target gets a
:class:`~activator.holding.target.Target` with a new gate (the shared clock
and wake callback, the scaler's current activator count and sleeping list);
a target whose spec changed is replaced whole by one under the new spec that
keeps the gate (its held requests and in-flight counts survive); an
unchanged one is kept as it is; a target that disappeared has its gate
closed, which fails its held requests with 404 (no target matches any
more). The routing table is rebuilt only when some target's routing keys
changed, and is swapped as one reference, as is the map of targets.

What the scaler says of the fleet (how many activators report, which
endpoints sleep) is handed on to each target, which owns its copy; the
registry keeps the last word only to give a target created later.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Mapping

from activator.clock import Clock, loop_time
from activator.holding.adapters import AdapterIO
from activator.holding.gate import DrainEnded
from activator.holding.target import Target
from activator.replicas.readiness import TargetEndpoints
from activator.routing.table import RoutingTable
from activator.targets import TargetSpec

__all__ = ["Registry"]

log = logging.getLogger(__name__)


class Registry:
    """Targets by name and the routing table (a TargetSink)."""

    def __init__(
        self,
        *,
        rng: random.Random | None = None,
        clock: Clock = loop_time,
        wake: Callable[[str], None] | None = None,
        on_update: Callable[[], None] | None = None,
        adapter_io: AdapterIO | None = None,
    ) -> None:
        self.table = RoutingTable()
        self._adapter_io = adapter_io
        self.targets: dict[str, Target] = {}
        self._rng = rng or random.Random()
        self._clock = clock
        self._wake = wake
        self._on_update = on_update
        # The scaler's last word, for targets created after it (each target owns its copy).
        self._activators = 1
        self._sleeping: dict[str, frozenset[str]] = {}
        self.updates = 0

    def apply(self, snapshot: Mapping[str, TargetSpec]) -> None:
        old = self.targets
        targets: dict[str, Target] = {}
        for name, spec in snapshot.items():
            current = old.get(name)
            if current is None:
                targets[name] = Target.new(
                    spec,
                    sleeping=self._sleeping.get(name, frozenset()),
                    activators=self._activators,
                    rng=self._rng,
                    clock=self._clock,
                    wake=self._wake,
                    adapter_io=self._adapter_io,
                )
            elif current.spec != spec:
                targets[name] = current.with_spec(spec, self._adapter_io, self._clock)
            else:
                targets[name] = current
        for name, gone in old.items():
            if name not in snapshot:
                gone.close()
        routing_changed = set(old) != set(snapshot) or any(
            old[n].spec.routing_keys() != s.routing_keys() for n, s in snapshot.items()
        )
        self.targets = targets
        if routing_changed:
            table = RoutingTable.build(snapshot.values())
            for conflict in table.conflicts:
                log.warning("routing conflict: %s", conflict)
            self.table = table
        self.updates += 1
        if self._on_update is not None:
            self._on_update()

    def endpoints(self) -> list[TargetEndpoints]:
        """Every target's endpoints (what the prober probes)."""
        return [target.gate.endpoints for target in self.targets.values()]

    def set_sleeping(self, by_target: Mapping[str, Iterable[str]]) -> None:
        """The leading scaler's list of sleeping endpoints (``ip:port``) per target."""
        self._sleeping = {k: frozenset(v) for k, v in by_target.items()}
        for name, target in self.targets.items():
            target.set_sleeping(self._sleeping.get(name, frozenset()))

    def set_activators(self, count: int) -> None:
        """How many activators the scaler counts; each target takes its share of cc."""
        if count == self._activators:
            return
        self._activators = count
        for target in self.targets.values():
            target.set_activators(count)

    def requests_in_progress(self) -> int:
        """Held and in-flight requests over all targets."""
        return sum(t.gate.buffered + t.gate.in_flight for t in self.targets.values())

    def end_drain(self) -> None:
        """The drain timeout ended: every request still held gets :class:`DrainEnded`."""
        for target in self.targets.values():
            target.close(DrainEnded)
