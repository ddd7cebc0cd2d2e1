"""The signal hub: arrivals go in, observations come out, and no source is named.

Covers:
- an activator report's arrival is recorded at once for every valid target,
  including one the catalog gained since the last decision; an invalid
  target gets no windows;
- a pulled source's arrival records only the signals it feeds and only for
  the keys it refreshed;
- observe() combines the sources (max of the concurrency views) and marks a
  signal not fresh when a source behind it is stale;
- a target dropped from the catalog loses its windows and counters; two
  sources of one name are refused, and so is an arrival of a source the hub
  does not have;
- counters: what each arrival brought is added once (reports add up, the
  servers' prompt tokens count once per refresh), the levels are the
  sources' largest views at the decision, and for a target with a TTFT
  objective the servers' first tokens within it are counted (none for a
  target without one);
- a source the hub has never heard of (its own name, counts, levels and
  counts brought) is combined by the same rules, with nothing to change;
- a utilization is fresh within its most direct source's bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest

from groundwork.rules.stats_report import parse_report
from scaler.policy.api import ScalingConfig, SignalKind
from scaler.signals.activator_reports import ActivatorReports
from scaler.signals.base import Brought, Levels
from scaler.signals.hub import HubSettings, SignalHub
from tests.unit.scaler.fakes import FakeSource, reading


class Catalog:
    def __init__(self) -> None:
        self.targets: dict[str, ScalingConfig | None] = {}

    def configs(self) -> Mapping[str, ScalingConfig | None]:
        return self.targets


def report(activator: str, **concurrency: float) -> object:
    return {
        "activator": activator,
        "period_s": 1.0,
        "targets": {f"ns/{name}": {"concurrency": c} for name, c in concurrency.items()},
    }


def push(hub: SignalHub, reports: ActivatorReports, body: object, *, now: float) -> int:
    """What the scaler's HTTP API does with a report: record it, tell the hub."""
    count = reports.record(parse_report(body), now=now)
    hub.arrived(reports.name, now=now)
    return count


def test_report_is_recorded_for_every_valid_target() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig(), "ns/bad": None}
    reports = ActivatorReports()
    hub = SignalHub(sources=[reports], catalog=catalog)
    assert push(hub, reports, report("act-1", a=6.0), now=10.0) == 1
    a = hub.windows("ns/a")
    assert a is not None
    assert hub.windows("ns/bad") is None
    # A target that appeared since: recorded at the next report, at zero from this activator.
    catalog.targets["ns/b"] = ScalingConfig()
    push(hub, reports, report("act-2", a=2.0), now=11.0)
    view = hub.observe("ns/a", ScalingConfig(), now=11.0)
    conc = view.readings[SignalKind.CONCURRENCY]
    assert conc.stable == pytest.approx((6.0 + 8.0) / 2)
    assert conc.fresh
    b = hub.observe("ns/b", ScalingConfig(), now=11.0).readings[SignalKind.CONCURRENCY]
    assert b.stable == 0.0
    assert reports.reporting(now=11.0) == 2


def test_arrival_records_only_what_its_source_feeds() -> None:
    catalog = Catalog()
    config = ScalingConfig(target_gpu_utilization=0.5)
    catalog.targets = {"ns/a": config, "ns/b": config}
    activator, prometheus = FakeSource("activator"), FakeSource("prometheus")
    for key in catalog.targets:
        activator.readings[key] = reading(fresh=True, reporters=1, concurrency=3.0, queue_depth=0.0)
        prometheus.readings[key] = reading(fresh=True, reporters=1, gpu_utilization=0.8)
    hub = SignalHub(sources=[activator, prometheus], catalog=catalog)
    assert hub.arrived("prometheus", now=5.0, keys=["ns/a", "ns/gone"]) == 1
    a = hub.observe("ns/a", config, now=5.0).readings
    assert a[SignalKind.GPU_UTILIZATION].stable == pytest.approx(0.8)
    assert a[SignalKind.CONCURRENCY].stable is None  # a GPU answer says nothing of requests
    b = hub.observe("ns/b", config, now=5.0).readings
    assert b[SignalKind.GPU_UTILIZATION].stable is None  # not refreshed


def test_observe_combines_and_marks_partial_views() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig()}
    activator, scrape = FakeSource("activator"), FakeSource("scrape")
    activator.readings["ns/a"] = reading(fresh=True, reporters=1, concurrency=3.0, busy=True)
    scrape.readings["ns/a"] = reading(fresh=False, reporters=1, concurrency=5.0)
    hub = SignalHub(sources=[activator, scrape], catalog=catalog)
    hub.arrived("activator", now=1.0)
    view = hub.observe("ns/a", ScalingConfig(), now=1.0)
    assert view.combined.values[SignalKind.CONCURRENCY] == 5.0  # max, not sum
    assert view.combined.demand.busy
    concurrency = view.readings[SignalKind.CONCURRENCY]
    assert (concurrency.stable, concurrency.fresh) == (5.0, False)
    # No config (invalid target): combined only.
    assert hub.observe("ns/a", None, now=1.0).readings == {}


