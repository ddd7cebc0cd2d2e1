"""What a world plugs in, and what each plug sees: the autoscaler and the balancer.

The world is the same for every policy it compares; what differs is plugged
in through two small interfaces:

- an :class:`Autoscaler` is asked, once a simulated second and at once when
  a request finds its model at zero, for the replicas it wants, seeing a
  :class:`View`: what the activator reports (the load over the last second,
  the requests held and in flight) and what the model servers publish
  (vLLM's metrics: tokens, sequences running and waiting, KV-cache usage,
  time to first token), per GPU shape too (:class:`ShapeView`);
- a :class:`Balancer` picks the replica for a request among those serving,
  seeing each as a :class:`ServingReplica` (an id, its requests in flight,
  its shape), in place of the activator's least-in-flight pick.

Main decision: **a plug sees values, never the world.** A view is a frozen
snapshot built at the tick, so a policy cannot reach into the replicas or
the queue, and what it decides on is exactly what the product would see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from simulator.traces import TraceRequest

__all__ = ["Autoscaler", "Balancer", "R", "ServingReplica", "ShapeView", "View"]


@dataclass(frozen=True, slots=True)
class ShapeView:
    """One GPU shape's replicas and servers at a control tick: its replicas
    ``(created_s, ready, pending)``, and what its vLLM servers publish (as
    :class:`View` has them for all)."""

    replicas: tuple[tuple[float, bool, bool], ...] = ()
    prefilled_tokens: int = 0
    generated_tokens: int = 0
    running: int = 0
    server_waiting: int = 0
    running_least: int = 0
    waiting_least: int = 0
    kv_cache_utilization: float = 0.0
    server_ttfts: tuple[float, ...] = ()

    @property
    def ready(self) -> int:
        return sum(1 for _, ready, _ in self.replicas if ready)


@dataclass(frozen=True, slots=True)
class View:
    """What an autoscaler sees at a control tick (one model)."""

    now: float
    ready: int  # replicas serving (not starting, not draining, not under notice)
    spec: int  # replicas asked for (the last total target)
    concurrency: float  # mean of held + in-flight requests over the last second
    busy: bool  # any request held or in flight during the last second
    held: int  # requests held by the activator now
    in_flight: int  # requests on replicas now
    arrivals: int = 0  # requests that arrived during the last second
    arrival_prompt_tokens: int = 0  # their prompt tokens
    arrival_output_tokens: int = 0  # and output tokens
    first_tokens: int = 0  # requests whose first token came during the last second
    prefilled_tokens: int = 0  # their prompt tokens (vLLM's prompt_tokens_total)
    awaiting_first_token: int = 0  # requests held or in flight with no first token yet
    # The fastest prefill of the last second's first tokens: prompt tokens over
    # the time from reaching a replica to the first token (0: none).
    best_prefill_tokens_per_s: float = 0.0
    # What the servers publish (vLLM's metrics), over the serving replicas: tokens
    # generated in the last second; sequences running, requests waiting and the
    # mean KV-cache usage now; the last second's first tokens' TTFT as the
    # servers time it (from reaching the replica).
    generated_tokens: int = 0
    running: int = 0
    server_waiting: int = 0
    # The fewest running and waiting on any one serving replica now.
    running_least: int = 0
    waiting_least: int = 0
    kv_cache_utilization: float = 0.0
    server_ttfts: tuple[float, ...] = ()
    # The last second's arrivals with prompts longer than each of the policy's
    # PROMPT_SIZE_BOUNDS.
    prompts_over: tuple[int, ...] = ()
    # With GPU shapes: each shape's replicas and servers.
    shapes: Mapping[str, ShapeView] = field(default_factory=dict)


class Autoscaler(Protocol):
    """A scaling policy driven by the world.

    ``initial`` is the replica count at time 0, already warm (an always-on
    fleet, HPA's minimum of one; in a world of shapes, of its first shape).
    ``tick`` is called every simulated second with ``activation=False`` and
    at once, with ``activation=True``, when a request finds its model at
    zero replicas; it returns the new total target, or None to keep the
    current one; in a world of shapes, replicas per shape.
    """

    @property
    def name(self) -> str: ...

    @property
    def initial(self) -> int: ...

    def tick(self, view: View, *, activation: bool) -> int | Mapping[str, int] | None: ...


class ServingReplica(Protocol):
    """What a balancer sees of a replica: a stable id, its requests in flight, and
    its GPU shape ("" in a world without shapes)."""

    @property
    def rid(self) -> int: ...

    @property
    def in_flight(self) -> int: ...

    @property
    def shape(self) -> str: ...


R = TypeVar("R", bound=ServingReplica)


class Balancer(Protocol):
    """Picks a serving replica for a request (None: hold it), in place of least in flight."""

    def pick(self, request: TraceRequest, serving: Sequence[R], limit: int) -> R | None: ...
