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
3. **Correction**: with two shapes or more, each shape's need is corrected
   by what its own servers measured (:mod:`scaler.policy.shapes.correction`;
   the shape's policy is shown its part of the last mix without the
   correction, :func:`_uncorrected`, so that a count it holds is corrected once);
   a shape whose replicas miss far more than its sizing expects even so is
   capped at zero for a while, as a Pending one is. A shape whose servers
   have not yet kept the goal (a shape of no proof: its capacity is a
   prior, or an estimate from too few requests) is offered one replica at
   most: enough for a trickle of load, or to be measured on its share of a
   larger one (one replica of the cheapest such shape is tried beside the
   others when the mix would use more of it), too few to let a wrong prior
   carry the model; the base shape needs no proof, nor any shape of a model
   without an objective (nothing measures it against one).
4. **The mix**: the cheapest replicas across shapes that meet the demand,
   prompts a shape cannot prefill in time sent where they can be, at most
   ``max-scale`` replicas (:mod:`scaler.policy.shapes.mix`). Right after
   the first decision (a new model, or a scaler that just started) every
   need is a guess: the shapes running stay, for two minutes with an
   objective (none running: the base shape is woken), for one stable
   ``window`` without (none running: the cheapest); after a move, as long
   again before the next (a capped shape is left at once all the same).
5. **Hand-over**: the shrinking shapes keep Ready replicas until the new
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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scaler.policy.api import Decision, LoadTotals, Observation, Reason, ScalingConfig
from scaler.policy.decide import PolicyState
from scaler.policy.placement.availability import PodFacts
from scaler.policy.protocol import Policy
from scaler.policy.shapes.availability import ShapeAvailability, Turn, observe_shapes
from scaler.policy.shapes.capacity import ShapeStates, relative, shape_config, target_ratio
from scaler.policy.shapes.correction import LAG, Correction, recent_share
from scaler.policy.shapes.declarations import Capacity as Ratios
from scaler.policy.shapes.declarations import ChosenShape
from scaler.policy.shapes.handover import hand_over
from scaler.policy.shapes.mix import Mix, MixGoal, Offer, choose_mix, mix_of
from scaler.policy.slo.sizing import hopeless_count

__all__ = ["ShapeSeen", "ShapesOutcome", "ShapesState", "decide_shapes", "own_load"]

# The share of the miss allowance sizing may spend on requests it leaves late
# (scaler.policy.slo.sizing sizes at half; the rest is for cold starts): a mix
# may leave at most this share of requests on shapes too slow for them.
_ALLOWANCE_SHARE = 0.5
# How long after its first decision a model's shapes' needs are compared: two
# minutes of its arrivals (sizing replays at least one window of them).
_SETTLE_S = 120.0
# How long a shape may be on trial without proof before it counts as unfit: three
# windows of its measured attainment (a cold start, then two windows of serving).
_TRIAL_S = 3 * 120.0


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
    corrections: Mapping[str, Correction] = field(default_factory=dict)
    decided_at_s: float | None = None
    proven: frozenset[str] = frozenset()  # shapes whose servers have kept the goal
    trials: Mapping[str, float] = field(default_factory=dict)  # shape on trial -> since when
    started_s: float | None = None  # the first decision (None: none yet)
    moved_s: float | None = None  # the last change of the shapes the mix uses

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
    # Per shape, how much one replica takes against the others (its learned rate in
    # the phase that binds the model; without an objective its prior ratio; the
    # largest 1), and the longest prompt it prefills within the objective (None: no
    # objective).
    weights: Mapping[str, float] = field(default_factory=dict)
    limits: Mapping[str, float | None] = field(default_factory=dict)
    needs: Mapping[str, int] = field(default_factory=dict)  # each shape's, corrected

    def as_json(self, *, now_wall: float) -> dict[str, object]:
        """What ``/v1/targets`` shows of the step."""
        caps = self.shapes.availability.caps(now_wall)
        return {
            "mix": dict(self.mix.replicas),
            "asks": dict(self.asks),
            "cost_dollars_per_hour": round(self.mix.cost_per_h, 4),
            "why": self.mix.why,
            "lead": self.lead,
            "need": dict(self.needs),
            "correction": {name: round(c.factor, 3) for name, c in self.shapes.corrections.items()},
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
    servers' counters (module docstring). While this shape is all that serves, the
    model's are its own (with the requests the activators hold, which no server
    counts); where the servers' are not broken down (``own`` None), only then."""
    if model is None:
        return None
    if ready >= total_ready:
        return model
    if own is None:
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
        best_prefill_tokens_per_s=0.0,
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


