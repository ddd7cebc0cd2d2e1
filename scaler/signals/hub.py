"""The signals' one owner: sources in, observations out.

The hub holds the demand sources (each behind the one small interface
:class:`~scaler.signals.base.DemandSource`: its name, the signals it
measures, a reading per target; the hub iterates them without knowing which
is which), every target's
:class:`~scaler.policy.windows.SignalWindows`, and the combination rule
(:mod:`scaler.signals.combine`). News goes *in*: an activator report
(:meth:`SignalHub.report`), or a pulled source that finished a refresh
(:meth:`SignalHub.arrived`). Observations come *out*: at a decision the
controller asks :meth:`SignalHub.observe` for a target's combined view and its
signals' readings.

Main decisions:

- **Samples at arrival, never at a tick.** Each arrival records, at its
  arrival time, the combined value (max of the concurrency views, sum of the
  queue views) of only the signals that source feeds
  (:func:`~scaler.signals.combine.fed_by`), so a second in which nothing
  arrived is *missing* in the windows, never a zero, and a slow source's last
  value is not recorded again at every faster arrival.
- **Every target at every report**: an activator report lists the targets
  its activator knows, idle ones at zero, and one that it does not list is at
  zero there; so a report records for every target the hub tracks.
- **Which targets** comes from a :class:`TargetCatalog` (the controller's
  :class:`~scaler.targets.book.TargetBook`): a target that appeared since the last
  decision is recorded at its first arrival.
- **Demand is remembered between decisions**: the latest arrival at which
  the combined sources showed a target busy is kept
  (:attr:`SignalView.demand_seen_at_s`), so a short request seen only in a
  report between two ticks still restarts the idle clock of scale to zero.
- **Tokens as counters**: each activator report's request and token counts
  (its own period's) are added to the target's
  :class:`~scaler.policy.api.LoadTotals` when it arrives, so the policy
  diffs two decisions' counters and sees every token between them however
  many reports came in; requests awaiting a first token are a level, the
  sum of the activators' latest. The counts a pulled source brings with a
  refresh (the servers' new prompt tokens, their new first tokens by TTFT
  bound) are added when that source arrives, once per refresh.
- **Synchronous, time passed in**: no clock and no I/O, so a simulator drives
  it with simulated time as the scaler does with the loop's clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from scaler.policy.api import LoadTotals, Observation, ScalingConfig, SignalKind, SignalReading
from scaler.policy.freshness import fresh_bounds, readings
from scaler.policy.windows import SignalWindows
from scaler.signals.activator_reports import (
    MAX_ADAPTER_REFUSALS,
    ActivatorReport,
    ActivatorReports,
    TargetStats,
)
from scaler.signals.base import DemandSource, SourceReading
from scaler.signals.combine import CombinedSignals, Fed, combine, fed_by, share_within

__all__ = ["HubSettings", "SignalHub", "SignalView", "TargetCatalog"]


class TargetCatalog(Protocol):
    """The targets the hub keeps windows for."""

    def configs(self) -> Mapping[str, ScalingConfig | None]:
        """Target -> its config (``None``: invalid, nothing is recorded for it)."""
        ...


@dataclass(frozen=True, slots=True)
class HubSettings:
    # A window sample older than this no longer counts as fresh (seconds).
    fresh_within_s: float = 5.0
    # Per signal, a longer bound, for signals fed only by a slower poll (GPU
    # utilization from a Prometheus queried every 5 s).
    fresh_within_s_by_kind: Mapping[SignalKind, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SignalView:
    """One target's signals at one time: the sources combined, and the windows read."""

    combined: CombinedSignals
    readings: Mapping[SignalKind, SignalReading]
    # The latest arrival at which the sources showed demand for the target.
    demand_seen_at_s: float | None = None
    # Request and token counters since the hub began tracking the target.
    load: LoadTotals | None = None
    # The servers' counters and gauges of each group of its pods (a GPU shape's
    # replicas), where a source tells them apart: only the servers' fields are set.
    groups: Mapping[str, LoadTotals] = field(default_factory=dict)

    def observation(self, *, ready: int, spec: int, activation: bool) -> Observation:
        """What the policy is given, with the replica counts the caller read.

        The one place the controller and the simulator build it, so the
        simulator decides on what the controller would have seen.
        """
        return Observation(
            ready_replicas=ready,
            spec_replicas=spec,
            signals=self.readings,
            demand=self.combined.demand,
            activation_requested=activation,
            # Demand a report showed between two decisions restarts the idle
            # clock of scale to zero.
            demand_seen_at_s=self.demand_seen_at_s,
            load=self.load,
            concurrency_now=self.combined.values.get(SignalKind.CONCURRENCY),
        )


