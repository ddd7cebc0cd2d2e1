"""One target's live state with one owner: its spec, its gate, its sleeping endpoints, its share.

A :class:`Target` is what the registry keeps per target and what the proxy
serves a request through. It owns four things that change for different
reasons, and is the only writer of each:

- its **spec** (:class:`~activator.targets.TargetSpec`), from the source's
  latest snapshot. A new spec makes a new ``Target``, replaced whole in the
  registry (:meth:`Target.with_spec`); a request already on its way keeps
  the one it started with, so it reads one spec from start to end;
- its **gate** (:class:`~activator.holding.gate.Gate`): held requests,
  in-flight counts and endpoint trackers. It passes to the replacement, so
  what is held and in flight survives a re-list; the gate gets only what
  its hot path reads (the buffer bound and the per-replica limit), never a
  copy of the spec;
- its **sleeping endpoints**, the leading scaler's last word for it (the
  warm tier's); never ready, so a request for a model whose replicas all
  sleep is held and its activation wakes one;
- its **activator count**, the scaler's count of reporting activators: this
  activator enforces ``max(1, cc // activators)`` of ``container-concurrency``
  per replica, so several activators together stay within the bound as long
  as there are no more of them than ``cc`` (Knative's revision throttler
  shares its breaker's capacity the same way);
- its **LoRA adapters** on its replicas
  (:class:`~activator.holding.adapters.AdapterSlots`), only when its spec
  declares some: None otherwise, so a target without adapters pays nothing.
  Like the gate it passes to the replacement, reconfigured.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from activator.clock import Clock, loop_time
from activator.holding.adapters import AdapterIO, AdapterSlots
from activator.holding.gate import Gate
from activator.targets import TargetSpec

__all__ = ["Target", "replica_limit"]


def replica_limit(container_concurrency: int, activators: int) -> int:
    """This activator's share of a replica's ``container-concurrency`` (0: no bound)."""
    if container_concurrency == 0:
        return 0
    return max(1, container_concurrency // max(1, activators))


class Target:
    """A target's spec, gate, sleeping endpoints and activator count (module docstring)."""

    __slots__ = ("activators", "adapters", "gate", "name", "sleeping", "spec")

    def __init__(
        self,
        spec: TargetSpec,
        gate: Gate,
        *,
        sleeping: frozenset[str] = frozenset(),
        activators: int = 1,
        adapters: AdapterSlots | None = None,
    ) -> None:
        self.name = spec.name
        self.adapters = adapters
        self.spec = spec
        self.gate = gate
        self.sleeping = sleeping
        self.activators = max(1, activators)
        gate.configure(
            max_buffered=spec.max_buffered,
            limit=replica_limit(spec.container_concurrency, self.activators),
        )
        gate.set_balancing(spec.balancing, self.activators)
        gate.tokens.on = spec.counts_tokens
        gate.endpoints.set_sleeping(sleeping)
        gate.endpoints.update(spec.endpoints, sleeping)

    @classmethod
    def new(
        cls,
        spec: TargetSpec,
        *,
        sleeping: frozenset[str] = frozenset(),
        activators: int = 1,
        rng: random.Random | None = None,
        clock: Clock = loop_time,
        wake: Callable[[str], None] | None = None,
        adapter_io: AdapterIO | None = None,
    ) -> Target:
        """A target seen for the first time, with a new gate (and adapter slots, when it
        declares adapters and the activator can reach replicas: ``adapter_io``)."""
        gate = Gate(spec.name, max_buffered=spec.max_buffered, rng=rng, clock=clock, wake=wake)
        slots = None
        if spec.adapters and adapter_io is not None:
            slots = AdapterSlots(spec.adapters, spec.adapter_keep_alive_s, adapter_io, clock=clock)
        return cls(spec, gate, sleeping=sleeping, activators=activators, adapters=slots)

    def with_spec(
        self, spec: TargetSpec, adapter_io: AdapterIO | None = None, clock: Clock = loop_time
    ) -> Target:
        """This target under a new spec: a new owner, the same gate and adapter slots."""
        slots = self.adapters
        if not spec.adapters:
            slots = None
        elif slots is not None:
            slots.configure(spec.adapters, spec.adapter_keep_alive_s)
        elif adapter_io is not None:
            slots = AdapterSlots(spec.adapters, spec.adapter_keep_alive_s, adapter_io, clock=clock)
        return Target(
            spec, self.gate, sleeping=self.sleeping, activators=self.activators, adapters=slots
        )

    def set_sleeping(self, keys: frozenset[str]) -> None:
        """The endpoints (``ip:port``) the warm tier has asleep; the others are awake."""
        if keys != self.sleeping:
            self.sleeping = keys
            self.gate.endpoints.set_sleeping(keys)

    def set_activators(self, count: int) -> None:
        """The scaler's count of reporting activators; this one takes its share of cc."""
        count = max(1, count)
        if count != self.activators:
            self.activators = count
            self.gate.configure(
                max_buffered=self.spec.max_buffered,
                limit=replica_limit(self.spec.container_concurrency, count),
            )
            self.gate.set_balancing(self.spec.balancing, count)
