"""The signal hub: reports and refreshes go in, observations come out.

Covers:
- an activator report is kept and recorded at once for every valid target,
  including one the catalog gained since the last decision; an invalid
  target gets no windows;
- a pulled source's arrival records only the signals it feeds and only for
  the keys it refreshed;
- observe() combines the sources (max of the concurrency views) and marks a
  signal not fresh when a source behind it is stale;
- a target dropped from the catalog loses its windows; two sources of one
  name are refused;
- token counters: reports add up, the servers' prompt tokens count once per
  refresh, and for a target with a TTFT objective the servers' first tokens
  within it are counted (none for a target without one);
- the servers' counters and gauges of each group of a target's pods (its
  GPU shapes) are kept apart, beside the target's whole.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from scaler.policy.api import ScalingConfig, SignalKind
from scaler.signals.activator_reports import ActivatorReports, parse_report
from scaler.signals.base import SourceReading
from scaler.signals.hub import SignalHub
from tests.unit.scaler.fakes import FakeSource


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


def test_report_is_recorded_for_every_valid_target() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig(), "ns/bad": None}
    reports = ActivatorReports()
    hub = SignalHub(sources=[reports], catalog=catalog)
    assert hub.report(parse_report(report("act-1", a=6.0)), now=10.0) == 1
    a = hub.windows("ns/a")
    assert a is not None
    assert hub.windows("ns/bad") is None
    # A target that appeared since: recorded at the next report, at zero from this activator.
    catalog.targets["ns/b"] = ScalingConfig()
    hub.report(parse_report(report("act-2", a=2.0)), now=11.0)
    view = hub.observe("ns/a", ScalingConfig(), now=11.0)
    conc = view.readings[SignalKind.CONCURRENCY]
    assert conc.stable == pytest.approx((6.0 + 8.0) / 2)
    assert conc.fresh
    b = hub.observe("ns/b", ScalingConfig(), now=11.0).readings[SignalKind.CONCURRENCY]
    assert b.stable == 0.0
    assert hub.reporting(now=11.0) == 2


def test_arrival_records_only_what_its_source_feeds() -> None:
    catalog = Catalog()
    config = ScalingConfig(target_gpu_utilization=0.5)
    catalog.targets = {"ns/a": config, "ns/b": config}
    activator, prometheus = FakeSource("activator"), FakeSource("prometheus")
    for key in catalog.targets:
        activator.readings[key] = SourceReading(
            source="activator", fresh=True, reporters=1, concurrency=3.0, queue_depth=0.0
        )
        prometheus.readings[key] = SourceReading(
            source="prometheus", fresh=True, reporters=1, gpu_utilization=0.8
        )
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
    activator.readings["ns/a"] = SourceReading(
        source="activator", fresh=True, reporters=1, concurrency=3.0, busy=True
    )
    scrape.readings["ns/a"] = SourceReading(
        source="scrape", fresh=False, reporters=1, concurrency=5.0
    )
    hub = SignalHub(sources=[activator, scrape], catalog=catalog)
    hub.arrived("activator", now=1.0)
    view = hub.observe("ns/a", ScalingConfig(), now=1.0)
    assert view.combined.values[SignalKind.CONCURRENCY] == 5.0  # max, not sum
    assert view.combined.demand.busy
    reading = view.readings[SignalKind.CONCURRENCY]
    assert (reading.stable, reading.fresh) == (5.0, False)
    # No config (invalid target): combined only.
    assert hub.observe("ns/a", None, now=1.0).readings == {}


def test_dropped_target_loses_windows_and_names_are_unique() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig()}
    hub = SignalHub(sources=[FakeSource("activator")], catalog=catalog)
    hub.arrived("activator", now=1.0)
    assert hub.windows("ns/a") is not None
    catalog.targets = {}
    assert hub.arrived("activator", now=2.0) == 0
    assert hub.windows("ns/a") is None
    with pytest.raises(ValueError, match="distinct names"):
        SignalHub(sources=[FakeSource("scrape"), FakeSource("scrape")], catalog=catalog)
    with pytest.raises(ValueError, match="no activator reports"):
        hub.report(parse_report(report("x")), now=3.0)


def test_token_counters_add_every_report_and_awaiting_is_the_latest_sum() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig()}
    hub = SignalHub(sources=[ActivatorReports()], catalog=catalog)

    def tokens(activator: str, prompt: int, awaiting: int) -> object:
        stats: dict[str, object] = {"concurrency": 1, "arrivals": 2, "prompt_tokens": prompt}
        stats |= {"prefilled_tokens": prompt // 2, "awaiting_first_token": awaiting}
        stats |= {"prompts_over": [2, 1, 0, 0, 0, 0, 0, 0]}
        return {"activator": activator, "period_s": 1.0, "targets": {"ns/a": stats}}

    hub.report(parse_report(tokens("act-1", 1000, 3)), now=1.0)
    hub.report(parse_report(tokens("act-2", 500, 1)), now=1.5)
    hub.report(parse_report(tokens("act-1", 1000, 2)), now=2.0)
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
    observed = {"server_new_prompt_tokens": 3000.0, "server_new_generation_tokens": 500.0}
    observed |= {"server_running": 12.0, "server_waiting": 3.0}
    scrape.readings["ns/a"] = SourceReading(
        source="scrape", fresh=True, reporters=1, observed=observed
    )
    hub.arrived("scrape", now=1.0)
    # Reading again between refreshes (a decision) adds nothing.
    hub.observe("ns/a", ScalingConfig(), now=1.5)
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
    for key in ("ns/a", "ns/b"):
        scrape.readings[key] = SourceReading(
            source="scrape", fresh=True, reporters=1, ttft_new=histogram
        )
    hub.arrived("scrape", now=1.0)
    hub.arrived("scrape", now=2.0)
    load = hub.observe("ns/a", slo, now=2.0).load
    assert load is not None and (load.ttft_within_slo, load.ttft_counted) == (120.0, 140.0)
    assert hub.observe("ns/b", ScalingConfig(), now=2.0).load is None  # no objective, no count


def test_each_group_of_pods_has_its_own_servers_counters() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig()}
    scrape = FakeSource("scrape")
    hub = SignalHub(sources=[scrape], catalog=catalog)

    def served(tokens: float, running: float) -> SourceReading:
        observed = {"server_new_prompt_tokens": tokens, "server_running": running}
        return SourceReading(source="scrape", fresh=True, reporters=1, observed=observed)

    whole = served(4000.0, 10.0)
    groups = {"h100": served(3000.0, 8.0), "l4": served(1000.0, 2.0)}
    scrape.readings["ns/a"] = SourceReading(
        source="scrape", fresh=True, reporters=2, observed=whole.observed, groups=groups
    )
    hub.arrived("scrape", now=1.0)
    hub.arrived("scrape", now=2.0)
    view = hub.observe("ns/a", ScalingConfig(), now=2.0)
    assert view.load is not None and view.load.served_prompt_tokens == 8000.0
    h100, l4 = view.groups["h100"], view.groups["l4"]
    assert (h100.served_prompt_tokens, h100.running) == (6000.0, 8.0)
    assert (l4.served_prompt_tokens, l4.running) == (2000.0, 2.0)
    catalog.targets = {}
    hub.arrived("scrape", now=3.0)
    assert hub.observe("ns/a", None, now=3.0).groups == {}


def test_held_by_class_and_sheds_are_summed_over_the_activators() -> None:
    catalog = Catalog()
    catalog.targets = {"ns/a": ScalingConfig()}
    hub = SignalHub(sources=[ActivatorReports()], catalog=catalog)

    def held(activator: str, critical: int, sheddable: int, shed: int) -> object:
        stats = {"concurrency": 1, "held_critical": critical, "held_standard": 2}
        stats |= {"held_sheddable": sheddable, "shed": shed}
        return {"activator": activator, "period_s": 1.0, "targets": {"ns/a": stats}}

    hub.report(parse_report(held("act-1", 3, 10, 4)), now=1.0)
    hub.report(parse_report(held("act-2", 1, 0, 1)), now=1.5)
    combined = hub.observe("ns/a", ScalingConfig(), now=2.0).combined
    assert combined is not None
    got = {k: v for k, v in combined.observed.items() if "held_" in k or k.endswith("_shed")}
    assert got == {
        "activator_held_critical": 4.0,
        "activator_held_standard": 4.0,
        "activator_held_sheddable": 10.0,
        "activator_shed": 5.0,
    }
