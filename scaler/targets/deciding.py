"""One decision for one target: observe, count, decide, split.

:class:`Decider` is what every target's reconciler uses to decide (every
scaler replica decides, leader or not, so a follower that takes over has a
policy state long past its settling time and knows what spot covers):

1. the target's observation out of the signal hub (a signal is not fresh
   when any source behind it is stale);
2. ready and current replicas, with a spot companion the whole pair
   (:func:`~scaler.placement.placer.pair_counts`): the companion is looked
   up and the pair counted once per decision, and the split reuses both;
3. the pure policy, with the target's state (the new state comes back);
4. with a :class:`~scaler.placement.placer.Placer`, the decided replicas
   split between on-demand and spot.

It returns a :class:`Made`, plain values the reconciler keeps, and
:func:`decided` turns it into what the actuator plans from.

Main decision: a pair's current scale is the last target decided (the
status record's), not the sum of the two Deployments, which includes
on-demand cover and spot over-provisioning; with the annotation's alone, a
change whose status write failed would be announced again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from scaler.actuator import Decided
from scaler.kube.types import CompanionInfo, TargetSnapshot
from scaler.placement.placer import Placer, pair_counts
from scaler.policy.api import Decision, ScalingConfig, Sleepers
from scaler.policy.decide import PolicyState
from scaler.policy.placement.fallback import FallbackState
from scaler.policy.placement.plan import PlacementPlan
from scaler.policy.protocol import Policy
from scaler.signals.hub import SignalHub, SignalView

__all__ = ["Decider", "Made", "decided"]


@dataclass(frozen=True, slots=True)
class Made:
    """One decision and what it saw."""

    view: SignalView
    decision: Decision
    state: PolicyState
    placement: PlacementPlan | None
    companion: CompanionInfo | None
    ready: int  # the pair's ready replicas
    current: int  # the pair's current scale as the decision counted it


class Decider:
    """Observation, policy and placement split, for any target."""

    def __init__(
        self,
        *,
        signals: SignalHub,
        policy: Policy,
        placer: Placer | None,
        wall_clock: Callable[[], float],
        sleepers: Callable[[str, TargetSnapshot], Sleepers | None] | None = None,
    ) -> None:
        self.signals = signals
        self.policy = policy
        self._placer = placer
        # The warm tier's sleepers of a target, for the policy (one plan with the tier).
        self._sleepers = sleepers
        # Placement's pending-timeout is measured against the pods'
        # creationTimestamp, which the API server writes in wall time.
        self._wall_clock = wall_clock

    def initial_state(self, now: float) -> PolicyState:
        return self.policy.initial_state(now)

    def pair(self, snap: TargetSnapshot, last_desired: object) -> tuple[CompanionInfo | None, int]:
        """The spot companion (if any) and the pair's current scale."""
        placer = self._placer
        companion = placer.companion(snap.deployment.key) if placer is not None else None
        return companion, pair_counts(snap.deployment, companion, last_desired)[1]

    def decide(
        self,
        snap: TargetSnapshot,
        config: ScalingConfig,
        view: SignalView,
        *,
        state: PolicyState,
        fallback: FallbackState | None,
        last_desired: object,
        activation: bool,
        now: float,
    ) -> Made:
        """Steps 2 to 4 of the module docstring, on the view already observed."""
        placer = self._placer
        companion = placer.companion(snap.deployment.key) if placer is not None else None
        ready, current = pair_counts(snap.deployment, companion, last_desired)
        observation = view.observation(ready=ready, spec=current, activation=activation)
        if self._sleepers is not None and config.sleep_after_s is not None:
            observation = replace(observation, sleepers=self._sleepers(snap.deployment.key, snap))
        decision, state = self.policy.decide(
            config=config, observation=observation, state=state, now=now
        )
        placement = None
        if placer is not None:
            placement = placer.plan(
                snap,
                companion=companion,
                placement=config.placement,
                target=decision.desired,
                state=fallback,
                now_wall=self._wall_clock(),
            )
        return Made(view, decision, state, placement, companion, ready, current)


def decided(
    decision: Decision | None,
    *,
    problem: str | None,
    view: SignalView | None,
    placement: PlacementPlan | None = None,
    companion: CompanionInfo | None = None,
    current: int | None = None,
) -> Decided:
    """What the actuator plans from: ``decision`` with what it saw (``companion``
    and ``current``: the pair as the decision counted it, with a placement)."""
    return Decided(
        decision=decision,
        problem=problem,
        readings=view.readings if view is not None else {},
        pod_load=view.combined.pod_load if view is not None else {},
        placement=placement,
        companion_replicas=companion.spec_replicas if companion is not None else None,
        total_before=current if placement is not None else None,
    )
