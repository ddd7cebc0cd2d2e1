"""What a world is given: engine, cold starts, placement, spot, the activator's limits, shapes.

:class:`WorldConfig` gathers a run's settings, each a frozen value checked
when it is built (a bad value is refused with what was wrong and what is
allowed), so a world never meets a setting it cannot run.

Main decision: **randomness is part of the setting.** A cold start is a
draw (:class:`ColdStart`) and spot capacity comes and goes by draws
(:class:`SpotModel`), each from a generator seeded from ``WorldConfig.seed``
by the part of the world that draws it, so two runs with the same setting
are the same run, and two policies compared on one setting meet the same
luck.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from groundwork.rules.routing_keys import DEFAULT_COLD_START_TIMEOUT_S, DEFAULT_MAX_BUFFERED
from scaler.policy import PlacementConfig
from simulator.engine import LlmParams
from simulator.world.plugins import Balancer

__all__ = ["ON_DEMAND", "SPOT", "STEPPERS", "ColdStart", "SpotModel", "WorldConfig", "WorldShape"]

ON_DEMAND = "on-demand"
SPOT = "spot"
#: The engines a world can step replicas with: jumping, and the step-by-step reference.
STEPPERS = ("jump", "step")


@dataclass(frozen=True, slots=True)
class ColdStart:
    """Seconds from asking for a replica to it serving: a log-normal around ``median_s``.

    ``sigma`` 0 makes every cold start exactly ``median_s`` (reproducible
    comparisons). The README of the traces quotes a diffusion model's load
    p50 23 s, p90 42 s, p99 52 s (Alibaba 2026 GenAI trace): ``sigma`` 0.45
    gives p90/p50 = 1.8 as there.
    """

    median_s: float = 60.0
    sigma: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.median_s) and self.median_s >= 0):
            raise ValueError(f"cold start must be >= 0 s, got {self.median_s!r}")
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise ValueError(f"cold-start sigma must be >= 0, got {self.sigma!r}")

    def draw(self, rng: random.Random) -> float:
        if self.sigma == 0:
            return self.median_s
        return self.median_s * math.exp(rng.gauss(0.0, self.sigma))


@dataclass(frozen=True, slots=True)
class SpotModel:
    """Spot interruptions and availability.

    Three sources, any combination (defaults: none):

    - ``rate_per_hour``: each spot replica is interrupted after an
      exponential time with this rate (per replica-hour);
    - ``times_s`` (a preemption trace): at each time the oldest live spot
      replica gets its notice;
    - ``availability`` below 1: each of ``zones`` zones has spot capacity
      that alternates between available and unavailable stretches
      (exponential, means chosen so that the long-run share available is
      ``availability`` and there are ``changes_per_day`` state changes a day
      in each zone), independently of the other zones. A new spot replica
      goes to the available zone with the fewest spot replicas (spread, as
      SkyServe's SpotHedge places spot replicas over zones); when a zone
      becomes unavailable its spot replicas, and only those, get their
      notice; spot replicas asked for while no zone has capacity stay
      *pending* (no node, no GPU-seconds) until one comes back. SkyPilot's
      spot traces (Wu et al., "Can't Be Late", NSDI 2024; the traces
      README): a 1-GPU spot type available 17 % to 79 % of the time, about
      5.5 state changes a day *per zone*. Independence across zones is the
      optimistic end: SkyServe (Mao et al., EuroSys 2025) finds preemptions
      correlated within a zone and much less across zones and regions,
      which is why it spreads; one zone (the default) is the pessimistic end.

    ``notice_s`` 120 is AWS's two-minute spot interruption notice (GCP
    gives 30 s).
    """

    rate_per_hour: float = 0.0
    notice_s: float = 120.0
    times_s: tuple[float, ...] = ()
    availability: float = 1.0
    changes_per_day: float = 5.5
    zones: int = 1

    def __post_init__(self) -> None:
        if self.zones < 1:
            raise ValueError(f"spot zones must be >= 1, got {self.zones}")
        if not (math.isfinite(self.rate_per_hour) and self.rate_per_hour >= 0):
            raise ValueError(
                f"spot preemption rate must be >= 0 per hour, got {self.rate_per_hour}"
            )
        if not (math.isfinite(self.notice_s) and self.notice_s >= 0):
            raise ValueError(f"spot notice must be >= 0 s, got {self.notice_s}")
        if not 0 < self.availability <= 1:
            raise ValueError(f"spot availability is a share within (0, 1], got {self.availability}")
        if not (math.isfinite(self.changes_per_day) and self.changes_per_day > 0):
            raise ValueError(f"spot changes per day must be > 0, got {self.changes_per_day}")

    def mean_stretch_s(self, *, available: bool) -> float:
        """Mean length of an available (or unavailable) stretch."""
        cycle_s = 2 * 86400.0 / self.changes_per_day
        share = self.availability if available else 1 - self.availability
        return cycle_s * share


@dataclass(frozen=True, slots=True)
class WorldShape:
    """A GPU shape the world offers: the model's engine on it, and its supply (the
    most replicas of it at once; None: as many as asked)."""

    name: str
    engine: LlmParams
    supply: int | None = None

    def __post_init__(self) -> None:
        if self.supply is not None and self.supply < 0:
            raise ValueError(f"shape {self.name}: supply must be >= 0, got {self.supply}")


@dataclass(frozen=True, slots=True)
class WorldConfig:
    """One world's settings: every part of a run but the trace and the autoscaler."""

    engine: LlmParams = field(default_factory=LlmParams)
    cold_start: ColdStart = field(default_factory=ColdStart)
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    spot: SpotModel = field(default_factory=SpotModel)
    cold_start_timeout_s: float = DEFAULT_COLD_START_TIMEOUT_S
    max_buffered: int = DEFAULT_MAX_BUFFERED
    container_concurrency: int = 0  # 0: no per-replica limit (docs/annotations.md default)
    seed: int = 1
    # None: the activator's least-in-flight pick. Built once per run, given the run's rng.
    balancer: Callable[[random.Random], Balancer] | None = None
    # How replicas' engines are stepped: "jump" from one batch change to the next
    # (simulator.engine.jump), or "step", every step (the reference it is checked against).
    stepper: str = "jump"
    # GPU shapes (docs/shapes.md, simulator.world.fleet); none: every replica runs ``engine``.
    shapes: tuple[WorldShape, ...] = ()

    def __post_init__(self) -> None:
        if self.stepper not in STEPPERS:
            raise ValueError(f"unknown stepper {self.stepper!r}; choose from {list(STEPPERS)}")
        names = [s.name for s in self.shapes]
        if len(set(names)) != len(names):
            raise ValueError(f"shape names must be distinct, got {names}")

    def engine_of(self, shape: str) -> LlmParams:
        """The engine of a replica of ``shape`` ("": the world's own)."""
        for offered in self.shapes:
            if offered.name == shape:
                return offered.engine
        return self.engine
