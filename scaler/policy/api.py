"""The contract between the scaler's pure policy and the code that drives it.

The signal hub (:mod:`scaler.signals.hub`) owns one :class:`SignalWindows` per target and
records samples into it as they arrive (an activator report, a pod scrape, a
Prometheus answer), each with the time it arrived. At every tick, and at once
on an activation, it builds an :class:`Observation` and calls
:func:`decide` with the target's :class:`PolicyState`; it acts on the returned
:class:`Decision` and keeps the returned state for next time.

Nothing here reads a clock: every time is a float of seconds on one monotonic
timeline that the caller passes in, so tests step a simulated clock.

Units: counts are requests; utilizations are fractions 0..1 (annotations say
percent; :mod:`scaler.policy.annotations` converts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "Decision",
    "Demand",
    "LoadTotals",
    "Mode",
    "Observation",
    "PlacementConfig",
    "Reason",
    "ScalingConfig",
    "SignalKind",
    "SignalReading",
    "SloReport",
]


class SignalKind(StrEnum):
    """A demand signal a target can be sized on (docs/architecture.md, "The scaler")."""

    CONCURRENCY = "concurrency"  # max(activator concurrency, server running + waiting)
    QUEUE_DEPTH = "queue_depth"  # activator buffered + server waiting (Triton: pending)
    KV_CACHE_UTILIZATION = "kv_cache_utilization"  # mean over ready pods, 0..1
    GPU_UTILIZATION = "gpu_utilization"  # mean over ready pods, 0..1


class Mode(StrEnum):
    STABLE = "stable"
    PANIC = "panic"


class Reason(StrEnum):
    """Why a decision came out as it did; also the Event/status vocabulary."""

    ACTIVATED = "Activated"  # woke from zero on an activation
    SCALED_UP = "ScaledUp"
    SCALED_DOWN = "ScaledDown"
    SCALED_TO_ZERO = "ScaledToZero"
    STEADY = "Steady"  # desired unchanged
    HOLDING = "Holding"  # would go down, but the scale-down delay or grace period holds it
    NO_DATA = "NoData"  # a signal needed to lower the scale is missing or stale


@dataclass(frozen=True, slots=True)
class PlacementConfig:
    """``placement.tidal.dev/*`` (docs/placement.md)."""

    policy: str = "on-demand"  # on-demand | spot | spot-with-on-demand-baseline
    on_demand_baseline: int = 1
    fallback: str = "dynamic"  # dynamic | none
    spot_overprovision: int = 0
    pending_timeout_s: float = 180.0


@dataclass(frozen=True, slots=True)
class ScalingConfig:
    """One target's validated ``autoscaling.tidal.dev/*`` knobs (docs/annotations.md).

    A target of ``None`` means its annotation is unset: that signal is not
    configured. Concurrency is always configured (default 16).
    """

    min_scale: int = 0
    max_scale: int = 10
    initial_scale: int = 1
    engine: str = "vllm"  # vllm | triton | generic
    target_concurrency: float = 16.0
    target_queue_depth: float | None = None
    target_kv_cache_utilization: float | None = None  # fraction 0..1
    target_gpu_utilization: float | None = None  # fraction 0..1
    window_s: float = 60.0
    panic_window_percentage: float = 10.0
    panic_threshold_percentage: float = 200.0
    scale_down_delay_s: float = 60.0
    max_scale_up_rate: float = 1000.0
    max_scale_down_rate: float = 2.0
    scale_to_zero_grace_s: float = 300.0
    # ``scale-to-zero-grace-period: adaptive``: the caller learns the grace
    # period per target (scaler.policy.idle.adaptive) and passes it in through
    # ``scale_to_zero_grace_s``; until it has enough history, that field's
    # value (the default 300 s) is the fixed fallback.
    scale_to_zero_grace_adaptive: bool = False
    metrics_port: int | str = 8000
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    # The warm tier (scaler.policy.warm_tier): idle this long, replicas sleep (None: off).
    sleep_after_s: float | None = None
    sleep_level: int = 1  # vLLM sleep level: 1 keeps weights in host RAM, 2 drops them
    # SLO-first scaling (scaler.policy.slo.decide): a TTFT objective and the share of
    # requests that must meet it. With ``slo_ttft_s`` set the target is sized
    # in tokens against a learned capacity instead of per-replica targets.
    slo_ttft_s: float | None = None
    slo_attainment: float = 0.99  # fraction 0..1
    # LoRA adapters idle this long are unloaded (the activator does it; the
    # scaler validates the key and reports it).
    adapter_keep_alive_s: float = 600.0
    # An inter-token objective (only with ``slo_ttft_s``): each sequence's tokens
    # no further apart on average. None: decode must only never queue.
    slo_tpot_s: float | None = None

    @property
    def panic_window_s(self) -> float:
        return max(1.0, self.window_s * self.panic_window_percentage / 100.0)

    def configured_signals(self) -> tuple[SignalKind, ...]:
        kinds = [SignalKind.CONCURRENCY]
        if self.target_queue_depth is not None:
            kinds.append(SignalKind.QUEUE_DEPTH)
        if self.target_kv_cache_utilization is not None:
            kinds.append(SignalKind.KV_CACHE_UTILIZATION)
        if self.target_gpu_utilization is not None:
            kinds.append(SignalKind.GPU_UTILIZATION)
        return tuple(kinds)


@dataclass(frozen=True, slots=True)
class SignalReading:
    """One signal's windows evaluated at ``now``.

    ``stable``/``panic`` are the averages over the stable and panic windows,
    ``None`` when the window holds no sample at all. ``fresh`` says a sample
    arrived recently enough to trust (the hub decides how recent, per
    source). No data is not zero load: a missing or stale reading may raise
    the desired scale but never lower it.
    """

    stable: float | None
    panic: float | None
    fresh: bool


@dataclass(frozen=True, slots=True)
class Demand:
    """Is anything asking for this target right now, and does every source say so?

    ``busy``: some activator holds or runs a request, or some server has a
    request running or waiting. ``all_sources_fresh``: every activator that
    reports, and every ready pod's scrape, is fresh; only then can "not busy"
    be trusted as idle (scale to zero needs it).
    """

    busy: bool
    all_sources_fresh: bool


@dataclass(frozen=True, slots=True)
class LoadTotals:
    """One target's request and token counters, summed over every report since the
    hub began tracking it (never decreasing), and the requests now waiting for a
    first token.

    Counters rather than rates so that a decision sees every token that arrived
    since the previous one, however many reports came in between. ``arrivals``,
    ``prompt_tokens`` (the activators' estimate, characters over four) and
    ``output_tokens`` (``max_tokens`` asked) are the requests the activators saw
    arrive (only for a model with a TTFT objective); ``first_tokens`` and
    ``prefilled_tokens`` (their prompt tokens) are those whose first token
    came back, the work the servers did (vLLM's ``prompt_tokens_total``).
    ``awaiting_first_token``: requests held or sent that have no first token yet.
    ``best_prefill_tokens_per_s``: the fastest prefill any request has shown, its
    prompt tokens over the time from reaching a replica to its first token (a
    lower bound on what a replica prefills, known before any saturation).
    ``served_prompt_tokens``: the prompt tokens the servers say they processed.
    ``ttft_counted`` and ``ttft_within_slo``: the first tokens the servers' TTFT
    histogram counted, and how many of them came within the target's objective
    (interpolated between the histogram's bounds), for the attainment measured.
    """

    arrivals: float = 0.0
    prompt_tokens: float = 0.0
    output_tokens: float = 0.0
    first_tokens: float = 0.0
    prefilled_tokens: float = 0.0
    awaiting_first_token: float = 0.0
    best_prefill_tokens_per_s: float = 0.0
    # The same work as the servers count it (vLLM's prompt_tokens_total, summed
    # over each scrape's new tokens): a second witness of ``prefilled_tokens``.
    served_prompt_tokens: float = 0.0
    ttft_counted: float = 0.0
    ttft_within_slo: float = 0.0
    # The servers' view of decode (vLLM; where no server publishes it, 0 or None):
    # tokens generated (``generation_tokens_total``, a counter), and right now the
    # sequences running, the requests waiting for a slot, the mean KV-cache usage.
    generated_tokens: float = 0.0
    running: float | None = None
    server_waiting: float = 0.0
    kv_cache_utilization: float | None = None
    # The fewest sequences running, and requests waiting, on any one server now
    # (None: no server says): every replica busy, or queued, where the sums above
    # cannot tell.
    running_least: float | None = None
    waiting_least: float | None = None
    # Arrivals whose prompt is longer than each of
    # :data:`~groundwork.rules.prompt_sizes.PROMPT_SIZE_BOUNDS`
    # tokens (counters, one per bound; empty where no source counts them).
    prompts_over: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Sleepers:
    """The warm tier's part of a target (``sleep-after`` set): its replicas asleep, the
    share of a device they keep paid (0 beside a serving model, whose device is paid
    for anyway; all of it alone on one; scaler.policy.warm_tier.gpu_use), the
    level they sleep at and what a wake from it takes, seconds."""

    asleep: int = 0
    device_share: float = 1.0
    level: int = 1
    wake_s: float = 1.0


@dataclass(frozen=True, slots=True)
class Observation:
    """What the controller saw of one target at ``now``."""

    ready_replicas: int
    spec_replicas: int
    signals: Mapping[SignalKind, SignalReading]
    demand: Demand
    # An activator asked to wake this target since the last decision.
    activation_requested: bool = False
    # The latest time a source's report showed demand, also between decisions (a
    # short request seen only in an in-between report); None: not known.
    demand_seen_at_s: float | None = None
    # Request and token counters (SLO-first scaling); None: no source counts them.
    load: LoadTotals | None = None
    # The latest concurrency sample (the sources' last readings combined), beside
    # the windows' averages: a wake's backlog is told from new demand by it
    # (scaler.policy.wake_backlog). None: no source has a value.
    concurrency_now: float | None = None
    # The warm tier's sleepers (None: not in the warm tier, or not known).
    sleepers: Sleepers | None = None


@dataclass(frozen=True, slots=True)
class SloReport:
    """What SLO-first scaling learned and sized, for ``/v1/targets`` and ``tidal status``."""

    slo_ttft_s: float
    attainment: float  # the goal, fraction 0..1
    capacity_tokens_per_s: float  # prompt tokens per second per replica
    capacity_learned: bool  # False: the prior, or the fastest prefill seen, stands
    sized_replicas: int  # what the load of the last ten minutes needs
    late_share: float  # share of those requests the sizing leaves waiting too long
    requests_per_s: float  # the history's arrival rate
    # The share of the last ten minutes' first tokens within the objective, as the
    # servers' TTFT histograms count them (None: none counted), and how many.
    measured_attainment: float | None = None
    measured_first_tokens: float = 0.0
    # Decode: generated tokens per second one replica sustains at the objective
    # (its full batch), and the sequences it runs at once (its batch).
    decode_tokens_per_s: float = 0.0
    decode_slots: float = 0.0
    binding: str = "prefill"  # prefill | decode: the larger share of the load's work
    # The share of requests whose prefill alone exceeds the objective (no replica
    # can serve them in time), and the headroom the measured attainment added.
    hopeless_share: float = 0.0
    headroom: float = 1.0
    slo_tpot_s: float | None = None
    # Whether the goal can be met (False: the requests no replica serves in time
    # alone exceed its allowance); where the count stopped short of the goal's
    # because the last replicas it takes buy less than they cost, the goal's own
    # count (0: it did not); and the share of requests one more replica would
    # meet besides: what the next replica buys.
    reachable: bool = True
    goal_replicas: int = 0
    next_replica: float = 0.0
    # With the warm tier: the replicas the load needs awake now; the rest of the
    # count (the floor from recent peaks, kept for a burst) may sleep, since a
    # wake within the objective meets the burst as an awake replica would.
    # None: every replica stays awake.
    awake_needed: int | None = None

    def as_json(self) -> dict[str, float | int | bool | str | None]:
        return {
            "slo_ttft_s": self.slo_ttft_s,
            "attainment": self.attainment,
            "capacity_prompt_tokens_per_s": round(self.capacity_tokens_per_s, 1),
            "capacity_learned": self.capacity_learned,
            "sized_replicas": self.sized_replicas,
            "late_share": round(self.late_share, 5),
            "requests_per_s": round(self.requests_per_s, 3),
            "measured_attainment": (
                None if self.measured_attainment is None else round(self.measured_attainment, 5)
            ),
            "measured_first_tokens": round(self.measured_first_tokens),
            "capacity_decode_tokens_per_s": round(self.decode_tokens_per_s, 1),
            "decode_slots": round(self.decode_slots, 1),
            "binding": self.binding,
            "hopeless_share": round(self.hopeless_share, 5),
            "headroom": round(self.headroom, 3),
            "awake_needed": self.awake_needed,
            "slo_tpot_s": self.slo_tpot_s,
            "reachable": self.reachable,
            "goal_replicas": self.goal_replicas,
            "next_replica": round(self.next_replica, 5),
        }


@dataclass(frozen=True, slots=True)
class Decision:
    """What the policy wants; the controller acts on it.

    ``desired`` is the total replica count (the placement split into spot and
    on-demand happens after). ``recheck_after_s`` asks for an earlier
    decision than the next tick (for example when a delay expires).
    ``missing_signals`` lists the configured signals that were missing or
    stale in this decision (they could not lower the scale).
    """

    desired: int
    reason: Reason
    mode: Mode
    per_signal: Mapping[SignalKind, int] = field(default_factory=dict)
    recheck_after_s: float | None = None
    message: str = ""
    missing_signals: tuple[SignalKind, ...] = ()
    slo: SloReport | None = None  # with slo-ttft: what was learned and sized
