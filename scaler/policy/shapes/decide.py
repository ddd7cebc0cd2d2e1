"""One decision for a model with shapes: each shape sized alone, then the cheapest mix (pure).

With ``placement.tidal.dev/shapes`` a model may run on several GPU shapes
(docs/shapes.md). :func:`decide_shapes` takes the model's observation and
what the caller saw of each shape (its Ready replicas, its servers'
counters, its pods), and at ``now``:

1. **Availability**: a shape whose pods stayed Pending past the
   ``pending-timeout`` is capped at the replicas it has, for a while
   (:mod:`scaler.policy.shapes.availability`, on the wall clock).
2. **Each shape alone**: the policy decides for each listed shape as if the
   model ran on it only, with that shape's own policy state
   (:class:`~scaler.policy.shapes.capacity.ShapeStates`: what SLO-first
   scaling learns per replica, learned from that shape's servers, from a
   prior scaled by its ratios), its per-replica targets scaled to it, its
   own Ready replicas and its part of the last mix. Its decision's count is
   the shape's **need**: its replicas alone that meet the demand, held by
   the policy's own floors and delays.
3. **The mix**: the cheapest replicas across shapes that meet the demand,
   prompts a shape cannot prefill in time sent where they can be, at most
   ``max-scale`` replicas (:mod:`scaler.policy.shapes.mix`).
4. **Hand-over**: the shrinking shapes keep Ready replicas until the new
   ones are Ready (:mod:`scaler.policy.shapes.handover`).

It returns the model's :class:`~scaler.policy.api.Decision` (the mix's
total, named by the direction it moved; the lead shape's signals and SLO
report, the lead being the shape that covers most of the mix), each
shape's decision and ask, and the next :class:`ShapesState`.

Main decision, a shape's counters are its own: the servers' tokens, batch,
queue and first tokens of its pods only, beside the model's arrivals (the
history every shape is sized on), so each shape learns what *its* replicas
do. Where no server breaks them down by shape (no scrape), a shape learns
only while it is the one serving.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scaler.policy.api import Decision, LoadTotals, Observation, Reason, ScalingConfig
from scaler.policy.decide import PolicyState
from scaler.policy.placement.availability import PodFacts
from scaler.policy.protocol import Policy
from scaler.policy.shapes.availability import ShapeAvailability, Turn, observe_shapes
from scaler.policy.shapes.capacity import ShapeStates, relative, shape_config, target_ratio
from scaler.policy.shapes.declarations import Capacity as Ratios
from scaler.policy.shapes.declarations import ChosenShape
from scaler.policy.shapes.handover import hand_over
from scaler.policy.shapes.mix import Mix, MixGoal, Offer, choose_mix, mix_of

__all__ = ["ShapeSeen", "ShapesOutcome", "ShapesState", "decide_shapes", "own_load"]

# The share of the miss allowance sizing may spend on requests it leaves late
# (scaler.policy.slo.sizing sizes at half; the rest is for cold starts): a mix
# may leave at most this share of requests on shapes too slow for them.
_ALLOWANCE_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class ShapeSeen:
    """What the caller saw of one shape: its Deployment's Ready replicas, its pods,
    and its servers' counters (``None``: no server breaks them down by shape)."""

    ready: int = 0
    pods: Sequence[PodFacts] = ()
    load: LoadTotals | None = None


@dataclass(frozen=True, slots=True)
class ShapesState:
    """What a model with shapes keeps between decisions: each shape's policy state,
    the last mix, and which shapes are capped."""

    states: ShapeStates = field(default_factory=lambda: ShapeStates({}))
    mix: Mix = field(default_factory=lambda: Mix({}, 0.0, "none"))
    availability: ShapeAvailability = field(default_factory=ShapeAvailability)

    @property
    def targets(self) -> Mapping[str, int]:
        """Each shape's part of the last mix."""
        return self.mix.replicas

    @classmethod
    def running(cls, replicas: Mapping[str, int], shapes: Sequence[ChosenShape]) -> ShapesState:
        """The state of a model first seen with ``replicas`` running: they are its mix."""
        prices = {c.shape.name: c.shape.prices.on_demand for c in shapes}
        return cls(mix=mix_of(replicas, prices))