def test_dropped_target_loses_windows_and_names_are_unique() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig()}
    source = FakeSource("activator")
    source.readings["ns/a"] = reading(fresh=True, concurrency=1.0)
    hub = SignalHub(sources=[source], catalog=catalog)
    hub.arrived("activator", now=1.0)
    assert hub.windows("ns/a") is not None
    catalog.targets = {}
    assert hub.arrived("activator", now=2.0) == 0
    assert hub.windows("ns/a") is None
    with pytest.raises(ValueError, match="distinct names"):
        SignalHub(sources=[FakeSource("scrape"), FakeSource("scrape")], catalog=catalog)
    with pytest.raises(ValueError, match="no demand source 'epp'"):
        hub.arrived("epp", now=3.0)


def test_token_counters_add_every_report_and_awaiting_is_the_latest_sum() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig()}
    reports = ActivatorReports()
    hub = SignalHub(sources=[reports], catalog=catalog)

    def tokens(activator: str, prompt: int, awaiting: int) -> object:
        stats: dict[str, object] = {"concurrency": 1, "arrivals": 2, "prompt_tokens": prompt}
        stats |= {"prefilled_tokens": prompt // 2, "awaiting_first_token": awaiting}
        stats |= {"prompts_over": [2, 1, 0, 0, 0, 0, 0, 0]}
        return {"activator": activator, "period_s": 1.0, "targets": {"ns/a": stats}}

    push(hub, reports, tokens("act-1", 1000, 3), now=1.0)
    push(hub, reports, tokens("act-2", 500, 1), now=1.5)
    push(hub, reports, tokens("act-1", 1000, 2), now=2.0)
    load = (
        hub.observe("ns/a", ScalingConfig(), now=2.0)
        .observation(ready=1, spec=1, activation=False)
        .load
    )
    assert load is not None
    assert (load.arrivals, load.prompt_tokens, load.prefilled_tokens) == (6, 2500, 1250)
    assert load.awaiting_first_token == 3  # act-1's latest 2 and act-2's 1
    assert load.prompts_over == (6, 3, 0, 0, 0, 0, 0, 0)


def test_servers_new_tokens_are_counted_once_per_refresh() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig()}
    scrape = FakeSource("scrape")
    hub = SignalHub(sources=[scrape], catalog=catalog)

    def refreshed() -> None:  # each refresh brings its own counts
        scrape.readings["ns/a"] = reading(
            fresh=True,
            levels=Levels(running=12.0, server_waiting=3.0),
            brought=Brought(served_prompt_tokens=3000.0, generated_tokens=500.0),
        )

    refreshed()
    hub.arrived("scrape", now=1.0)
    # Reading again between refreshes (a decision), or an arrival announced twice,
    # adds nothing.
    hub.observe("ns/a", ScalingConfig(), now=1.5)
    hub.arrived("scrape", now=1.5)
    refreshed()
    hub.arrived("scrape", now=2.0)
    load = hub.observe("ns/a", ScalingConfig(), now=2.0).load
    assert load is not None and load.served_prompt_tokens == 6000.0
    # Generated tokens are counted the same way; running and waiting are as they stand.
    assert (load.generated_tokens, load.running, load.server_waiting) == (1000.0, 12.0, 3.0)


def test_first_tokens_within_the_objective_are_counted_for_a_target_with_an_slo() -> None:
    catalog = Catalog()
    slo = ScalingConfig(slo_ttft_s=2.5)
    catalog.targets = {"ns/a": slo, "ns/b": ScalingConfig()}
    scrape = FakeSource("scrape")
    hub = SignalHub(sources=[scrape], catalog=catalog)
    histogram = ((1.0, 30.0), (2.5, 60.0), (float("inf"), 70.0))
    for now in (1.0, 2.0):
        for key in ("ns/a", "ns/b"):
            scrape.readings[key] = reading(fresh=True, brought=Brought(ttft_new=histogram))
        hub.arrived("scrape", now=now)
    load = hub.observe("ns/a", slo, now=2.0).load
    assert load is not None and (load.ttft_within_slo, load.ttft_counted) == (120.0, 140.0)
    no_objective = hub.observe("ns/b", ScalingConfig(), now=2.0).load
    assert no_objective is not None and no_objective.ttft_counted == 0.0  # nothing measured


def test_held_by_class_and_sheds_are_summed_over_the_activators() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig()}
    reports = ActivatorReports()
    hub = SignalHub(sources=[reports], catalog=catalog)

    def held(activator: str, critical: int, sheddable: int, shed: int) -> object:
        stats = {"concurrency": 1, "held_critical": critical, "held_standard": 2}
        stats |= {"held_sheddable": sheddable, "shed": shed}
        return {"activator": activator, "period_s": 1.0, "targets": {"ns/a": stats}}

    push(hub, reports, held("act-1", 3, 10, 4), now=1.0)
    push(hub, reports, held("act-2", 1, 0, 1), now=1.5)
    combined = hub.observe("ns/a", ScalingConfig(), now=2.0).combined
    assert combined is not None
    got = {k: v for k, v in combined.observed.items() if "held_" in k or k.endswith("_shed")}
    assert got == {
        "activator_held_critical": 4.0,
        "activator_held_standard": 4.0,
        "activator_held_sheddable": 10.0,
        "activator_shed": 5.0,
    }


