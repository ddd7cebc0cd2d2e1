"""On-demand cover for spot that is not serving, raised at once and released with a hold.

:func:`plan_split` wraps the stateless :func:`~scaler.policy.placement.split.split`
with the one piece of memory placement needs: how many spot replicas
on-demand currently stands in for (``covered``). Each decision, and at once
on an interruption notice, the controller passes the spot counts of
:mod:`~scaler.policy.placement.availability` and ``now``:

- **up at once**: ``need = spot asked - available spot``; when ``need`` is
  above ``covered``, ``covered`` becomes ``need`` in this very decision (a
  notice or a stuck Pending replica is covered now, not after a window);
- **down only against ready spot, after a hold**: on-demand that covered is
  released only for spot replicas that are *Ready* (not merely starting:
  a replacement that is still loading serves nobody), and only once the
  lower value has held for ``hold_s`` (the release hold). A spot pool that
  flaps (ready, preempted, ready) then does not roll on-demand pods up and
  down each time; while a lower value is pending, ``covered`` drops to the
  highest value wanted during the hold, never lower.

So the split counts ``spot asked - covered`` spot replicas as serving.
Within the split's formula that keeps the plan's serving total (spot it
counts plus on-demand) at most ``target + spot-overprovision``, and, with
``fallback: dynamic``, at least the target while on-demand capacity exists;
during a release hold, replacement spot that is already Ready serves on top
of the cover it will replace (the point of the hold).

With ``policy: on-demand``, ``fallback: none`` or at target 0 nothing is
covered and the state resets.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.policy.api import PlacementConfig
from scaler.policy.placement.availability import SpotCounts
from scaler.policy.placement.split import Split, split

__all__ = ["DEFAULT_RELEASE_HOLD_S", "FallbackState", "fallback_event", "plan_split"]

#: How long a lower cover must be wanted before on-demand is released (seconds).
#: Long enough to see a freshly Ready spot replica survive its first minute
#: of load, short against the hour-scale lifetime of a spot node.
DEFAULT_RELEASE_HOLD_S = 60.0


@dataclass(frozen=True, slots=True)
class FallbackState:
    """What :func:`plan_split` remembers between decisions (start with ``FallbackState()``).

    ``covered``: spot replicas on-demand stands in for. ``lower_since``:
    when a lower cover was first wanted (``None`` while none is), and
    ``lower_max`` the highest lower cover wanted since then.
    """

    covered: int = 0
    lower_since: float | None = None
    lower_max: int = 0


def plan_split(
    *,
    target: int,
    placement: PlacementConfig,
    spot: SpotCounts,
    state: FallbackState,
    now: float,
    hold_s: float = DEFAULT_RELEASE_HOLD_S,
) -> tuple[Split, FallbackState]:
    """This decision's split and the state for the next one (see the module docstring)."""
    if hold_s < 0:
        raise ValueError(f"hold_s must be >= 0 seconds, got {hold_s}")
    if spot.ready > spot.available:
        raise ValueError(
            f"ready spot ({spot.ready}) cannot exceed available spot ({spot.available})"
        )
    # What spot is asked for does not depend on readiness (the split's property).
    asked = split(target=target, placement=placement, ready_spot=0).spot
    if placement.policy == "on-demand" or placement.fallback == "none" or target == 0:
        return split(target=target, placement=placement, ready_spot=asked), FallbackState()

    need = asked - min(spot.available, asked)
    release_floor = asked - min(spot.ready, asked)
    covered = min(state.covered, asked)
    lower_since, lower_max = state.lower_since, state.lower_max
    if need >= covered:
        covered, lower_since, lower_max = need, None, 0
    else:
        wanted = max(need, min(covered, release_floor))
        if wanted >= covered:
            lower_since, lower_max = None, 0  # nothing Ready to release against
        elif lower_since is None:
            lower_since, lower_max = now, wanted
        else:
            lower_max = max(lower_max, wanted)
        if lower_since is not None and now - lower_since >= hold_s:
            covered, lower_since, lower_max = lower_max, None, 0
            if wanted < covered:  # still lower now: the next hold starts at once
                lower_since, lower_max = now, wanted
    covered = min(covered, asked)  # a lower value held from a larger target
    lower_max = min(lower_max, covered)
    result = split(target=target, placement=placement, ready_spot=asked - covered)
    return result, FallbackState(covered=covered, lower_since=lower_since, lower_max=lower_max)


def fallback_event(before: Split, after: Split) -> str | None:
    """``SpotFallback`` when on-demand starts covering (or covers more), ``SpotRecovered`` at 0."""
    if after.covering > before.covering:
        return "SpotFallback"
    if before.covering > 0 and after.covering == 0:
        return "SpotRecovered"
    return None
