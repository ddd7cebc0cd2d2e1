"""The signals' one owner: sources in, observations out.

The hub holds the demand sources (each behind the one small interface
:class:`~scaler.signals.base.DemandSource`: its name, the signals it
measures, a typed reading per target), every target's
:class:`~scaler.policy.windows.SignalWindows` and counters, and the
combination rule (:mod:`scaler.signals.combine`). It never knows which
source is which: it iterates them, and combines their readings by what each
measures. News goes *in*: a source brought news (:meth:`SignalHub.arrived`:
an activator report the HTTP API took, a refresh a poll finished).
Observations come *out*: at a decision a reconciler asks
:meth:`SignalHub.observe` for a target's combined view and its signals'
readings.

Main decisions:

- **Samples at arrival, never at a tick.** Each arrival records, at its
  arrival time, the combined value (max of the concurrency views, sum of the
  queue views) of only the signals that source feeds
  (:func:`~scaler.signals.combine.fed_by`), so a second in which nothing
  arrived is *missing* in the windows, never a zero, and a slow source's last
  value is not recorded again at every faster arrival.
- **Every target at every arrival**: an arrival records for every target the
  catalog lists (a source with nothing to say of one says so: an activator
  report that does not list a target is zero there), except those the
  arriving source has no say for (its reading is ``None``: an endpoint
  picker's arrival is news only of the pools it reads).
- **Which targets** comes from a :class:`TargetCatalog` (the controller's
  :class:`~scaler.targets.book.TargetBook`): a target that appeared since the last
  decision is recorded at its first arrival.
- **Demand is remembered between decisions**: the latest arrival at which
  the combined sources showed a target busy is kept
  (:attr:`SignalView.demand_seen_at_s`), so a short request seen only in a
  report between two ticks still restarts the idle clock of scale to zero.
- **Counts as counters**: what the arriving source brought
  (:class:`~scaler.signals.base.Brought`: requests and tokens, the servers'
  new first tokens by TTFT bound) is added to the target's
  :class:`~scaler.policy.api.LoadTotals` at that arrival, each value once
  (an arrival announced twice adds nothing the second time), so the policy
  diffs two decisions' counters and sees every token between them however
  many arrivals came in; the levels (requests running, waiting, awaiting a
  first token, KV cache use) are the sources' largest views at the decision.
- **Freshness per signal**: a sample must be younger than the hub's bound,
  or, for a utilization, than the bound of the source it comes from (a
  Prometheus polled every 5 s; :func:`~scaler.signals.combine.utilization_bounds`).
- **Synchronous, time passed in**: no clock and no I/O, so a simulator drives
  it with simulated time as the scaler does with the loop's clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Protocol

from groundwork.rules.stats_report import MAX_ADAPTER_REFUSALS
from scaler.policy.api import LoadTotals, Observation, ScalingConfig, SignalKind, SignalReading
from scaler.policy.freshness import fresh_bounds, readings
from scaler.policy.windows import SignalWindows
from scaler.signals.base import Brought, DemandSource, SourceReading
from scaler.signals.combine import (
    CombinedSignals,
    Fed,
    combine,
    fed_by,
    share_within,
    utilization_bounds,
)

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
    # Per source name, a longer bound for the samples it brings (a source polled
    # every 5 s); a utilization takes its most direct source's.
    source_fresh_within_s: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SignalView:
    """One target's signals at one time: the sources combined, and the windows read."""

    combined: CombinedSignals
    readings: Mapping[SignalKind, SignalReading]
    # The latest arrival at which the sources showed demand for the target.
    demand_seen_at_s: float | None = None
    # Request and token counters since the hub began tracking the target.
    load: LoadTotals | None = None

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
        by_source = [settings.source_fresh_within_s.get(name) for name in names]
        self._fresh_within_s = fresh_bounds(
            settings.fresh_within_s, utilization_bounds(self._feeds, by_source)
        )
        self._windows: dict[str, SignalWindows] = {}
        self._demand_seen_at: dict[str, float] = {}
        self._totals: dict[str, LoadTotals] = {}
        # Per (source, target), the last counts added: each is added once.
        self._added: dict[tuple[int, str], Brought] = {}
        # Refused LoRA adapter loads per target, until a reconciler raises them.
        self._adapter_refusals: dict[str, list[str]] = {}

    @property
    def source_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self._sources)

    def _read(self, key: str, now: float) -> list[Fed]:
        return [(f, s.read(key, now=now)) for f, s in zip(self._feeds, self._sources, strict=True)]

    def _catalogued(self) -> Mapping[str, ScalingConfig | None]:
        """The catalog's targets, after forgetting what the hub kept of any other."""
        configs = self._catalog.configs()
        for key in [k for k in self._windows if k not in configs]:
            del self._windows[key]
        for kept in (self._demand_seen_at, self._totals, self._adapter_refusals):
            for key in [k for k in kept if k not in configs]:
                del kept[key]
        for pair in [p for p in self._added if p[1] not in configs]:
            del self._added[pair]
        return configs

    def _windows_of(self, key: str, config: ScalingConfig) -> SignalWindows:
        windows = self._windows.get(key)
        if windows is None:
            windows = self._windows[key] = SignalWindows.for_config(config)
        return windows

    def arrived(self, source: str, *, now: float, keys: Iterable[str] | None = None) -> int:
        """``source`` brought news at ``now`` (call it once per arrival): record the signals
        it feeds for ``keys`` (default: every target) into their windows, and add what it
        brought to their counters. Returns the targets recorded."""
        index = self._index.get(source)
        if index is None:
            raise ValueError(f"no demand source {source!r}; the hub has {self.source_names}")
        kinds = self._fed[index]
        configs = self._catalogued()
        wanted = configs.keys() if keys is None else [k for k in keys if k in configs]
        recorded = 0
        arriving = self._sources[index]
        for key in wanted:
            if arriving.read(key, now=now) is None:
                continue  # the source has no say for this target: no news of it
            config = configs[key]
            got = self._read(key, now)
            self._add_brought(index, key, got[index][1], config)
            if config is None:
                continue  # invalid annotations: no windows, no decision
            combined = combine(got)
            windows = self._windows_of(key, config)
            for kind, value in combined.values.items():
                if kind in kinds:
                    windows.record(kind, value, now)
            if combined.demand.busy:
                self._demand_seen_at[key] = now
            recorded += 1
        return recorded

    def held_for_wake(self, source: str, *, now: float, keys: Iterable[str]) -> list[str]:
        """Of ``keys``, the targets for which ``source`` holds requests with no ready replica
        (:attr:`~scaler.signals.base.SourceReading.held_for_wake`): to be woken now."""
        index = self._index.get(source)
        if index is None:
            raise ValueError(f"no demand source {source!r}; the hub has {self.source_names}")
        found = self._sources[index]
        held = []
        for key in keys:
            reading = found.read(key, now=now)
            if reading is not None and reading.held_for_wake > 0:
                held.append(key)
        return held

    def take_adapter_refusals(self, key: str) -> list[str]:
        """LoRA adapter loads refused for ``key`` since the last call (for one Event)."""
        return self._adapter_refusals.pop(key, [])

    def _add_brought(
        self, index: int, key: str, reading: SourceReading | None, config: ScalingConfig | None
    ) -> None:
        """Add what source ``index``'s latest arrival brought for ``key`` to its counters,
        once (each arrival's counts are its own, so adding never counts a request twice)."""
        brought = reading.brought if reading is not None else None
        if brought is None or brought is self._added.get((index, key)):
            return
        self._added[(index, key)] = brought
        slo_ttft_s = config.slo_ttft_s if config is not None else None
        self._totals[key] = _added(self._totals.get(key, LoadTotals()), brought, slo_ttft_s)
        if brought.adapter_refusals:
            kept = self._adapter_refusals.setdefault(key, [])
            kept.extend(brought.adapter_refusals[: MAX_ADAPTER_REFUSALS - len(kept)])

    def observe(self, key: str, config: ScalingConfig | None, *, now: float) -> SignalView:
        """``key``'s combined sources at ``now`` and, with a config, its signals' readings
        (a signal not fresh when a source behind it is stale)."""
        combined = combine(self._read(key, now))
        seen = self._demand_seen_at.get(key)
        totals = self._totals.get(key)
        if totals is not None:
            # The levels as they stand now, where some source measures them.
            levels = combined.levels
            measured = {
                spec.name: value
                for spec in fields(levels)
                if (value := getattr(levels, spec.name)) is not None
            }
            totals = replace(totals, **measured)
        if config is None:
            return SignalView(combined=combined, readings={}, demand_seen_at_s=seen, load=totals)
        got = readings(
            self._windows_of(key, config),
            config,
            complete=combined.complete,
            fresh_within_s=self._fresh_within_s,
            now=now,
        )
        return SignalView(combined=combined, readings=got, demand_seen_at_s=seen, load=totals)

    def windows(self, key: str) -> SignalWindows | None:
        """``key``'s windows, for inspection (``None`` before its first sample)."""
        return self._windows.get(key)