def _lead(mix: Mix, needs: Mapping[str, int], base: str) -> str:
    """The shape covering most of the mix (the base shape when the mix is empty)."""
    covering = [
        (n / max(1, needs[name]), name) for name, n in mix.replicas.items() if name in needs
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
    base_ratios = by_name[base].shape.capacity
    decisions, states = _each_alone(
        policy, config, by_name, base_ratios, observation, seen, state, now=now
    )
    corrections: dict[str, Correction] = {}
    # Without an objective nothing is measured against one: every shape is taken at its word.
    proven = state.proven | {base} if config.slo_ttft_s is not None else frozenset(by_name)
    if len(by_name) > 1:
        corrections, availability, unfit_turns = _corrections(
            state, states, config, availability, seen, base=base, now=now, now_wall=now_wall
        )
        turns = (*turns, *unfit_turns)
        proven = _proven(proven, states, config, now) - {t.shape for t in unfit_turns} | {base}
    needs = {
        name: corrections[name].need(d.desired) if name in corrections else d.desired
        for name, d in decisions.items()
    }
    caps = availability.caps(now_wall)
    hopeless = {
        name: _hopeless(d, states[name], by_name[name].max_model_len)
        for name, d in decisions.items()
    }
    prices = {name: c.shape.prices.on_demand for name, c in by_name.items()}
    offers = [
        Offer(name, needs[name], prices[name], hopeless[name], caps.get(name)) for name in decisions
    ]
    started_s = now if state.started_s is None else state.started_s
    sized = config.slo_ttft_s is not None
    held = _held(config, started_s, state.moved_s, now)
    goal = _goal(config, states, held=held)
    if sized and held == _YOUNG and not any(n > 0 for n in state.targets.values()):
        # No history to size on and nothing running: the shape the template names.
        offers = [o for o in offers if o.name == base]
    mix = _choose(offers, goal, state.targets, proven)
    asks = hand_over(
        mix.replicas,
        current=current,
        ready={name: s.ready for name, s in seen.items()},
        needs=needs,
        prices=prices,
    )
    lead = _lead(mix, needs, base)
    new_state = ShapesState(
        states=state.states.with_states(states).only(frozenset(by_name)),
        mix=mix,
        availability=availability,
        corrections=corrections,
        decided_at_s=now,
        proven=frozenset(proven) & frozenset(by_name),
        trials=_trials(state.trials, mix, proven, now),
        started_s=started_s,
        moved_s=(
            now
            if state.mix.replicas and set(mix.replicas) != set(state.mix.replicas)
            else state.moved_s
        ),
    )
    return ShapesOutcome(
        decision=_combined(decisions, lead, mix, before=sum(state.targets.values())),
        state=states[lead],
        lead=lead,
        decisions=decisions,
        mix=mix,
        asks=asks,
        shapes=new_state,
        turns=turns,
        needs=needs,
        weights=_weights(decisions, by_name, base_ratios, lead),
        limits={name: _limit(d, by_name[name].max_model_len) for name, d in decisions.items()},
    )


def _each_alone(
    policy: Policy,
    config: ScalingConfig,
    by_name: Mapping[str, ChosenShape],
    base_ratios: Ratios,
    observation: Observation,
    seen: Mapping[str, ShapeSeen],
    state: ShapesState,
    *,
    now: float,
) -> tuple[dict[str, Decision], dict[str, PolicyState]]:
    """The policy's decision for each shape as if it served the model alone, on what
    that shape's own replicas measured and its share of the model's load."""
    total_ready = sum(s.ready for s in seen.values())
    decisions: dict[str, Decision] = {}
    states: dict[str, PolicyState] = {}
    for name, chosen in by_name.items():
        ratios = relative(chosen.shape.capacity, base_ratios)
        got = seen.get(name, ShapeSeen())
        own = replace(
            observation,
            ready_replicas=got.ready,
            spec_replicas=_uncorrected(state.targets.get(name, 0), state.corrections.get(name)),
            load=own_load(observation.load, got.load, ready=got.ready, total_ready=total_ready),
        )
        decisions[name], states[name] = policy.decide(
            config=shape_config(config, ratios),
            observation=own,
            state=state.states.get(name, ratios, now),
            now=now,
        )
    return decisions, states


def _uncorrected(replicas: int, correction: Correction | None) -> int:
    """A shape's part of the last mix in its own sizing's units, as its policy is shown
    it: the mix bought ``ceil(desired x factor)`` of it, so ``replicas / factor``
    (rounded down, at least one of some). Shown the corrected count, a policy holding
    its count (a short history, a rising load) would keep it and the factor would be
    applied again at each decision: 2, 4, 8, 16 replicas in three decisions at 2."""
    if correction is None or replicas <= 0:
        return replicas
    return max(1, math.floor(replicas / correction.factor + 1e-9))


_YOUNG = "too little seen yet to compare shapes on"


def _held(config: ScalingConfig, started_s: float, moved_s: float | None, now: float) -> str:
    """Why no move is made now ("": moves are allowed). Young: too little seen to
    compare shapes on (with an objective, two minutes of arrivals; without, one stable
    window of the signals). After a move, as long again before the next: the load
    that made it must be seen to hold."""
    settle_s = _SETTLE_S if config.slo_ttft_s is not None else config.window_s
    if now - started_s < settle_s:
        return _YOUNG
    if moved_s is not None and now - moved_s < settle_s:
        return f"the last move was {now - moved_s:.0f}s ago"
    return ""


def _goal(config: ScalingConfig, states: Mapping[str, PolicyState], *, held: str) -> MixGoal:
    return MixGoal(
        max_total=config.max_scale,
        min_total=config.min_scale,
        allowance=(1.0 - config.slo_attainment) * _ALLOWANCE_SHARE,
        long_weight=_long_weight(states, config),
        held=held,
    )


def _combined(decisions: Mapping[str, Decision], lead: str, mix: Mix, *, before: int) -> Decision:
    """The model's one decision: the mix's total, told in the lead shape's words."""
    lead_decision = decisions[lead]
    rechecks = [d.recheck_after_s for d in decisions.values() if d.recheck_after_s is not None]
    return replace(
        lead_decision,
        desired=mix.total,
        reason=_reason(before, mix.total, list(decisions.values()), lead_decision),
        message=f"{mix.why}; {lead}: {lead_decision.message}",
        recheck_after_s=min(rechecks) if rechecks else None,
    )


def _corrections(
    state: ShapesState,
    states: Mapping[str, PolicyState],
    config: ScalingConfig,
    availability: ShapeAvailability,
    seen: Mapping[str, ShapeSeen],
    *,
    base: str,
    now: float,
    now_wall: float,
) -> tuple[dict[str, Correction], ShapeAvailability, list[Turn]]:
    """Each shape's correction after what its servers measured, and the shapes that
    serve now found unfit, capped (step 3; :mod:`scaler.policy.shapes.correction`)."""
    interval_s = 0.0 if state.decided_at_s is None else now - state.decided_at_s
    goal = config.slo_attainment
    shares = {
        name: recent_share(s.slo.measured if s.slo is not None else None, now)
        for name, s in states.items()
    }
    out = {}
    turns: list[Turn] = []
    for name, own in shares.items():
        others = [got[0] for other, got in shares.items() if other != name and got is not None]
        reference = max(others) if others else (goal if name != base else None)
        corrected = state.corrections.get(name, Correction()).after(
            own, reference=reference, goal=goal, now=now, interval_s=interval_s
        )
        out[name] = corrected
        why = corrected.unfit(own, reference)
        on_trial_s = now - state.trials.get(name, now)
        if why is None and own is not None and on_trial_s > _TRIAL_S and own[0] < goal - LAG:
            # Measured on its share of the load for a trial's length, and still short.
            why = (
                f"on trial for {on_trial_s:.0f}s, its servers kept {100 * own[0]:.1f} % of"
                f" first tokens within the objective, short of the {100 * goal:g} % goal"
            )
        if why is not None and name in seen and seen[name].ready > 0:
            availability, turn = availability.unfit(
                name, why, now=now_wall, pending_timeout_s=config.placement.pending_timeout_s
            )
            turns += [turn] if turn is not None else []
            out[name] = Correction()  # asked for again later, from its own sizing
    return out, availability, turns


def _proven(
    proven: frozenset[str], states: Mapping[str, PolicyState], config: ScalingConfig, now: float
) -> frozenset[str]:
    """``proven`` with the shapes whose servers kept the goal over the last window."""
    kept = set(proven)
    for name, policy_state in states.items():
        own = recent_share(policy_state.slo.measured if policy_state.slo else None, now)
        if own is not None and own[0] >= config.slo_attainment - LAG:
            kept.add(name)
    return frozenset(kept)


def _trials(
    before: Mapping[str, float], mix: Mix, proven: frozenset[str], now: float
) -> dict[str, float]:
    """The shapes on trial (in ``mix``, not proven) and since when; a trial that left
    the mix is remembered a while, so that going in and out does not restart it."""
    kept = {
        name: since
        for name, since in before.items()
        if name not in proven and now - since <= 2 * _TRIAL_S
    }
    for name, n in mix.replicas.items():
        if n > 0 and name not in proven:
            kept.setdefault(name, now)
    return kept


def _choose(
    offers: Sequence[Offer], goal: MixGoal, running: Mapping[str, int], proven: frozenset[str]
) -> Mix:
    """The cheapest mix (step 4), a shape of no proof at one replica at most (step 3);
    where the mix would use more of such a shape, one replica of the cheapest of them
    is tried beside it."""
    capped = [
        o if o.name in proven else replace(o, most=1 if o.most is None else min(1, o.most))
        for o in offers
    ]
    kept = choose_mix(capped, goal, running)
    free = choose_mix(offers, goal, running)
    untried = [n for n in free.replicas if n not in proven and n not in kept.replicas]
    if not untried:
        return kept
    by_name = {o.name: o for o in offers}
    trial = min(untried, key=lambda name: by_name[name].price * by_name[name].need)
    replicas = {**kept.replicas, trial: 1}
    cost = sum(n * by_name[name].price for name, n in replicas.items())
    why = f"{kept.why}, and 1 x {trial} on trial (its servers have not yet kept the goal)"
    return Mix(replicas, cost, why)


def _limit(decision: Decision, max_model_len: int | None) -> float | None:
    """The longest prompt a replica of the shape serves in time: what it prefills within
    the objective, and short of its ``--max-model-len`` (None: no bound known)."""
    bounds = []
    if decision.slo is not None:
        bounds.append(decision.slo.capacity_tokens_per_s * decision.slo.slo_ttft_s)
    if max_model_len is not None:
        bounds.append(float(max_model_len - 1))
    return min(bounds) if bounds else None


def _hopeless(decision: Decision, state: PolicyState, max_model_len: int | None) -> float:
    """The share of requests the shape cannot serve in time: those whose prefill alone
    misses the objective on it, or whose prompt its ``--max-model-len`` refuses."""
    share = decision.slo.hopeless_share if decision.slo is not None else 0.0
    history = state.slo.history if state.slo is not None else None
    if max_model_len is None or history is None or history.requests <= 0:
        return share
    refused = sum(min(i[3], hopeless_count(i[5], max_model_len)) for i in history.intervals)
    return max(share, refused / history.requests)


def _weights(
    decisions: Mapping[str, Decision],
    by_name: Mapping[str, ChosenShape],
    base_ratios: Ratios,
    lead: str,
) -> dict[str, float]:
    """How much one replica of each shape takes (see :attr:`ShapesOutcome.weights`):
    its learned rate in the phase that binds the model (the lead shape's), so that
    every shape is weighed in the same units; without an objective its prior ratio.
    Scaled so that the largest is 1."""
    lead_slo = decisions[lead].slo
    raw: dict[str, float] = {}
    for name, d in decisions.items():
        slo = d.slo
        if slo is None or lead_slo is None:
            raw[name] = target_ratio(relative(by_name[name].shape.capacity, base_ratios))
        elif lead_slo.binding == "decode":
            raw[name] = slo.decode_tokens_per_s
        else:
            raw[name] = slo.capacity_tokens_per_s
    top = max(raw.values(), default=0.0)
    return {name: w / top if top > 0 else 1.0 for name, w in raw.items()}
