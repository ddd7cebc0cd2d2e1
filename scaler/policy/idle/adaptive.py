"""``scale-to-zero-grace-period: adaptive``: learn how long each model stays idle.

After Shahrad et al., "Serverless in the Wild: Characterizing and Optimizing
the Serverless Workload at a Large Cloud Provider" (USENIX ATC 2020), the
*hybrid histogram policy*: keep a histogram of each application's idle times
(the gap between the end of one burst of work and the next request), and

- **keep alive** for as long as expected cost says (the paper keeps alive to
  the 99th percentile of idle times; we replaced that, see below), plus a
  10 % margin for the histogram's bins;
- **pre-warm** when the pattern is periodic (the paper's 5th percentile
  minus a 10 % margin is long enough to be worth going to zero for): go to
  zero at once and wake the model just in time for the 5th-percentile gap,
  a cold start ahead, then keep it until the keep-alive;
- fall back to a **fixed grace period** while history is short (fewer than
  ``min_samples`` idle times) or not representative: the paper falls back when
  the histogram is flat (the coefficient of variation of its bin counts is
  below 2) or when too many idle times fall beyond its range.

Main decision: the caller owns one :class:`AdaptiveGrace` per target (an
:class:`IdleHistory` and the current idle stretch), which records an idle
time when a request ends an idle stretch and turns the :class:`GracePlan`
into the config to decide with; the effective grace period goes into
:func:`scaler.policy.decide` through the config's ``scale_to_zero_grace_s``,
so ``decide`` itself does not change. Idle stretches shorter than
``min_idle_s`` are not recorded: they never reach a scale-to-zero decision,
and the many sub-second gaps inside a burst would otherwise swamp the
histogram.

Differences from the paper, and why. **The keep-alive is an expected-cost
choice, not a percentile** (:func:`scaler.policy.idle.keep_alive.best_keep_alive`
over the histogram, a miss priced at ``C / (1 - A)`` GPU-seconds with ``A``
= 99 %): a percentile keeps the *rarest* models warm longest, where a warm
minute is least likely to be used (on 40 Poisson models it had no fewer cold
starts than a fixed grace period at equal idle GPU-hours), while the cost
rule keeps a model warm through gaps whose warm time costs less than the
miss at their end and lets the rarest go at once. Bins are 5 s wide over 4 hours
(the paper: 1 minute), because GPU cold starts of a minute make gaps of one
to three minutes matter (the Azure code trace's idle gaps are 30 s to 217 s);
the ARIMA forecast it uses for idle times beyond the histogram's range is
replaced by the fixed fallback.

Pure: no clock (times are passed in), no I/O; :class:`IdleHistory` is frozen
and :meth:`IdleHistory.record` returns a new one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scaler.policy.api import ScalingConfig
from scaler.policy.idle.keep_alive import best_keep_alive, miss_price_s

__all__ = ["AdaptiveGrace", "AdaptiveGraceConfig", "GracePlan", "IdleHistory"]


@dataclass(frozen=True, slots=True)
class AdaptiveGraceConfig:
    """Knobs of the hybrid histogram policy (defaults: the paper's, see the module docstring)."""

    fallback_s: float = 300.0  # the fixed grace period while history is short
    min_samples: int = 10
    prewarm_percentile: float = 5.0
    margin: float = 0.10
    bin_s: float = 5.0
    range_s: float = 4 * 3600.0
    min_idle_s: float = 10.0
    min_cv: float = 2.0  # a flatter histogram is not representative
    max_out_of_range: float = 0.5  # share of idle times beyond the range that still trusts it
    # The share of requests that may miss (prices a miss: scaler.policy.idle.keep_alive).
    attainment: float = 0.99

    def __post_init__(self) -> None:
        checks = [
            ("fallback_s", self.fallback_s >= 0),
            ("min_samples", self.min_samples >= 1),
            ("prewarm_percentile", 0 <= self.prewarm_percentile < 100),
            ("margin", 0 <= self.margin < 1),
            ("bin_s", self.bin_s > 0),
            ("range_s", self.range_s >= self.bin_s),
            ("min_idle_s", self.min_idle_s >= 0),
            ("min_cv", self.min_cv >= 0),
            ("max_out_of_range", 0 <= self.max_out_of_range <= 1),
            ("attainment", 0 < self.attainment < 1),
        ]
        for name, ok in checks:
            value = getattr(self, name)
            if not ok or not math.isfinite(value):
                raise ValueError(f"AdaptiveGraceConfig.{name} is out of range: {value!r}")

    @property
    def bins(self) -> int:
        return math.ceil(self.range_s / self.bin_s)


@dataclass(frozen=True, slots=True)
class GracePlan:
    """What the adaptive policy asks for, learned from the idle history.

    ``keep_alive_s``: stay up until the target has been idle this long.
    ``prewarm_after_s``: when set, go to zero as soon as the target is idle,
    and wake it once it has been idle this long (the caller subtracts its
    cold start when it asks for the replica); it then stays up until
    ``keep_alive_s``. ``learned`` is False for the fixed fallback.
    """

    keep_alive_s: float
    prewarm_after_s: float | None
    learned: bool
    why: str


@dataclass(frozen=True, slots=True)
class IdleHistory:
    """A histogram of one target's idle times (immutable)."""

    config: AdaptiveGraceConfig = AdaptiveGraceConfig()
    counts: tuple[int, ...] = ()
    out_of_range: int = 0

    @property
    def samples(self) -> int:
        return sum(self.counts) + self.out_of_range

    def record(self, idle_s: float) -> IdleHistory:
        """The history with one more idle stretch of ``idle_s`` seconds."""
        if not math.isfinite(idle_s) or idle_s < 0:
            raise ValueError(f"an idle time must be a finite number of seconds >= 0, got {idle_s}")
        cfg = self.config
        if idle_s < cfg.min_idle_s:
            return self
        if idle_s >= cfg.range_s:
            return IdleHistory(cfg, self.counts, self.out_of_range + 1)
        counts = list(self.counts) if self.counts else [0] * cfg.bins
        counts[int(idle_s // cfg.bin_s)] += 1
        return IdleHistory(cfg, tuple(counts), self.out_of_range)

    def _percentile_edge(self, percentile: float, *, upper: bool) -> float:
        """The edge of the bin where ``percentile`` of the in-range samples fall."""
        total = sum(self.counts)
        needed = total * percentile / 100.0
        seen = 0
        for index, count in enumerate(self.counts):
            seen += count
            if count and seen >= needed:
                return (index + 1 if upper else index) * self.config.bin_s
        return len(self.counts) * self.config.bin_s

    def _coefficient_of_variation(self) -> float:
        # Over the bins up to the last one used: the trailing empty range of a
        # 4-hour histogram would make any pattern look peaked.
        last = max((i for i, c in enumerate(self.counts) if c), default=-1)
        used = self.counts[: last + 1]
        if len(used) < 2:
            return math.inf  # every idle time in one bin: perfectly periodic
        mean = sum(used) / len(used)
        var = sum((c - mean) ** 2 for c in used) / len(used)
        return math.sqrt(var) / mean if mean else 0.0

    def plan(self, *, cold_start_s: float) -> GracePlan:
        """The keep-alive (and pre-warm, when periodic) for the next idle stretch."""
        cfg = self.config
        samples = self.samples
        if samples < cfg.min_samples:
            return GracePlan(
                cfg.fallback_s,
                None,
                False,
                f"{samples} idle times seen, fewer than {cfg.min_samples}: fixed fallback",
            )
        if self.out_of_range / samples > cfg.max_out_of_range:
            return GracePlan(
                cfg.fallback_s,
                None,
                False,
                f"{self.out_of_range} of {samples} idle times beyond {cfg.range_s:.0f}s: "
                "fixed fallback",
            )
        keep_alive = self._keep_alive(cold_start_s, since_s=0.0)
        cv = self._coefficient_of_variation()
        if cv < cfg.min_cv:
            return GracePlan(
                keep_alive,
                None,
                True,
                f"keep alive {keep_alive:.0f}s (least expected cost over {samples} idle "
                f"times); pattern not periodic (CV {cv:.2f} < {cfg.min_cv:g})",
            )
        head = self._percentile_edge(cfg.prewarm_percentile, upper=False) * (1 - cfg.margin)
        # Worth going to zero only if the replica would be gone for longer than
        # it takes to bring it back.
        if head > 2 * cold_start_s:
            keep_alive = max(keep_alive, self._keep_alive(cold_start_s, since_s=head))
            return GracePlan(
                keep_alive,
                head,
                True,
                f"periodic: zero when idle, pre-warm at {head:.0f}s idle, keep alive to "
                f"{keep_alive:.0f}s",
            )
        return GracePlan(
            keep_alive,
            None,
            True,
            f"keep alive {keep_alive:.0f}s (least expected cost over {samples} idle times)",
        )

    def _keep_alive(self, cold_start_s: float, *, since_s: float) -> float:
        """The expected-cost keep-alive (module docstring), plus the margin, from an
        idle time of ``since_s`` (each bin's idle times taken at its upper edge)."""
        cfg = self.config
        gaps = [((i + 1) * cfg.bin_s, float(c)) for i, c in enumerate(self.counts) if c]
        if self.out_of_range:
            gaps.append((cfg.range_s, float(self.out_of_range)))
        price = miss_price_s(cold_start_s=cold_start_s, attainment=cfg.attainment)
        until, _ = best_keep_alive(gaps, since_s=since_s, miss_cost_s=price)
        return until * (1 + cfg.margin) if until > since_s else 0.0


@dataclass(frozen=True, slots=True)
class AdaptiveGrace:
    """One target's adaptive grace period: its idle history and its current idle stretch.

    What the policy keeps per target with ``scale-to-zero-grace-period:
    adaptive`` (inside :class:`~scaler.policy.decide.PolicyState`, so the
    controller and the simulator carry it without knowing of it), as
    immutable state:

    - :meth:`observe` at every decision: ``busy`` (a request held, running or
      waiting anywhere) ends an idle stretch, which is recorded; not busy
      starts one. The plan is recomputed only then (a histogram scan per
      idle stretch, not per decision: a thousand targets decide every 2 s);
    - :meth:`effective` before ``decide``: the config to pass in (its
      ``scale_to_zero_grace_s`` replaced by the learned grace), and whether to
      wake the target now (a pre-warm: ``decide`` with
      ``activation_requested``).

    With a pre-warm plan the grace is 0 until the wake time (go to zero as
    soon as idle), then whatever is left of the keep-alive measured from the
    start of the idle stretch; ``decide`` measures idle time from its own
    state (``PolicyState.idle_since_s``, which an activation restarts), so
    the grace passed in is converted to its clock.
    """

    history: IdleHistory
    idle_since_s: float | None
    cold_start_s: float
    plan: GracePlan

    @classmethod
    def start(cls, now: float, *, fallback_s: float, cold_start_s: float) -> AdaptiveGrace:
        """A target first seen (idle) at ``now``, with the fixed fallback grace."""
        history = IdleHistory(AdaptiveGraceConfig(fallback_s=fallback_s))
        return cls(history, now, cold_start_s, history.plan(cold_start_s=cold_start_s))

    def observe(self, *, busy: bool, now: float) -> AdaptiveGrace:
        if busy:
            if self.idle_since_s is None:
                return self
            history = self.history.record(max(0.0, now - self.idle_since_s))
            plan = (
                self.plan
                if history is self.history
                else history.plan(cold_start_s=self.cold_start_s)
            )
            return AdaptiveGrace(history, None, self.cold_start_s, plan)
        if self.idle_since_s is None:
            return AdaptiveGrace(self.history, now, self.cold_start_s, self.plan)
        return self

    def effective(
        self,
        config: ScalingConfig,
        *,
        now: float,
        spec_replicas: int,
        policy_idle_since_s: float | None,
    ) -> tuple[ScalingConfig, bool]:
        """The config for ``decide`` and whether to pre-warm now (see the class docstring)."""
        if not config.scale_to_zero_grace_adaptive:
            return config, False
        plan = self.plan
        grace = plan.keep_alive_s
        prewarm = False
        if plan.prewarm_after_s is not None and self.idle_since_s is not None:
            idle_for = now - self.idle_since_s
            wake_at = plan.prewarm_after_s - self.cold_start_s
            if idle_for < wake_at:
                grace = 0.0
            else:
                if spec_replicas == 0 and idle_for < plan.keep_alive_s:
                    prewarm = True
                if policy_idle_since_s is not None:
                    grace = max(0.0, self.idle_since_s + plan.keep_alive_s - policy_idle_since_s)
        return replace(config, scale_to_zero_grace_s=grace), prewarm
