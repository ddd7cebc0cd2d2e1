"""One target's placement step: from a decision's target to the writes and Events it needs.

The controller calls :func:`plan_placement` after each decision (and at once
on an interruption notice) with what it sees: the target (the decision's
desired replicas), the target's pods as :class:`PodFacts`, whether the
companion exists and is current, whether the user's Deployment is pinned,
the :class:`FallbackState` it kept, and the wall clock. It gets back a
:class:`PlacementPlan`: the replicas for each Deployment, the companion and
pin writes, the Events, and the state to keep. The actuator carries it out.

Per policy:

- ``on-demand``: everything on the user's Deployment; a companion left
  from a spot policy is deleted once the user's Deployment has the whole
  target Ready, and the pin taken off (the policy went back to on-demand);
- ``spot`` / ``spot-with-on-demand-baseline``: the companion is created
  (or rebuilt when the user's template changed), the user's Deployment is
  pinned to on-demand once (Event ``OnDemandPinned``: a one-time rollout),
  and the split of :mod:`~scaler.policy.placement.fallback` sizes both.

Spot replicas the split asks for beyond the spot pods that exist count as
starting: the companion's ReplicaSet is about to create them, and their
``pending-timeout`` starts then. A spot replica that is deleted (drained,
evicted) is replaced by a new Pending pod at once, which counts as starting
too; the cover raised while it was doomed is released only when its
replacement is Ready.

Events: ``SpotFallback`` when on-demand starts covering spot (or covers
more), naming why the spot replicas do not serve; ``SpotRecovered`` when the
cover is released because spot serves again, back to the baseline (not when
the cover ends because no spot is asked for any more, as at scale to zero).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scaler.policy.api import PlacementConfig
from scaler.policy.events import ON_DEMAND_PINNED, SPOT_FALLBACK, SPOT_RECOVERED
from scaler.policy.placement.availability import CapacityType, PodFacts, SpotCounts, count_spot
from scaler.policy.placement.fallback import DEFAULT_RELEASE_HOLD_S, FallbackState, plan_split
from scaler.policy.placement.split import Split, split

__all__ = ["ON_DEMAND_PINNED", "SPOT_FALLBACK", "SPOT_RECOVERED", "PlacementPlan", "plan_placement"]


@dataclass(frozen=True, slots=True)
class PlacementPlan:
    """What one placement step asks for (see the module docstring).

    ``companion_replicas`` is ``None`` when no companion is wanted. Events
    are ``(reason, message)`` pairs, all ``Normal`` except ``SpotFallback``
    (a ``Warning``: capacity was lost).
    """

    split: Split
    state: FallbackState
    counts: SpotCounts
    on_demand_replicas: int
    companion_replicas: int | None
    ensure_companion: bool = False
    delete_companion: bool = False
    pin: bool = False
    unpin: bool = False
    events: tuple[tuple[str, str], ...] = ()


def _replicas(count: int, kind: str) -> str:
    """``1 spot replica``, ``3 spot replicas``."""
    return f"{count} {kind} replica{'' if count == 1 else 's'}"


def _why(counts: SpotCounts) -> str:
    reasons = Counter(str(r) for r in counts.unavailable.values())
    if not reasons:
        return "not yet available"
    return ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))


def plan_placement(
    *,
    placement: PlacementConfig,
    target: int,
    pods: Sequence[PodFacts],
    companion_name: str,
    companion_exists: bool,
    companion_current: bool,
    pinned: bool,
    pin_description: str,
    user_ready: int = 0,
    state: FallbackState,
    now_wall: float,
    hold_s: float = DEFAULT_RELEASE_HOLD_S,
) -> PlacementPlan:
    """This step's plan (see the module docstring). ``now_wall``: epoch seconds, the
    clock of the pods' creation times (for ``pending-timeout``) and of the hold.
    ``user_ready``: Ready replicas of the user's Deployment (wherever they run:
    once unpinned they may land on any capacity)."""
    counts = count_spot(pods, now=now_wall, pending_timeout_s=placement.pending_timeout_s)
    if placement.policy != "on-demand":
        # Spot replicas asked for but not created yet (the companion was just
        # made or scaled up; the ReplicaSet creates them within moments) are
        # starting, like a pod Pending for 0 s: counting them as missing would
        # put the whole target on demand every time spot scales up.
        asked = split(target=target, placement=placement, ready_spot=0).spot
        existing = sum(
            1 for p in pods if p.capacity_type is CapacityType.SPOT and not p.terminating
        )
        if asked > existing:
            counts = replace(counts, available=counts.available + asked - existing)
    if placement.policy == "on-demand":
        # The spot half goes once the user's Deployment serves the whole target,
        # so going back to on-demand leaves no gap while its pods load.
        return PlacementPlan(
            split=Split(spot=0, on_demand=target),
            state=FallbackState(),
            counts=counts,
            on_demand_replicas=target,
            companion_replicas=None,
            delete_companion=companion_exists and user_ready >= target,
            unpin=pinned,
        )
    result, new_state = plan_split(
        target=target,
        placement=placement,
        spot=counts,
        state=state,
        now=now_wall,
        hold_s=hold_s,
    )
    events: list[tuple[str, str]] = []
    if not pinned:
        events.append(
            (
                ON_DEMAND_PINNED,
                f"pinned to on-demand capacity ({pin_description}) for placement policy "
                f"{placement.policy}: a one-time rollout of this Deployment's pods; spot "
                f"replicas run in Deployment {companion_name}",
            )
        )
    # Compare what the state covers (spot replicas), not the capped on-demand count.
    if new_state.covered > min(state.covered, result.spot):
        events.append(
            (
                SPOT_FALLBACK,
                f"on-demand covers {result.covering} of {_replicas(result.spot, 'spot')} "
                f"({_why(counts)}); on-demand {result.on_demand}, spot {result.spot}",
            )
        )
    elif state.covered > 0 and new_state.covered == 0 and result.spot > 0:
        # Only spot that serves again is a recovery: a cover that ends because no
        # spot is asked for any more (the model went to zero or to its baseline)
        # is the scale's own Event, not spot's.
        events.append(
            (
                SPOT_RECOVERED,
                f"{_replicas(counts.ready, 'spot')} ready; on-demand back to {result.on_demand} "
                f"(spot {result.spot})",
            )
        )
    return PlacementPlan(
        split=result,
        state=new_state,
        counts=counts,
        on_demand_replicas=result.on_demand,
        companion_replicas=result.spot,
        ensure_companion=not companion_exists or not companion_current,
        pin=not pinned,
        events=tuple(events),
    )
