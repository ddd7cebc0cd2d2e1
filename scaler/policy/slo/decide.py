"""SLO-first scaling: one target's decision when it states a TTFT objective.

With ``autoscaling.tidal.dev/slo-ttft`` set, :func:`decide_slo` replaces
:func:`~scaler.policy.decide.decide`'s per-replica targets, windows and
panic. Pure: the state goes in and comes out (``PolicyState.slo``, a frozen
:class:`SloState`), time is passed in. The steps, in order:

1. **Learn.** The observation's counters (:class:`~scaler.policy.api.LoadTotals`)
   since the last decision add one interval to the model's
   :class:`~scaler.policy.slo.load.LoadHistory`, may add a sample to the
   capacity of both phases (:func:`~scaler.policy.slo.phases.learn_phases`)
   and to the prompt-only one (:func:`~scaler.policy.slo.load.learn_capacity`),
   and the demand (busy or idle) extends the model's
   :class:`~scaler.policy.idle.keep_alive.IdleGaps`.
2. **Size** for the load expected over the next cold start:
   :func:`~scaler.policy.slo.sizing.replicas_for` (the history replayed
   as work in both phases through the replicas; prompts no replica can serve
   in time buy nothing; the goal's count, or fewer where its last replicas
   buy less than they cost), at least one; the other per-replica
   targets, when set (queue depth, KV cache, GPU), may raise it. The
   attainment measured against what the replay predicted corrects the
   headroom (:meth:`SloState.corrected`).
3. **From zero**, an activation or visible demand wakes the target to the
   larger of ``initial-scale``, ``min-scale`` and the sizing, in the same
   decision.
4. **To zero** when ``min-scale`` is 0, nothing is busy, every source is
   fresh, and the expected-cost rule (:mod:`scaler.policy.idle.keep_alive`) says a
   request within the next cold start is too unlikely to pay for staying
   warm. It replaces the grace period. With the warm tier
   (``sleep-after``), staying means sleeping: the same rule with the wake in
   place of the cold start and the sleepers' share of a device as the price
   of staying (:func:`~scaler.policy.warm_tier.choose_depth`: nothing beside a
   serving model, so a sleeper there stays), one plan with the tier.
5. **Down** along a floor from recent peaks that fades
   (:mod:`scaler.policy.slo.floor`): a count wanted is held for a cold start,
   then falls one replica per cold start (the ski-rental break-even: a
   replica let go and wanted back costs a cold start of GPU time and arrives
   late). With the warm tier and a wake that fits the objective, the count
   the load needs now is reported apart (``awake_needed``): the floor's
   replicas above it are headroom the tier may hold asleep, since a burst
   they are kept for is met by a wake as it would be by an awake replica.
6. **No data is not zero load**: while a configured signal or a demand
   source is stale, or the history is too short to know the load's mean
   (a fleet taken over, the first minutes of bursts), the count may rise
   but not fall; the replicas found at the first decision fade as a peak
   does. Bounds
   ``[max(1, min-scale), max-scale]`` above zero.

The cold start is a parameter (the scaler's estimate, the simulator's
median): it is the horizon of the forecast and of the keep-alive rule.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scaler.policy.api import (
    Decision,
    Mode,
    Observation,
    Reason,
    ScalingConfig,
    SignalKind,
    SloReport,
)
from scaler.policy.decide import PolicyState, desired_for_signal
from scaler.policy.idle.keep_alive import KeepAliveOdds, keep_alive_odds
from scaler.policy.slo.floor import fading_floor, floor_window_s
from scaler.policy.slo.sizing import Sizing, SizingGoal, lookback_for, replicas_for
from scaler.policy.slo.state import SloState, recent_window_s
from scaler.policy.warm_tier.depth import ZERO, Rungs, choose_depth
from scaler.policy.windows import MaxHold

__all__ = ["SloState", "decide_slo"]


def _other_targets(config: ScalingConfig, observation: Observation) -> tuple[int, bool]:
    """What the per-replica targets other than concurrency ask for (fresh readings
    only), and whether every configured signal is fresh."""
    want, fresh = 0, True
    for kind in config.configured_signals():
        reading = observation.signals.get(kind)
        if reading is None or reading.stable is None or not reading.fresh:
            fresh = False
            continue
        if kind is SignalKind.CONCURRENCY:
            continue
        want = max(
            want,
            desired_for_signal(
                kind, reading.stable, config=config, ready_replicas=observation.ready_replicas
            ),
        )
    return want, fresh


def _goal(
    config: ScalingConfig,
    slo: SloState,
    observation: Observation,
    slo_ttft_s: float,
    cold_start_s: float,
) -> SizingGoal:
    """What sizing aims at, with what the state has learned."""
    return SizingGoal(
        slo_ttft_s=slo_ttft_s,
        attainment=config.slo_attainment,
        max_replicas=config.max_scale,
        prefill_per_s=slo.prefill_per_s,
        fit=slo.fit,
        slo_tpot_s=config.slo_tpot_s,
        lookback_s=lookback_for(cold_start_s),
        headroom=slo.headroom,
        cold_start_s=cold_start_s,
        backlog=0.0 if observation.load is None else observation.load.awaiting_first_token,
        ready=observation.ready_replicas,
        asked=observation.spec_replicas,
        recent_s=recent_window_s(cold_start_s),
        search_from=0 if slo.sizing is None else slo.sizing.goal_replicas or slo.sizing.replicas,
    )


@dataclass(frozen=True, slots=True)
class _Outcome:
    desired: int
    reason: Reason
    message: str
    hold: MaxHold


def decide_slo(
    *,
    config: ScalingConfig,
    observation: Observation,
    state: PolicyState,
    now: float,
    cold_start_s: float,
) -> tuple[Decision, PolicyState]:
    """One SLO-first decision at ``now`` (see the module docstring)."""
    slo_ttft_s = config.slo_ttft_s
    if slo_ttft_s is None:
        raise ValueError("decide_slo needs a config with slo_ttft_s set")
    previous = state.slo or SloState.start(now)
    seen = observation.demand_seen_at_s
    busy = observation.demand.busy or (
        seen is not None and previous.at_s is not None and seen > previous.at_s
    )
    slo = previous.learn(observation, busy=busy, now=now)  # 1. learn
    goal = _goal(config, slo, observation, slo_ttft_s, cold_start_s)
    sizing = replicas_for(slo.history, goal)  # 2. size
    slo = replace(
        slo.corrected(
            sizing,
            goal=config.slo_attainment,
            now=now,
            interval_s=0.0 if previous.at_s is None else now - previous.at_s,
            cold_start_s=cold_start_s,
        ),
        sizing=sizing,
    )
    others, signals_fresh = _other_targets(config, observation)
    want = max(sizing.replicas, others)
    current = observation.spec_replicas
    fresh = signals_fresh and observation.demand.all_sources_fresh

    if current == 0:  # 3. from zero
        outcome = _from_zero(config, observation, want, busy=busy)
    else:
        odds = keep_alive_odds(
            slo.gaps,
            cold_start_s=cold_start_s,
            request_rate=slo.history.request_rate(),
            attainment=config.slo_attainment,
            now=now,
        )
        stay, why = _stay(config, observation, odds, slo, cold_start_s, now)
        if config.min_scale == 0 and not busy and fresh and not stay:  # 4. to zero
            outcome = _Outcome(0, Reason.SCALED_TO_ZERO, f"idle: {why}", MaxHold())
        else:
            # A history shorter than a cold start forecasts nothing yet: keep what
            # is there (a warm fleet taken over) until it has seen one.
            young = not sizing.settled or sizing.rising
            outcome = _sized(
                config, state, sizing, want, why, current, (fresh, young), cold_start_s, now
            )
    changed = state.last_desired is None or outcome.desired != state.last_desired
    decision = Decision(
        desired=outcome.desired,
        reason=outcome.reason,
        mode=Mode.STABLE,
        per_signal={SignalKind.CONCURRENCY: sizing.replicas},
        message=outcome.message,
        missing_signals=() if fresh else tuple(config.configured_signals()),
        slo=SloReport(
            slo_ttft_s=slo_ttft_s,
            attainment=config.slo_attainment,
            capacity_tokens_per_s=goal.prefill_per_s,
            capacity_learned=slo.capacity.trusted or slo.fit.trusted,
            sized_replicas=sizing.replicas,
            late_share=sizing.late_share,
            requests_per_s=slo.history.request_rate(),
            measured_attainment=slo.measured.share,
            measured_first_tokens=slo.measured.counted,
            decode_tokens_per_s=slo.fit.decode_tokens_per_s(config.slo_tpot_s),
            decode_slots=slo.fit.slots,
            binding=sizing.binding,
            hopeless_share=sizing.hopeless_share,
            reachable=sizing.reachable,
            goal_replicas=sizing.goal_replicas,
            next_replica=sizing.next_replica,
            headroom=goal.headroom,
            slo_tpot_s=config.slo_tpot_s,
            awake_needed=_awake_needed(config, observation, want, outcome.desired),
        ),
    )
    new_state = replace(
        state,
        slo=slo,
        delay_hold=outcome.hold,
        panic_crossed_s=None,
        panic_desired=0,
        idle_since_s=slo.gaps.idle_since_s,
        last_desired=outcome.desired,
        last_change_s=now if changed else state.last_change_s,
        last_reason=outcome.reason,
    )
    return decision, new_state


def _stay(
    config: ScalingConfig,
    observation: Observation,
    odds: KeepAliveOdds,
    slo: SloState,
    cold_start_s: float,
    now: float,
) -> tuple[bool, str]:
    """Step 4's question, whether an idle target keeps its replicas, and why: the
    keep-alive odds, or with the warm tier, sleeping against zero on expected cost."""
    sleepers = observation.sleepers
    if config.sleep_after_s is None or sleepers is None or config.slo_ttft_s is None:
        return odds.keep, odds.why
    rungs = Rungs(
        wake_s={sleepers.level: sleepers.wake_s},
        cold_start_s=max(cold_start_s, 1e-3),
        wake_budget_s=config.slo_ttft_s,
        attainment=config.slo_attainment,
    )
    depth = choose_depth(
        slo.gaps,
        rungs=rungs,
        now=now,
        device_share=min(1.0, max(0.0, sleepers.device_share)),
        allowed=(sleepers.level, ZERO),
    )
    where = "beside a serving model" if sleepers.device_share == 0 else "holding its device"
    return depth.rung != ZERO, f"asleep {where}: {depth.why}"


def _awake_needed(
    config: ScalingConfig, observation: Observation, want: int, desired: int
) -> int | None:
    """The replicas the load needs awake now, when the warm tier may hold the rest of
    ``desired`` asleep (a wake within the objective); None: all stay awake."""
    sleepers = observation.sleepers
    if config.sleep_after_s is None or sleepers is None or config.slo_ttft_s is None:
        return None
    if sleepers.wake_s > config.slo_ttft_s or desired == 0:
        return None
    return min(desired, max(1, config.min_scale, want))


def _from_zero(
    config: ScalingConfig, observation: Observation, want: int, *, busy: bool
) -> _Outcome:
    if observation.activation_requested or busy:
        desired = min(max(config.initial_scale, config.min_scale, want), config.max_scale)
        why = "activation" if observation.activation_requested else "demand while at zero"
        return _Outcome(
            desired,
            Reason.ACTIVATED,
            f"woke from zero on {why} to {desired} (sizing wants {want})",
            MaxHold(),
        )
    if config.min_scale > 0:
        desired = min(config.min_scale, config.max_scale)
        return _Outcome(desired, Reason.SCALED_UP, f"raised to min-scale {desired}", MaxHold())
    return _Outcome(0, Reason.STEADY, "at zero, no demand", MaxHold())


def _sized(
    config: ScalingConfig,
    state: PolicyState,
    sizing: Sizing,
    want: int,
    why: str,
    current: int,
    fresh_young: tuple[bool, bool],
    cold_start_s: float,
    now: float,
) -> _Outcome:
    """Steps 5 and 6: hold for a cold start, keep on stale data or a short history, bound."""
    fresh, young = fresh_young
    floor = max(1, config.min_scale)
    target = max(want, floor)
    # The warm floor from recent peaks fades one replica per cold start.
    window_s = floor_window_s(cold_start_s, max(target, current))
    hold = state.delay_hold
    if state.slo is None:
        # The replicas found at the first decision (a scaler restarted, a fleet
        # taken over) fade as a peak wanted a cold start ago would: one per cold
        # start from now, not all at once.
        hold = hold.record(current, now - cold_start_s, window_s=window_s)
    hold = hold.record(target, now, window_s=window_s)
    held = fading_floor(hold, now, cold_start_s=cold_start_s) or target
    desired = max(target, held)
    if not fresh or young:
        desired = max(desired, current)
    desired = min(desired, config.max_scale)
    if desired > current:
        return _Outcome(desired, Reason.SCALED_UP, sizing.why, hold)
    if desired < current:
        return _Outcome(desired, Reason.SCALED_DOWN, sizing.why, hold)
    if not fresh and target < current:
        return _Outcome(desired, Reason.NO_DATA, f"a source is stale: keeping {desired}", hold)
    if young and target < current:
        return _Outcome(
            desired,
            Reason.HOLDING,
            f"sizing wants {target}; keeping {desired} while the history is shorter than a"
            " cold start or the load rises",
            hold,
        )
    if held > target:
        return _Outcome(
            desired,
            Reason.HOLDING,
            f"sizing wants {target}; the floor from recent peaks holds {desired}, fading one"
            f" replica per cold start ({cold_start_s:.0f}s)",
            hold,
        )
    if sizing.replicas == 0:
        return _Outcome(desired, Reason.STEADY, f"idle, kept: {why}", hold)
    return _Outcome(desired, Reason.STEADY, sizing.why, hold)
