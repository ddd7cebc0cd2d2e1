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

A model that lists GPU shapes (docs/shapes.md) is decided by the
:class:`~scaler.placement.shaper.Shaper` instead: each shape sized alone,
the cheapest mix, the hand-over; the spot split then applies to the
replicas of the shape the user's own Deployment runs. A model that lists
none is decided as above, and any shape companions it kept are planned away.

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

from scaler.kube.types import CompanionInfo, TargetSnapshot
from scaler.placement.placer import Placer, pair_counts
from scaler.placement.shaper import Shaper, ShapesMade
from scaler.policy.api import Decision, ScalingConfig, Sleepers
from scaler.policy.decide import PolicyState
from scaler.policy.placement.fallback import FallbackState
from scaler.policy.placement.plan import PlacementPlan
from scaler.policy.protocol import Policy
from scaler.policy.shapes.decide import ShapesState
from scaler.policy.shapes.declarations import ChosenShape
from scaler.signals.hub import SignalHub, SignalView
from scaler.writes.plan import Decided

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
    shapes: ShapesMade | None = None  # the shape step, for a model with shape companions


class Decider:
    """Observation, policy and placement split, for any target."""

    def __init__(
        self,
        *,
        signals: SignalHub,
        policy: Policy,
        placer: Placer | None,
        wall_clock: Callable[[], float],
        shaper: Shaper | None = None,
        sleepers: Callable[[str, TargetSnapshot], Sleepers | None] | None = None,
    ) -> None:
        self.signals = signals
        self.policy = policy
        self._placer = placer
        self._shaper = shaper
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
        shapes: tuple[ChosenShape, ...] = (),
        shapes_state: ShapesState | None = None,
    ) -> Made:
        """Steps 2 to 4 of the module docstring, on the view already observed;
        ``shapes``: the model's GPU shapes (module docstring), ``shapes_state`` what
        its last shape step left (``None``: the first)."""
        placer = self._placer
        companion = placer.companion(snap.deployment.key) if placer is not None else None
        if shapes and self._shaper is not None:
            made = self._shaper.decide(
                snap,
                config,
                shapes,
                view,
                state=shapes_state,
                spot_replicas=companion.spec_replicas if companion is not None else 0,
                activation=activation,
                now=now,
            )
            assert made.outcome is not None
            placement = self._split(snap, companion, config, made.plan.user_replicas, fallback)
            spot_ready = companion.ready_replicas if companion is not None else 0
            ready = snap.deployment.ready_replicas + spot_ready
            ready += sum(c.ready_replicas for c in made.companions.values())
            return Made(
                view,
                made.outcome.decision,
                made.outcome.state,
                placement,
                companion,
                ready,
                made.total_before,
                made,
            )
        ready, current = pair_counts(snap.deployment, companion, last_desired)
        observation = view.observation(ready=ready, spec=current, activation=activation)
        if self._sleepers is not None and config.sleep_after_s is not None:
            observation = replace(observation, sleepers=self._sleepers(snap.deployment.key, snap))
        decision, state = self.policy.decide(
            config=config, observation=observation, state=state, now=now
        )
        placement = self._split(snap, companion, config, decision.desired, fallback)
        leftover = self._shaper.leftover(snap, decision.desired) if self._shaper else None
        return Made(view, decision, state, placement, companion, ready, current, leftover)

    def _split(
        self,
        snap: TargetSnapshot,
        companion: CompanionInfo | None,
        config: ScalingConfig,
        target: int,
        fallback: FallbackState | None,
    ) -> PlacementPlan | None:
        """Step 4: ``target`` split between on-demand and spot (None: no placer)."""
        if self._placer is None:
            return None
        return self._placer.plan(
            snap,
            companion=companion,
            placement=config.placement,
            target=target,
            state=fallback,
            now_wall=self._wall_clock(),
        )


def decided(
    decision: Decision | None,
    *,
    problem: str | None,
    view: SignalView | None,
    placement: PlacementPlan | None = None,
    companion: CompanionInfo | None = None,
    current: int | None = None,
    shapes: ShapesMade | None = None,
) -> Decided:
    """What the actuator plans from: ``decision`` with what it saw (``companion``
    and ``current``: the pair as the decision counted it, with a placement; with
    shapes, the model's scale before, over every shape)."""
    shaped = shapes is not None and shapes.outcome is not None
    return Decided(
        decision=decision,
        problem=problem,
        readings=view.readings if view is not None else {},
        pod_load=view.combined.pod_load if view is not None else {},
        placement=placement,
        companion_replicas=companion.spec_replicas if companion is not None else None,
        total_before=current if placement is not None or shaped else None,
        shapes=shapes,
    )