def test_a_source_the_hub_never_heard_of_is_combined_by_the_same_rules() -> None:
    """An endpoint picker's view (its own name, nothing the hub knows of it): its counts
    join the activators' and the servers' by the rules of each signal, its levels are
    views like the others, and what it brings is counted at its own arrivals only."""
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig()}
    scrape, picker = FakeSource("scrape"), FakeSource("endpoint-picker")
    scrape.readings["ns/a"] = reading(
        fresh=True,
        concurrency=5.0,
        queue_depth=1.0,
        levels=Levels(running=4.0, server_waiting=1.0),
        brought=Brought(served_prompt_tokens=100.0),
    )
    picker.readings["ns/a"] = reading(
        fresh=True,
        concurrency=9.0,
        queue_depth=3.0,
        busy=True,
        levels=Levels(server_waiting=3.0, awaiting_first_token=3.0),
        brought=Brought(arrivals=7.0),
        observed={"picker_queue": 3.0},
    )
    hub = SignalHub(sources=[scrape, picker], catalog=catalog)
    hub.arrived("endpoint-picker", now=1.0)
    picker.readings["ns/a"] = replace(picker.readings["ns/a"], brought=Brought(arrivals=7.0))
    hub.arrived("endpoint-picker", now=2.0)
    hub.arrived("scrape", now=2.0)
    view = hub.observe("ns/a", ScalingConfig(), now=2.0)
    combined = view.combined
    assert combined.values[SignalKind.CONCURRENCY] == 9.0  # the larger view
    assert combined.values[SignalKind.QUEUE_DEPTH] == 4.0  # different requests: summed
    assert combined.demand.busy and combined.observed["picker_queue"] == 3.0
    load = view.load
    assert load is not None
    assert (load.arrivals, load.served_prompt_tokens) == (14.0, 100.0)
    assert (load.running, load.server_waiting, load.awaiting_first_token) == (4.0, 3.0, 3.0)


def test_a_utilization_is_fresh_within_its_most_direct_sources_bound() -> None:
    catalog = Catalog()
    config = ScalingConfig(target_gpu_utilization=0.5, target_kv_cache_utilization=0.5)
    catalog.targets = {"ns/a": config}
    scrape, prometheus = FakeSource("scrape"), FakeSource("prometheus")
    scrape.readings["ns/a"] = reading(
        fresh=True, concurrency=0.0, kv_cache_utilization=0.4, gpu_utilization=0.1
    )
    prometheus.readings["ns/a"] = reading(fresh=True, gpu_utilization=0.6)
    settings = HubSettings(
        fresh_within_s=5.0, source_fresh_within_s={"scrape": 4.0, "prometheus": 9.5}
    )
    hub = SignalHub(sources=[scrape, prometheus], catalog=catalog, settings=settings)
    hub.arrived("scrape", now=0.0)
    hub.arrived("prometheus", now=0.0)
    got = hub.observe("ns/a", config, now=9.0).readings
    assert got[SignalKind.GPU_UTILIZATION].fresh  # DCGM's own bound, 9.5 s
    assert got[SignalKind.GPU_UTILIZATION].stable == pytest.approx(0.6)
    assert not got[SignalKind.KV_CACHE_UTILIZATION].fresh  # the hub's 5 s (the larger)
    assert not got[SignalKind.CONCURRENCY].fresh  # the counts keep the hub's bound


def test_a_source_with_no_say_brings_no_news_and_held_requests_ask_for_a_wake() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/pool": ScalingConfig(), "ns/plain": ScalingConfig()}
    picker, scrape = FakeSource("picker"), FakeSource("scrape")
    held = reading(fresh=True, concurrency=3.0, queue_depth=3.0, held_for_wake=3.0)
    picker.readings["ns/pool"] = held
    scrape.readings["ns/plain"] = reading(fresh=True, concurrency=1.0, queue_depth=0.0)
    scrape.readings["ns/pool"] = reading(fresh=True, concurrency=0.0, queue_depth=0.0)
    hub = SignalHub(sources=[picker, scrape], catalog=catalog)
    assert hub.arrived("picker", now=1.0) == 1  # news of the pool only
    assert hub.windows("ns/plain") is None
    assert hub.held_for_wake("picker", now=1.0, keys=["ns/pool", "ns/plain"]) == ["ns/pool"]
    picker.readings["ns/pool"] = reading(fresh=True, concurrency=3.0, queue_depth=3.0)
    assert hub.held_for_wake("picker", now=2.0, keys=["ns/pool"]) == []
