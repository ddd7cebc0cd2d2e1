"""What a simulation run is asked for: the rows by name, the knobs they share, the annotations.

:class:`SimulationOptions` holds every knob the rows share (the objective,
the per-replica concurrency target and the replica ceiling, prices, the
world, how autoscalers start, the pool of the warm-tier rows, the fixed-fleet
cache, processes) and checks them when built: an unknown row's name is an
error listing the known ones. Which rows there are is written here once
(:data:`POLICY_NAMES`, :data:`OPTIONAL_POLICIES`, ``always-on-N``), and so
is the set of annotations each Tidal variant runs with
(:func:`tidal_annotations`): ``tidal`` and its spot and pool variants share
one, so that they differ only in what their names say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from scaler.policy import PlacementConfig
from simulator.fleet_cache import FleetCache
from simulator.scorecard import Prices
from simulator.warm_tier import POOL_POLICIES, PoolConfig
from simulator.world import ColdStart, WorldConfig

__all__ = [
    "OPTIONAL_POLICIES",
    "POLICY_NAMES",
    "STARTS",
    "TUNED_ANNOTATIONS",
    "WARM_ANNOTATIONS",
    "SimulationOptions",
    "fixed_size",
    "is_fixed",
    "tidal_annotations",
]

_A = "autoscaling.tidal.dev/"

#: Tidal's tuned knobs: ``python -m simulator.tuning --trace conv`` (a grid
#: over stable window, scale-down delay and panic window on the Azure
#: conversation trace with 60 s cold starts; the fewest GPU-seconds at no
#: loss of SLO attainment, ties to the fewest changed defaults). Result on
#: 2026-11-23: no scale-down delay and a panic window as long as the stable
#: window (60 s, the cold start's length), 4,767 GPU-seconds against the
#: defaults' 7,977 at the same attainment (98.8 %). The panic window joined
#: the grid after the code trace showed it to be what short bursts cost
#: (docs/simulator.md); its value was chosen on the conversation trace, not
#: on the code trace it is scored on.
TUNED_ANNOTATIONS: Mapping[str, str] = {
    _A + "scale-down-delay": "0s",
    _A + "panic-window-percentage": "100",
}

#: The warm tier's defaults for ``tidal-warm``: sleep after a minute idle, at
#: level 1 (weights kept in host RAM: the fastest wake).
WARM_ANNOTATIONS: Mapping[str, str] = {
    _A + "sleep-after": "60s",
    _A + "sleep-level": "1",
}

POLICY_NAMES = (
    "always-on",
    "hpa",
    "keda-http",
    "knative-kpa",
    "knative-tidal-idle",
    "planner",
    "tidal",
    "tidal-tuned",
    "tidal-adaptive",
    "reactive",
    "oracle",
)
#: Run only when named (besides ``always-on-N`` and the pool policies).
OPTIONAL_POLICIES = ("tidal-concurrency",)
STARTS = ("warm", "zero")
_FIXED = re.compile(r"always-on-([1-9][0-9]*)")


@dataclass(frozen=True, slots=True)
class SimulationOptions:
    slo_ttft_s: float = 2.0
    target_concurrency: float = 16.0
    max_replicas: int = 10
    always_on_attainment: float = 0.99
    prices: Prices = field(default_factory=Prices)
    world: WorldConfig = field(default_factory=WorldConfig)
    tidal_annotations: Mapping[str, str] = field(default_factory=dict)
    tuned_annotations: Mapping[str, str] = field(default_factory=lambda: dict(TUNED_ANNOTATIONS))
    policies: tuple[str, ...] = POLICY_NAMES
    spot_placement: PlacementConfig | None = None
    # warm: every autoscaler starts with the fleet the first minute needs; zero: none.
    start: str = "warm"
    # The time-sliced GPUs of tidal-pool and tidal-warm.
    pool: PoolConfig = field(default_factory=PoolConfig)
    warm_annotations: Mapping[str, str] = field(default_factory=lambda: dict(WARM_ANNOTATIONS))
    # Where fixed fleets' runs are reused from (None: each is run; simulator.fleet_cache).
    fleet_cache: FleetCache | None = None
    # Rows run side by side in this many processes (1: one after another, here).
    jobs: int = 1

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise ValueError(f"jobs must be >= 1 process, got {self.jobs}")
        if self.spot_placement is not None and self.spot_placement.policy == "on-demand":
            raise ValueError("spot_placement needs a spot policy, got on-demand")
        known = (*POLICY_NAMES, *OPTIONAL_POLICIES, *POOL_POLICIES)
        unknown = [p for p in self.policies if p not in known and fixed_size(p) is None]
        if unknown:
            raise ValueError(
                f"unknown policies {unknown}; choose from {list(known)} or always-on-N "
                "(a fixed fleet of N >= 1)"
            )
        if self.start not in STARTS:
            raise ValueError(f"unknown start {self.start!r}; choose from {list(STARTS)}")
        if self.max_replicas < 1:
            raise ValueError(f"max replicas must be >= 1, got {self.max_replicas}")
        if not 0 < self.always_on_attainment <= 1:
            raise ValueError(
                f"the always-on attainment goal is a share within (0, 1], got "
                f"{self.always_on_attainment}"
            )

    @property
    def cold_start(self) -> ColdStart:
        return self.world.cold_start

    def slo_annotations(self) -> dict[str, str]:
        """The ``tidal`` row's: the caller's annotations, with the scorecard's
        objective as ``slo-ttft`` unless they set one."""
        return {_A + "slo-ttft": f"{self.slo_ttft_s:g}s", **self.tidal_annotations}

    def shared_annotations(self) -> dict[str, str]:
        """The knobs every Tidal variant shares with the baselines."""
        return {
            _A + "target-concurrency": f"{self.target_concurrency:g}",
            _A + "max-scale": str(self.max_replicas),
        }


def tidal_annotations(policy: str, options: SimulationOptions) -> dict[str, str]:
    """The annotations a Tidal row runs with, the shared knobs included.

    ``tidal`` and its variants (``tidal-spot``, ``tidal-pool``,
    ``tidal-warm``) share one set, the objective included; the pool rows
    then add or strip the warm tier's keys.
    """
    shared = options.shared_annotations()
    if policy in ("tidal", "tidal-spot", *POOL_POLICIES):
        return {**shared, **options.slo_annotations()}
    if policy == "tidal-concurrency":
        return {**shared, **options.tidal_annotations}
    if policy == "tidal-tuned":
        return {**shared, **options.tuned_annotations}
    if policy == "tidal-adaptive":
        adaptive = {_A + "scale-to-zero-grace-period": "adaptive"}
        return {**shared, **options.tidal_annotations, **adaptive}
    raise ValueError(f"{policy!r} is not a Tidal row")


def is_fixed(policy: str) -> bool:
    """Whether the row is a fixed fleet: ``always-on`` or ``always-on-N``."""
    return policy == "always-on" or _FIXED.fullmatch(policy) is not None


def fixed_size(policy: str) -> int | None:
    """N of ``always-on-N``; None for any other row (``always-on`` included)."""
    fixed = _FIXED.fullmatch(policy)
    return int(fixed.group(1)) if fixed else None
