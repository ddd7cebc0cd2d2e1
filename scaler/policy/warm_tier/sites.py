"""Where a new pod of a warm-tier model goes, by the role it will play there (pure).

A device has two kinds of tenant in the warm tier, and room for few of the
first: with an 8B model's weights and KV cache, two fit awake on an 80 GB
device, and every sleeper there needs one of those two places free to wake
into within the objective (a wake that must first put a neighbour to sleep
waits for its handoff and its sleep: some 3 s).

- **busy models** (asked for more often than every ``busy_gap_s``): awake
  nearly all the time, so each holds a place for good. Two of them share a
  device best with no sleepers (nothing there needs room to wake), one with
  sleepers leaves them the other place;
- **sleepers** (everyone else, and a model not seen yet): awake only around
  their requests. They pack many to a device (a slice and a residue each,
  and their weights in the node's host memory at level 1), best where no
  busy model takes a place, so that two can wake at once.

So a new pod, a cold start from zero or a move's replacement, goes to a
held device with room (:func:`choose_site`):

- the device plugin has a time-sliced replica left on it (``free_slices``);
- its memory takes the pod awake (its cold start loads the weights and
  the KV cache) without putting a busy model to sleep, and, when sleepers are
  there, still leaves one of them room to wake beside it
  (:func:`scaler.policy.warm_tier.room.place_pod`: the new pod is busy for its
  whole cold start), or leaves it only to sleepers unlikely to be asked for
  meanwhile (``max_blocked``: their chances of a request summed);
- its node's host memory holds the weights at level 1 when that is the
  level it will sleep at (``needs_host_mib``);

and among those: the fewest wakes put at risk first; then one where nobody
must be put to sleep first; then, for a busy model,
a device of busy models without sleepers (a pair), for anything else the
device with the fewest busy models; then serving before starting before
sleeping-only (a sleeper beside a serving model costs the bill nothing);
then the fullest (fill a device before the next, so the emptiest can be
given back); then by name, so the choice is stable.

In a cluster the choice is a preference the scheduler honours where it can
(a preferred node affinity for the chosen node: :mod:`scaler.warm.moves`);
the device plugin picks the device within the node. On single-device nodes
the node is the device.

Main decision: this ranks devices already held and never opens one; the
caller opens a new device only when :func:`choose_site` finds none, so the
pool grows only when every device it pays for is full.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scaler.policy.warm_tier.gpu_use import GpuUse
from scaler.policy.warm_tier.room import Resident, busy_model, place_pod

__all__ = ["Site", "SiteChoice", "choose_site", "pair_site"]

_USE_ORDER = {GpuUse.SERVING: 0, GpuUse.STARTING: 1, GpuUse.SLEEPING_ONLY: 2}


@dataclass(frozen=True, slots=True)
class Site:
    """A held device a new pod could go to, as it stands now."""

    device: str
    use: GpuUse
    free_slices: int
    budget_mib: int
    residents: tuple[Resident, ...]
    host_free_mib: int  # its node's host memory not yet taken by level-1 sleepers

    def busy_models(self, busy_gap_s: float) -> int:
        return sum(1 for r in self.residents if busy_model(r, busy_gap_s))

    @property
    def sleepers(self) -> int:
        return sum(1 for r in self.residents if not r.awake)


@dataclass(frozen=True, slots=True)
class SiteChoice:
    """The device chosen and the idle models to put to sleep there first."""

    device: str
    sleep: tuple[str, ...]


def _rank(site: Site, *, busy: bool, busy_gap_s: float) -> tuple[int, int, int, int]:
    """Smaller first (module docstring): by role, use, then fullest."""
    if busy:
        role = (site.sleepers > 0, -site.busy_models(busy_gap_s))
    else:
        role = (False, site.busy_models(busy_gap_s))
    return (int(role[0]), role[1], _USE_ORDER[site.use], -len(site.residents))


def choose_site(
    sites: Iterable[Site],
    *,
    new_mib: int,
    wake_need_mib: int,
    needs_host_mib: int = 0,
    uses: Sequence[GpuUse] = (GpuUse.SERVING, GpuUse.STARTING, GpuUse.SLEEPING_ONLY),
    busy_gap_s: float = 0.0,
    max_blocked: float = 0.0,
    busy: bool = False,
) -> SiteChoice | None:
    """The held device for a new pod of ``new_mib`` awake, or None when none has room.

    ``uses``: the kinds of device that may take it; ``busy``: the pod is a
    busy model's (module docstring).
    """
    ranked = sorted(
        (s for s in sites if s.use in uses),
        key=lambda s: (*_rank(s, busy=busy, busy_gap_s=busy_gap_s), s.device),
    )
    best: tuple[float, bool, int, SiteChoice] | None = None
    for order, site in enumerate(ranked):
        if site.free_slices < 1 or site.host_free_mib < needs_host_mib:
            continue
        plan = place_pod(
            budget_mib=site.budget_mib,
            residents=site.residents,
            new_mib=new_mib,
            wake_need_mib=wake_need_mib,
            busy_gap_s=busy_gap_s,
            max_blocked=max_blocked,
        )
        rank = (plan.blocked, bool(plan.sleep), order)
        if plan.fits and (best is None or rank < best[:3]):
            best = (*rank, SiteChoice(site.device, plan.sleep))
            if rank[:2] == (0.0, False):
                break
    return None if best is None else best[3]


def pair_site(
    sites: Iterable[Site], *, new_mib: int, wake_need_mib: int, busy_gap_s: float
) -> str | None:
    """A device where a busy model now beside sleepers can move to pair with another
    busy model, leaving its sleepers both places to wake in: one with no sleepers
    and a busy model alone, with room for the newcomer awake; None: none."""
    for site in sorted(sites, key=lambda s: (-len(s.residents), s.device)):
        if site.sleepers or site.busy_models(busy_gap_s) != 1 or site.free_slices < 1:
            continue
        plan = place_pod(
            budget_mib=site.budget_mib,
            residents=site.residents,
            new_mib=new_mib,
            wake_need_mib=wake_need_mib,
            busy_gap_s=busy_gap_s,
        )
        if plan.fits and not plan.sleep:
            return site.device
    return None
