"""The spot/on-demand split of docs/placement.md (SkyServe's SpotHedge), as a pure function.

``split(target=..., placement=..., ready_spot=...)`` says how many replicas
the spot companion Deployment and the user's (on-demand) Deployment should
ask for this tick:

- ``spot = target + overprovision - baseline`` (at least 0);
- ``on_demand = min(baseline + max(0, spot - ready_spot), target)`` with
  ``fallback: dynamic`` (on-demand covers the spot replicas that are not
  ready, and gives them back as spot becomes ready), or just the baseline
  (at most ``target``) with ``fallback: none``;
- at target 0 both are 0.

Main decision, per policy: ``on-demand`` puts everything on demand;
``spot-with-on-demand-baseline`` uses the baseline as configured; ``spot``
uses a baseline of 0 but honours ``fallback`` (the default, ``dynamic``, is
SpotHedge's point: spot first, on-demand only while spot is not ready; set
``fallback: none`` for spot only). Which spot replicas count as ready (not
pending past the timeout, not evicted, not on a node marked for
interruption) is the caller's business: it passes ``ready_spot``.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.policy.api import PlacementConfig

__all__ = ["Split", "split"]


@dataclass(frozen=True, slots=True)
class Split:
    """Replicas to ask for per capacity type.

    ``covering`` is the part of ``on_demand`` that stands in for spot
    replicas that are not ready (an ``SpotFallback`` Event when it becomes
    positive, ``SpotRecovered`` when it returns to 0).
    """

    spot: int
    on_demand: int
    covering: int = 0

    @property
    def total(self) -> int:
        return self.spot + self.on_demand


def split(*, target: int, placement: PlacementConfig, ready_spot: int) -> Split:
    """Split ``target`` replicas between spot and on-demand capacity (see the module docstring)."""
    if target < 0:
        raise ValueError(f"target must be >= 0 replicas, got {target}")
    if ready_spot < 0:
        raise ValueError(f"ready_spot must be >= 0 replicas, got {ready_spot}")
    if placement.policy == "on-demand":
        return Split(spot=0, on_demand=target)
    if placement.policy == "spot":
        baseline = 0
    elif placement.policy == "spot-with-on-demand-baseline":
        baseline = placement.on_demand_baseline
    else:
        raise ValueError(
            f"unknown placement policy {placement.policy!r}; "
            "allowed: on-demand, spot, spot-with-on-demand-baseline"
        )
    if placement.fallback not in ("dynamic", "none"):
        raise ValueError(f"unknown fallback {placement.fallback!r}; allowed: dynamic, none")
    if target == 0:
        return Split(spot=0, on_demand=0)
    spot = max(0, target + placement.spot_overprovision - baseline)
    base = min(baseline, target)
    if placement.fallback == "none":
        return Split(spot=spot, on_demand=base)
    on_demand = min(baseline + max(0, spot - ready_spot), target)
    return Split(spot=spot, on_demand=on_demand, covering=max(0, on_demand - base))