@dataclass(frozen=True, slots=True)
class ShapesOutcome:
    """One decision of a model with shapes (see the module docstring)."""

    decision: Decision  # the model's: desired is the mix's total
    state: PolicyState  # the lead shape's, the model's state for idle time and the warm tier
    lead: str
    decisions: Mapping[str, Decision]  # each shape alone
    mix: Mix
    asks: Mapping[str, int]  # what each shape's Deployment asks for (the hand-over included)
    shapes: ShapesState
    turns: tuple[Turn, ...] = ()
    # Per shape, how much one replica takes against the others (its learned prefill
    # or decode rate, whichever binds; without an objective its prior ratio), and the
    # longest prompt it prefills within the objective (None: no objective).
    weights: Mapping[str, float] = field(default_factory=dict)
    limits: Mapping[str, float | None] = field(default_factory=dict)

    def as_json(self, *, now_wall: float) -> dict[str, object]:
        """What ``/v1/targets`` shows of the step."""
        caps = self.shapes.availability.caps(now_wall)
        return {
            "mix": dict(self.mix.replicas),
            "asks": dict(self.asks),
            "cost_dollars_per_hour": round(self.mix.cost_per_h, 4),
            "why": self.mix.why,
            "lead": self.lead,
            "need": {name: d.desired for name, d in self.decisions.items()},
            "weights": {name: round(w, 4) for name, w in self.weights.items()},
            "prefill_limit_tokens": {
                name: None if v is None else round(v) for name, v in self.limits.items()
            },
            "capped": {
                name: {"at_most": caps[name], "why": o.why}
                for name, o in self.shapes.availability.outages.items()
                if name in caps
            },
        }


def own_load(
    model: LoadTotals | None, own: LoadTotals | None, *, ready: int, total_ready: int
) -> LoadTotals | None:
    """A shape's counters: the model's arrivals (its history) with the shape's own
    servers' counters (module docstring). Where the servers' are not broken down
    (``own`` None), the model's stand only while this shape is all that serves."""
    if model is None:
        return None
    sole = ready >= total_ready
    if own is None:
        if sole:
            return model
        own = LoadTotals()
    waiting = own.server_waiting
    return replace(
        model,
        prefilled_tokens=own.served_prompt_tokens,
        served_prompt_tokens=own.served_prompt_tokens,
        generated_tokens=own.generated_tokens,
        running=own.running,
        server_waiting=waiting,
        kv_cache_utilization=own.kv_cache_utilization,
        ttft_counted=own.ttft_counted,
        ttft_within_slo=own.ttft_within_slo,
        # A wake's backlog is everyone's; once replicas serve, a shape's queue is its own.
        awaiting_first_token=model.awaiting_first_token if ready == 0 else waiting,
        best_prefill_tokens_per_s=model.best_prefill_tokens_per_s if sole else 0.0,
    )


def _reason(before: int, after: int, decisions: Sequence[Decision], lead: Decision) -> Reason:
    """The model's reason, by the direction its total moved."""
    if after == before:
        changing = lead.reason in (
            Reason.ACTIVATED,
            Reason.SCALED_UP,
            Reason.SCALED_DOWN,
            Reason.SCALED_TO_ZERO,
        )
        return Reason.STEADY if changing else lead.reason
    if after == 0:
        return Reason.SCALED_TO_ZERO
    if before == 0 and any(d.reason is Reason.ACTIVATED for d in decisions):
        return Reason.ACTIVATED
    return Reason.SCALED_UP if after > before else Reason.SCALED_DOWN


def _long_weight(states: Mapping[str, PolicyState], config: ScalingConfig) -> float:
    """How much more work a prompt too long for a slow shape is than the mean prompt:
    at least its size at the slowest shape's limit over the mean (1 without data)."""
    if config.slo_ttft_s is None:
        return 1.0
    limits, means = [], []
    for state in states.values():
        slo = state.slo
        if slo is None or slo.history.requests <= 0:
            continue
        limits.append(slo.prefill_per_s * config.slo_ttft_s)
        means.append(slo.history.tokens / slo.history.requests)
    if not limits or not max(means) > 0:
        return 1.0
    return max(1.0, min(limits) / max(means))