class SignalHub:
    """Sources, windows and their combination, for every target."""

    def __init__(
        self,
        *,
        sources: Sequence[DemandSource],
        catalog: TargetCatalog,
        settings: HubSettings | None = None,
    ) -> None:
        names = [s.name for s in sources]
        if len(set(names)) != len(names):
            raise ValueError(f"demand sources must have distinct names, got {names}")
        self._sources = list(sources)
        # What each source measures, read once, and what each arrival records.
        self._feeds = [s.feeds for s in self._sources]
        self._index = {s.name: i for i, s in enumerate(self._sources)}
        self._fed = [fed_by(i, self._feeds) for i in range(len(self._sources))]
        self._catalog = catalog
        settings = settings or HubSettings()
        self._fresh_within_s = fresh_bounds(
            settings.fresh_within_s, settings.fresh_within_s_by_kind
        )
        self._reports = next((s for s in sources if isinstance(s, ActivatorReports)), None)
        self._windows: dict[str, SignalWindows] = {}
        self._demand_seen_at: dict[str, float] = {}
        self._totals: dict[str, LoadTotals] = {}
        # Per target, the servers' counters of each group of its pods (GPU shapes).
        self._group_totals: dict[str, dict[str, LoadTotals]] = {}
        # Refused LoRA adapter loads per target, until a reconciler raises them.
        self._adapter_refusals: dict[str, list[str]] = {}

    @property
    def source_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self._sources)

    def _read(self, key: str, now: float) -> list[Fed]:
        return [(f, s.read(key, now=now)) for f, s in zip(self._feeds, self._sources, strict=True)]

    def _combine(self, key: str, now: float) -> CombinedSignals:
        return combine(self._read(key, now))

    def _tracked(self) -> dict[str, tuple[ScalingConfig, SignalWindows]]:
        """Windows for every valid target of the catalog (created on first sight,
        dropped with the target)."""
        configs = self._catalog.configs()
        for key in [k for k in self._windows if k not in configs]:
            del self._windows[key]
            self._demand_seen_at.pop(key, None)
            self._totals.pop(key, None)
            self._group_totals.pop(key, None)
        out = {}
        for key, config in configs.items():
            if config is None:
                continue
            windows = self._windows.get(key)
            if windows is None:
                windows = self._windows[key] = SignalWindows.for_config(config)
            out[key] = (config, windows)
        return out

    def report(self, report: ActivatorReport, *, now: float) -> int:
        """An activator's report arrived at ``now``: keep it and record what it feeds
        for every target. Returns how many activators report
        (:class:`~scaler.signals.activator_reports.ReportError` past the limit)."""
        if self._reports is None:
            raise ValueError("this hub has no activator reports source")
        count = self._reports.record(report, now=now)
        # The catalog is read once per report, and only for a target not yet
        # tracked: building it for every target of every report would cost the
        # square of the targets each second.
        configs: Mapping[str, ScalingConfig | None] | None = None
        for key, stats in report.targets.items():
            if key not in self._windows:
                configs = self._catalog.configs() if configs is None else configs
                if key not in configs:
                    continue
            self._count(key, stats)
            if stats.adapter_refusals:
                kept = self._adapter_refusals.setdefault(key, [])
                kept.extend(stats.adapter_refusals[: MAX_ADAPTER_REFUSALS - len(kept)])
        self.arrived(self._reports.name, now=now)
        return count

    def take_adapter_refusals(self, key: str) -> list[str]:
        """LoRA adapter loads refused for ``key`` since the last call (for one Event)."""
        return self._adapter_refusals.pop(key, [])

    def _count(self, key: str, stats: TargetStats) -> None:
        """Add one report's per-period counts to ``key``'s counters (each report's
        counts are its own period's, so adding never counts a request twice)."""
        was = self._totals.get(key, LoadTotals())
        self._totals[key] = replace(
            was,
            arrivals=was.arrivals + stats.arrivals,
            prompt_tokens=was.prompt_tokens + stats.prompt_tokens,
            output_tokens=was.output_tokens + stats.output_tokens,
            first_tokens=was.first_tokens + stats.first_tokens,
            prefilled_tokens=was.prefilled_tokens + stats.prefilled_tokens,
            best_prefill_tokens_per_s=max(
                was.best_prefill_tokens_per_s, stats.best_prefill_tokens_per_s
            ),
            prompts_over=_added(was.prompts_over, stats.prompts_over),
        )

    def reporting(self, *, now: float) -> int:
        """Activators whose reports count at ``now``."""
        return self._reports.reporting(now=now) if self._reports is not None else 0

    def arrived(self, source: str, *, now: float, keys: Iterable[str] | None = None) -> int:
        """``source`` brought news at ``now``: record the signals it feeds, for ``keys``
        (default: every target), into their windows. Returns the targets recorded."""
        index = self._index.get(source)
        kinds = self._fed[index] if index is not None else frozenset()
        tracked = self._tracked()
        wanted = tracked.keys() if keys is None else [k for k in keys if k in tracked]
        for key in wanted:
            config, windows = tracked[key]
            readings = self._read(key, now)
            combined = combine(readings)
            if index is not None:
                self._count_brought(key, readings[index][1], config.slo_ttft_s)
            for kind, value in combined.values.items():
                if kind in kinds:
                    windows.record(kind, value, now)
            if combined.demand.busy:
                self._demand_seen_at[key] = now
        return len(wanted)

    def _count_brought(
        self, key: str, reading: SourceReading | None, slo_ttft_s: float | None
    ) -> None:
        """The counts one refresh brought: the servers' new prompt tokens and, for a
        target with a TTFT objective, their new first tokens within it."""
        if reading is None:
            return
        totals = _served(self._totals.get(key), reading, slo_ttft_s)
        if totals is not None:
            self._totals[key] = totals
        if reading.groups:
            groups = self._group_totals.setdefault(key, {})
            for name, group in reading.groups.items():
                groups[name] = _served(groups.get(name), group, slo_ttft_s) or LoadTotals()

    def observe(self, key: str, config: ScalingConfig | None, *, now: float) -> SignalView:
        """``key``'s combined sources at ``now`` and, with a config, its signals' readings
        (a signal not fresh when a source behind it is stale)."""
        combined = self._combine(key, now)
        seen = self._demand_seen_at.get(key)
        totals = self._totals.get(key)
        if totals is not None:
            # Requests still to be prefilled: the activators' count, or the
            # servers' waiting requests where no activator counts them.
            awaiting = max(
                combined.observed.get("activator_awaiting_first_token", 0.0),
                combined.observed.get("server_waiting", 0.0),
            )
            # The servers' decode gauges, as they stand now (None: no server says).
            observed = combined.observed
            totals = replace(
                totals,
                awaiting_first_token=awaiting,
                running=observed.get("server_running"),
                server_waiting=observed.get("server_waiting", 0.0),
                kv_cache_utilization=observed.get("server_kv_cache_utilization"),
            )
        groups = self._group_loads(key, now)
        if config is None:
            return SignalView(
                combined=combined, readings={}, demand_seen_at_s=seen, load=totals, groups=groups
            )
        windows = self._windows.get(key)
        if windows is None:
            windows = self._windows[key] = SignalWindows.for_config(config)
        got = readings(
            windows,
            config,
            complete=combined.complete,
            fresh_within_s=self._fresh_within_s,
            now=now,
        )
        return SignalView(
            combined=combined, readings=got, demand_seen_at_s=seen, load=totals, groups=groups
        )

    def _group_loads(self, key: str, now: float) -> dict[str, LoadTotals]:
        """Each group's servers' counters, with their gauges as the sources say now."""
        counted = self._group_totals.get(key)
        if not counted:
            return {}
        gauges: dict[str, SourceReading] = {}
        for source in self._sources:
            reading = source.read(key, now=now)
            if reading is not None:
                gauges.update(reading.groups)
        out = {}
        for name, totals in counted.items():
            now_seen = gauges.get(name)
            observed = now_seen.observed if now_seen is not None else {}
            out[name] = replace(
                totals,
                running=observed.get("server_running"),
                server_waiting=observed.get("server_waiting", 0.0),
                kv_cache_utilization=observed.get("server_kv_cache_utilization"),
            )
        return out

    def windows(self, key: str) -> SignalWindows | None:
        """``key``'s windows, for inspection (``None`` before its first sample)."""
        return self._windows.get(key)


