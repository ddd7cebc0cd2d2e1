"""The live set of targets and the routing table; the one way in to a target besides a request.

A source (Kubernetes or the routes file) hands :meth:`Registry.apply` a whole
snapshot: each target's spec and endpoints
(:class:`~activator.targets.Discovered`). The registry diffs it against what
it has: a new target gets a :class:`~activator.holding.target.Target`; a
known one is told of a new spec (:meth:`Target.configure`, when it changed)
and of its endpoints (:meth:`Target.set_endpoints`), and stays the same
object, with what it holds and has in flight; a target that disappeared is
closed, which fails its held requests with 404 (no target matches any
more). The routing table is rebuilt only when some target's routing keys
changed, and is swapped as one reference, as is the map of targets.

The work that runs beside the requests reaches a target through the
registry's verbs, by the target's name, and never holds one: the scaler
link (:meth:`set_activators`, :meth:`set_sleeping`, :meth:`take_periods`,
:meth:`refuse`, :meth:`wait_ready`), the prober (:meth:`probed`) and the
adapter keeper (:meth:`refresh_adapters`). So a target's state is written
from two modules besides its own: this one and the request path
(:mod:`activator.forwarding`).

What the scaler says of the fleet (how many activators report, which
endpoints sleep) is kept once, in the registry's
:class:`~activator.holding.scaler_word.ScalerWord`, which every target
reads; a target whose part of it changed is told to look again.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Iterator, Mapping

from activator.clock import Clock, loop_time
from activator.holding.adapters import AdapterIO
from activator.holding.gate import DrainEnded
from activator.holding.hold_errors import HoldError
from activator.holding.scaler_word import ScalerWord
from activator.holding.target import Period, Target
from activator.replicas.readiness import EndpointTracker
from activator.routing.table import RoutingTable
from activator.targets import Discovered

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
        self.targets: dict[str, Target] = {}
        self.word = ScalerWord()
        self._adapter_io = adapter_io
        self._rng = rng or random.Random()
        self._clock = clock
        self._wake = wake
        self._on_update = on_update
        self.updates = 0

    # -- the sources ------------------------------------------------------------------

    def apply(self, snapshot: Mapping[str, Discovered]) -> None:
        old = self.targets
        targets: dict[str, Target] = {}
        routing_changed = set(old) != set(snapshot)
        for name, found in snapshot.items():
            target = old.get(name)
            if target is None:
                target = Target(
                    found.spec,
                    word=self.word,
                    rng=self._rng,
                    clock=self._clock,
                    wake=self._wake,
                    adapter_io=self._adapter_io,
                )
            elif target.spec != found.spec:
                routing_changed |= target.spec.routing_keys() != found.spec.routing_keys()
                target.configure(found.spec)
            target.set_endpoints(found.endpoints)
            targets[name] = target
        for name, gone in old.items():
            if name not in snapshot:
                gone.close()
        self.targets = targets
        if routing_changed:
            table = RoutingTable.build(t.spec for t in targets.values())
            for conflict in table.conflicts:
                log.warning("routing conflict: %s", conflict)
            self.table = table
        self.updates += 1
        if self._on_update is not None:
            self._on_update()

    # -- the scaler link ----------------------------------------------------------------

    def set_sleeping(self, by_target: Mapping[str, Iterable[str]]) -> None:
        """The leading scaler's list of sleeping endpoints (``ip:port``) per target."""
        for name in self.word.hear_sleeping(by_target):
            target = self.targets.get(name)
            if target is not None:
                target.configure()

    def set_activators(self, count: int) -> None:
        """How many activators the scaler counts; each target takes its share of cc."""
        if self.word.hear_activators(count):
            for target in self.targets.values():
                target.configure()

    def take_periods(self) -> dict[str, Period]:
        """Every target's period since the last call (idle ones too), for the report."""
        return {name: target.take_period() for name, target in self.targets.items()}

    def refuse(self, name: str, exc: HoldError) -> int:
        """Tidal will not wake ``name``: its held requests get ``exc``; how many."""
        target = self.targets.get(name)
        return target.refuse(exc) if target is not None else 0

    def waking(self, name: str) -> bool:
        """``name`` is known, open, and has no ready replica: an activation is due."""
        target = self.targets.get(name)
        return target is not None and not target.closed and not target.ready

    async def wait_ready(self, name: str, timeout_s: float) -> bool:
        """Whether ``name`` has a ready replica, waiting up to ``timeout_s`` for one."""
        target = self.targets.get(name)
        return await target.wait_ready(timeout_s) if target is not None else False

    # -- the prober and the adapter keeper ---------------------------------------------

    def to_probe(self) -> Iterator[tuple[str, EndpointTracker]]:
        """Every endpoint of every target, with its target's name (what the prober looks at)."""
        for name, target in list(self.targets.items()):
            for tracker in list(target.endpoints.trackers.values()):
                yield name, tracker

    def probed(self, name: str, key: str, ok: bool) -> None:
        """A direct probe of ``name``'s endpoint ``key`` connected (``ok``) or not."""
        target = self.targets.get(name)
        if target is not None:
            target.probed(key, ok)

    async def refresh_adapters(self) -> list[tuple[str, str, str]]:
        """Each target with adapters learns its replicas' and unloads the idle; the
        (target, replica, adapter) triples unloaded."""
        unloaded = []
        for name, target in list(self.targets.items()):
            unloaded += [(name, r, a) for r, a in await target.refresh_adapters()]
        return unloaded

    # -- the activator ------------------------------------------------------------------

    def requests_in_progress(self) -> int:
        """Held and in-flight requests over all targets."""
        return sum(t.gate.buffered + t.gate.in_flight for t in self.targets.values())

    def end_drain(self) -> None:
        """The drain timeout ended: every request still held gets :class:`DrainEnded`."""
        for target in self.targets.values():
            target.close(DrainEnded)