def _lead(mix: Mix, decisions: Mapping[str, Decision], base: str) -> str:
    """The shape covering most of the mix (the base shape when the mix is empty)."""
    covering = [
        (n / max(1, decisions[name].desired), name)
        for name, n in mix.replicas.items()
        if name in decisions
    ]
    return max(covering)[1] if covering else base


def decide_shapes(
    *,
    policy: Policy,
    config: ScalingConfig,
    shapes: Sequence[ChosenShape],
    base: str,
    observation: Observation,
    seen: Mapping[str, ShapeSeen],
    current: Mapping[str, int],
    state: ShapesState,
    now: float,
    now_wall: float,
) -> ShapesOutcome:
    """One decision for a model with ``shapes`` (see the module docstring). ``base``:
    the shape the policy's priors describe (the user's template's); ``current``: what
    each shape's Deployment asks for now; ``now_wall``: epoch seconds, the pods' clock."""
    by_name = {c.shape.name: c for c in shapes}
    if base not in by_name:
        raise ValueError(f"the base shape {base!r} is not one of {', '.join(by_name)}")
    availability, turns = observe_shapes(
        state.availability,
        {name: seen[name].pods if name in seen else () for name in by_name},
        now=now_wall,
        pending_timeout_s=config.placement.pending_timeout_s,
    )
    total_ready = sum(s.ready for s in seen.values())
    base_ratios = by_name[base].shape.capacity
    decisions: dict[str, Decision] = {}
    states: dict[str, PolicyState] = {}
    for name, chosen in by_name.items():
        ratios = relative(chosen.shape.capacity, base_ratios)
        got = seen.get(name, ShapeSeen())
        own = replace(
            observation,
            ready_replicas=got.ready,
            spec_replicas=state.targets.get(name, 0),
            load=own_load(observation.load, got.load, ready=got.ready, total_ready=total_ready),
        )
        decisions[name], states[name] = policy.decide(
            config=shape_config(config, ratios),
            observation=own,
            state=state.states.get(name, ratios, now),
            now=now,
        )
    caps = availability.caps(now_wall)
    hopeless = {
        name: d.slo.hopeless_share if d.slo is not None else 0.0 for name, d in decisions.items()
    }
    offers = [
        Offer(name, d.desired, by_name[name].shape.prices.on_demand, hopeless[name], caps.get(name))
        for name, d in decisions.items()
    ]
    goal = MixGoal(
        max_total=config.max_scale,
        min_total=config.min_scale,
        allowance=(1.0 - config.slo_attainment) * _ALLOWANCE_SHARE,
        long_weight=_long_weight(states, config),
    )
    mix = choose_mix(offers, goal, state.targets)
    asks = hand_over(
        mix.replicas,
        current=current,
        ready={name: s.ready for name, s in seen.items()},
        needs={name: d.desired for name, d in decisions.items()},
        prices={name: c.shape.prices.on_demand for name, c in by_name.items()},
    )
    lead = _lead(mix, decisions, base)
    before = sum(state.targets.values())
    lead_decision = decisions[lead]
    rechecks = [d.recheck_after_s for d in decisions.values() if d.recheck_after_s is not None]
    decision = replace(
        lead_decision,
        desired=mix.total,
        reason=_reason(before, mix.total, list(decisions.values()), lead_decision),
        message=f"{mix.why}; {lead}: {lead_decision.message}",
        recheck_after_s=min(rechecks) if rechecks else None,
    )
    new_state = ShapesState(
        states=state.states.with_states(states).only(frozenset(by_name)),
        mix=mix,
        availability=availability,
    )
    return ShapesOutcome(
        decision=decision,
        state=states[lead],
        lead=lead,
        decisions=decisions,
        mix=mix,
        asks=asks,
        shapes=new_state,
        turns=turns,
        weights={
            name: _weight(d, relative(by_name[name].shape.capacity, base_ratios))
            for name, d in decisions.items()
        },
        limits={
            name: None if d.slo is None else d.slo.capacity_tokens_per_s * d.slo.slo_ttft_s
            for name, d in decisions.items()
        },
    )


def _weight(decision: Decision, ratios: Ratios) -> float:
    """How much one replica takes (see :attr:`ShapesOutcome.weights`)."""
    slo = decision.slo
    if slo is None:
        return target_ratio(ratios)
    if slo.binding == "decode":
        return slo.decode_tokens_per_s
    return slo.capacity_tokens_per_s