def _added(totals: LoadTotals, brought: Brought, slo_ttft_s: float | None) -> LoadTotals:
    """``totals`` plus one arrival's counts; first tokens within the objective are read
    from the histogram it brought (none without an objective)."""
    within, counted = (
        share_within(brought.ttft_new, slo_ttft_s) if slo_ttft_s is not None else (0.0, 0.0)
    )
    return replace(
        totals,
        arrivals=totals.arrivals + brought.arrivals,
        prompt_tokens=totals.prompt_tokens + brought.prompt_tokens,
        output_tokens=totals.output_tokens + brought.output_tokens,
        first_tokens=totals.first_tokens + brought.first_tokens,
        prefilled_tokens=totals.prefilled_tokens + brought.prefilled_tokens,
        best_prefill_tokens_per_s=max(
            totals.best_prefill_tokens_per_s, brought.best_prefill_tokens_per_s
        ),
        served_prompt_tokens=totals.served_prompt_tokens + brought.served_prompt_tokens,
        generated_tokens=totals.generated_tokens + brought.generated_tokens,
        ttft_counted=totals.ttft_counted + counted,
        ttft_within_slo=totals.ttft_within_slo + within,
        prompts_over=_per_bound(totals.prompts_over, brought.prompts_over),
    )


def _per_bound(total: tuple[float, ...], new: tuple[float, ...]) -> tuple[float, ...]:
    """Per-bound counters plus one arrival's counts (an arrival without them adds none)."""
    if not new:
        return total
    if not total:
        return tuple(float(n) for n in new)
    return tuple(t + n for t, n in zip(total, new, strict=True))
