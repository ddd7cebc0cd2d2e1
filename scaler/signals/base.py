"""The one interface every demand source offers, and the typed reading it hands over.

The scaler's sources (docs/architecture.md, "The signal sources") are the
activators' reports (pushed to us) and the model servers' scrapes and
Prometheus queries (pulled by us on their own schedule). Whatever their
transport, each says which signals it measures (:attr:`DemandSource.feeds`),
and the signal hub asks each the same question: "what do you know about
target ``ns/name`` at ``now``?" and gets a :class:`SourceReading` back, or
``None`` when the source has no say for that target (no activator reports
at all, engine ``generic``, no Prometheus URL). ``None`` means "not
expected", which differs from a reading that is stale: a stale reading may
still raise the scale but it can never lower it, because no data is not
zero load.

A reading is typed, with units in the field names, in three parts, each
combined over the sources by its own rule (:mod:`scaler.signals.combine`)
and never by which source sent it:

- **signals**: the values of the policy's signals the source measures now
  (concurrency, queue depth, the utilizations);
- **levels** (:class:`Levels`): what the servers are doing right now, for
  SLO-first scaling (sequences running, requests waiting, KV cache use);
  a source that sees the same thing as another says the same field, and
  the largest view wins;
- **brought** (:class:`Brought`): the counts new at the source's latest
  arrival (requests, tokens, first tokens by TTFT bound, refused adapter
  loads). A source hands the same :class:`Brought` value until its next
  arrival, and the hub adds each value to the target's counters once,
  however often it reads it, so no count is added twice.

``observed`` holds the raw values for people (``/v1/targets``, the
``observed_signal`` metric, ``tidal status``); nothing decides on it.

Main decision, extending: a new source fills the fields it measures and
leaves the others at their defaults, so it needs no change here; a new
kind of level or count is one field here and one in
:class:`~scaler.policy.api.LoadTotals` (of the same name, for a level).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scaler.policy.api import SignalKind

__all__ = [
    "COUNTS",
    "Brought",
    "DemandSource",
    "Levels",
    "PickerEndpoint",
    "PodEndpoint",
    "PolledSource",
    "SourceReading",
    "TargetPods",
]


#: The request counts: concurrency and queue depth.
COUNTS = frozenset({SignalKind.CONCURRENCY, SignalKind.QUEUE_DEPTH})


@dataclass(frozen=True, slots=True)
class Levels:
    """What the servers are doing right now, as one source sees it (``None``: not measured).

    The names are :class:`~scaler.policy.api.LoadTotals`' own: the hub hands
    the largest view of each to the policy with the target's counters.
    """

    running: float | None = None  # sequences running on the servers
    server_waiting: float | None = None  # requests waiting for a slot on a server
    awaiting_first_token: float | None = None  # requests held or sent, no first token yet
    kv_cache_utilization: float | None = None  # mean over the servers, fraction 0..1
    # The fewest on any one server: whether every replica was busy, or had a
    # queue, where the sums cannot tell queues on some beside idle others.
    running_least: float | None = None
    waiting_least: float | None = None


@dataclass(frozen=True, slots=True)
class Brought:
    """What one source's latest arrival brought that was new: counts, added once per arrival.

    Requests and tokens (the activators' view of arrivals, the servers' of
    work done), the fastest prefill seen (a maximum, not a count), arrivals
    over each prompt size bound, the first tokens new at or under each TTFT
    bound (cumulative, rising bounds, +inf last: the servers' histogram),
    and the LoRA adapter loads replicas refused (one Event's worth).
    """

    arrivals: float = 0.0
    prompt_tokens: float = 0.0
    output_tokens: float = 0.0
    first_tokens: float = 0.0
    prefilled_tokens: float = 0.0
    best_prefill_tokens_per_s: float = 0.0
    served_prompt_tokens: float = 0.0
    generated_tokens: float = 0.0
    prompts_over: tuple[float, ...] = ()
    ttft_new: tuple[tuple[float, float], ...] = ()
    adapter_refusals: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceReading:
    """One source's view of one target at one time.

    ``fresh`` is true only when every party this source expects to hear from
    (every reporting activator, every ready pod) answered recently; values
    from the parties that did answer (or their last known values) are still
    given, so a partial view can raise the scale.
    """

    fresh: bool
    reporters: int  # activators reporting, or pods with data
    signals: Mapping[SignalKind, float] = field(default_factory=dict)  # absent: no value now
    busy: bool = False  # anything held, running or waiting right now
    # Requests this source sees held for a target with no ready replica, which no
    # one else will ask to wake (an endpoint picker's waiting room): the service
    # asks the controller to wake the target at once, as an activation does.
    held_for_wake: float = 0.0
    pod_load: Mapping[str, float] = field(default_factory=dict)  # pod name -> requests on it
    activators: int = 0  # of the reporters, activators (the count /v1/targets shows)
    levels: Levels = field(default_factory=Levels)
    brought: Brought | None = None  # None: the latest arrival brought nothing for the target
    # Raw observed values for people (/v1/targets, metrics), named with units.
    observed: Mapping[str, float] = field(default_factory=dict)


class DemandSource(Protocol):
    """Anything the signal hub can ask about a target's demand.

    ``name``: what logs and arrivals call it (unique among the hub's
    sources). ``feeds``: the signals it measures; the hub combines every
    source the same way from it (:mod:`scaler.signals.combine`)."""

    @property
    def name(self) -> str: ...

    @property
    def feeds(self) -> frozenset[SignalKind]: ...

    def read(self, key: str, *, now: float) -> SourceReading | None:
        """This source's view of ``key`` (``namespace/name``) at ``now``, or
        ``None`` when this source has no say for that target."""
        ...


@dataclass(frozen=True, slots=True)
class PodEndpoint:
    """One ready pod a pulled source may query."""

    name: str
    ip: str
    metrics_port: int


@dataclass(frozen=True, slots=True)
class PickerEndpoint:
    """The endpoint picker of the InferencePool that makes a target (docs/gateway-api.md)."""

    pool: str  # the pool's name, as the picker's series label it
    metrics_url: str


@dataclass(frozen=True, slots=True)
class TargetPods:
    """What a pulled source needs to know about one target to refresh it."""

    key: str  # namespace/name
    namespace: str
    engine: str  # vllm | triton | generic
    pods: Sequence[PodEndpoint]
    picker: PickerEndpoint | None = None  # an InferencePool target's endpoint picker


class PolledSource(DemandSource, Protocol):
    """A source that fetches on its own schedule (scrapes, Prometheus)."""

    async def refresh(self, targets: Sequence[TargetPods], *, now: float) -> None:
        """Fetch fresh data for ``targets``, timestamped ``now`` on success;
        forget targets and pods that are no longer listed."""
        ...
