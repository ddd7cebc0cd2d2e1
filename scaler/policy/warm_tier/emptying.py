"""Moving pods off a device: to give it back, or because its sleepers cannot wake there (pure).

A device is paid for whole while any pod is on it
(:mod:`scaler.policy.warm_tier.gpu_use`) and given back once its last pod
leaves. A pod cannot move in Kubernetes, so each one leaves in one of two
ways:

- **moved**: a replacement pod starts on another device (its cold start
  loads the model there; :func:`scaler.policy.warm_tier.sites.choose_site`
  finds the room, keeping room to wake for the sleepers there), and once it
  is ready the old pod is removed. A request that comes meanwhile is served
  by the old pod where it is (woken if it sleeps), so a move costs no request
  anything; what it costs is the replacement's cold start, the share of its
  new device it holds while loading (``move_cost_s``, device-seconds);
- **to zero** (sleepers only, where allowed): its next request waits a cold
  start, priced by the expected-cost rule
  (:func:`scaler.policy.warm_tier.depth.choose_depth`'s cost of zero).

A model asked for more often than every ``busy_gap_s`` moves only to a
device where it can stay awake without taking the room its new neighbours
need to wake (:func:`scaler.policy.warm_tier.room.place_pod` counts it busy).

:func:`plan_emptying` gives a device back: every pod must have a way out,
and their costs together must be less than keeping the device
(``keep_cost_s``: for a device of sleepers alone, as long as it has held only
sleepers, the longer a device has gone without serving the longer it is
expected to go on, as the keep-alive rule's prior reasons about idle time;
for a device the pool could do without, the horizon of one cold start).

:func:`plan_rehoming` serves a device whose awake models are too busy ever
to leave a hole (:func:`scaler.policy.warm_tier.room.holeless`), so that every
wake of a sleeper there waits for a sleep beside it and misses the objective:
its sleepers move to devices that keep room to wake, as far as there is
room, and the device keeps serving its busy models.

Main decision: emptying is all or nothing. Moving some pods off a device
that keeps others saves no device-hour and spends cold starts; a plan either
frees the device or is not made. Within their role targets are ranked
fullest first, so pods flow from the emptiest devices to the fullest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from scaler.policy.idle.keep_alive import IdleGaps
from scaler.policy.warm_tier.depth import ZERO, Rungs, choose_depth, miss_cost
from scaler.policy.warm_tier.gpu_use import GpuUse
from scaler.policy.warm_tier.room import Resident
from scaler.policy.warm_tier.sites import Site, choose_site

__all__ = ["Emptying", "Leaver", "MoveCosts", "plan_emptying", "plan_rehoming"]


@dataclass(frozen=True, slots=True)
class Leaver:
    """A pod on the device to empty: asleep, or awake and idle."""

    pod: str
    target: str
    gaps: IdleGaps
    host_mib: int  # what its sleep holds in host memory (its replacement needs the same)
    asleep: bool = True
    busy: bool = False  # a busy model: it stays awake where it goes


@dataclass(frozen=True, slots=True)
class MoveCosts:
    """What a move takes: a replacement of ``new_mib`` awake, room for ``wake_need_mib``
    kept beside sleepers, ``move_cost_s`` device-seconds, which models count busy, and
    the wakes a replacement's cold start may put at risk where it goes
    (:func:`~scaler.policy.warm_tier.room.place_pod`'s ``max_blocked``)."""

    new_mib: int
    wake_need_mib: int
    move_cost_s: float
    busy_gap_s: float = 0.0
    max_blocked: float = 0.0


@dataclass(frozen=True, slots=True)
class Emptying:
    """``moves``: (pod, device its replacement starts on); ``zeros``: pods removed."""

    moves: tuple[tuple[str, str], ...]
    zeros: tuple[str, ...]
    cost_s: float  # device-seconds, against ``keep_cost_s``


def _placed(site: Site, pod: str, costs: MoveCosts, host_mib: int) -> Site:
    """``site`` with a replacement starting on it (busy, awake-sized)."""
    starting = Resident(
        target="", pod=pod, awake=True, busy=True, used_mib=costs.new_mib, idle_since_s=None
    )
    return replace(
        site,
        free_slices=site.free_slices - 1,
        residents=(*site.residents, starting),
        host_free_mib=site.host_free_mib - host_mib,
    )


def _destination(leaver: Leaver, sites: dict[str, Site], costs: MoveCosts) -> str | None:
    """The device a replacement of ``leaver`` may start on, by its role
    (:func:`~scaler.policy.warm_tier.sites.choose_site`); None: none without
    putting anyone there to sleep or any wake there at risk."""
    spot = choose_site(
        sites.values(),
        new_mib=costs.new_mib,
        wake_need_mib=costs.wake_need_mib,
        needs_host_mib=leaver.host_mib,
        uses=(GpuUse.SERVING, GpuUse.SLEEPING_ONLY),
        busy_gap_s=costs.busy_gap_s,
        max_blocked=costs.max_blocked,
        busy=leaver.busy,
    )
    return spot.device if spot is not None and not spot.sleep else None


def plan_emptying(
    leavers: Sequence[Leaver],
    *,
    sites: Sequence[Site],
    keep_cost_s: float,
    rungs: Rungs,
    now: float,
    costs: MoveCosts,
    zero_allowed: bool = True,
) -> Emptying | None:
    """How to give a device of ``leavers`` back (module docstring); None: keep it.

    ``sites``: the other held devices that may take replacements.
    """
    if not leavers:
        return None
    open_sites = {s.device: s for s in sites}
    moves: list[tuple[str, str]] = []
    zeros: list[str] = []
    total = 0.0
    # The model most likely to come back first gets the first pick of the room.
    order = sorted(leavers, key=lambda s: -s.gaps.p_request_within(rungs.cold_start_s, now))
    for leaver in order:
        zero = (
            choose_depth(
                leaver.gaps, rungs=rungs, now=now, device_share=1.0, allowed=(ZERO,)
            ).costs[ZERO]
            if zero_allowed and leaver.asleep
            else None
        )
        device = _destination(leaver, open_sites, costs)
        if device is not None and (zero is None or costs.move_cost_s <= zero):
            moves.append((leaver.pod, device))
            open_sites[device] = _placed(open_sites[device], leaver.pod, costs, leaver.host_mib)
            total += costs.move_cost_s
        elif zero is not None:
            zeros.append(leaver.pod)
            total += zero
        else:
            return None
        if total >= keep_cost_s:
            return None
    return Emptying(tuple(moves), tuple(zeros), total)


def plan_rehoming(
    sleepers: Sequence[Leaver],
    *,
    sites: Sequence[Site],
    rungs: Rungs,
    now: float,
    costs: MoveCosts,
    stay_back_s: float,
) -> tuple[tuple[str, str], ...]:
    """Moves (pod, device) for the sleepers of a device where they cannot wake in
    time (module docstring): each that has room elsewhere and whose next wake
    where it is (``stay_back_s``: a sleep beside it, then its own wake) is
    expected to cost more than its move."""
    open_sites = {s.device: s for s in sites}
    moves: list[tuple[str, str]] = []
    order = sorted(sleepers, key=lambda s: -s.gaps.p_request_within(rungs.cold_start_s, now))
    for sleeper in order:
        stay = miss_cost(sleeper.gaps, rungs=rungs, now=now, back_s=stay_back_s)
        if stay <= costs.move_cost_s:
            continue
        device = _destination(sleeper, open_sites, costs)
        if device is None:
            continue
        moves.append((sleeper.pod, device))
        open_sites[device] = _placed(open_sites[device], sleeper.pod, costs, sleeper.host_mib)
    return tuple(moves)