def _served(
    was: LoadTotals | None, reading: SourceReading, slo_ttft_s: float | None
) -> LoadTotals | None:
    """``was`` plus the servers' counts one refresh brought: new prompt and generated
    tokens and, with a TTFT objective, new first tokens and those within it (``was``
    itself when it brought none)."""
    tokens = reading.observed.get("server_new_prompt_tokens", 0.0)
    generated = reading.observed.get("server_new_generation_tokens", 0.0)
    within, counted = (
        share_within(reading.ttft_new, slo_ttft_s) if slo_ttft_s is not None else (0.0, 0.0)
    )
    if tokens <= 0 and counted <= 0 and generated <= 0:
        return was
    was = was or LoadTotals()
    return replace(
        was,
        served_prompt_tokens=was.served_prompt_tokens + tokens,
        generated_tokens=was.generated_tokens + generated,
        ttft_counted=was.ttft_counted + counted,
        ttft_within_slo=was.ttft_within_slo + within,
    )


def _added(total: tuple[float, ...], new: tuple[int, ...]) -> tuple[float, ...]:
    """Per-bound counters plus one report's counts (a report without them adds none)."""
    if not new:
        return total
    if not total:
        return tuple(float(n) for n in new)
    return tuple(t + n for t, n in zip(total, new, strict=True))
