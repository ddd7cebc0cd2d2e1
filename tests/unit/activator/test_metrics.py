"""The request counter and duration histogram, counted in plain integers and read at collection.

:meth:`activator.metrics.Metrics.observe` counts into per-target totals and a
collector turns them into the two families; what a scrape reads must equal
what ``Histogram.observe`` per request would have given, bucket by bucket
(``le`` labels written the same way), and nothing may be counted twice.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.utils import floatToGoString

from activator.holding.target import Target
from activator.metrics import _DURATION_BUCKETS, PREFIX, Metrics
from activator.targets import TargetSpec

DURATION = PREFIX + "request_duration_seconds"
# On bounds, just past them, below the first, past the last.
DURATIONS = [0.0, 0.0004, 0.001, 0.0010001, 0.0025, 0.003, 0.7, 1.0, 42.0, 600.0, 1e6]


def _reference(durations: list[float]) -> CollectorRegistry:
    registry = CollectorRegistry()
    hist = Histogram(
        DURATION, "reference", ["target"], buckets=_DURATION_BUCKETS, registry=registry
    )
    for d in durations:
        hist.labels("ns/t").observe(d)
    return registry


def _assert_same_histogram(got: CollectorRegistry, want: CollectorRegistry) -> None:
    for le in [*_DURATION_BUCKETS, float("inf")]:
        labels = {"target": "ns/t", "le": floatToGoString(le)}
        assert got.get_sample_value(DURATION + "_bucket", labels) == want.get_sample_value(
            DURATION + "_bucket", labels
        ), le
    for suffix in ("_sum", "_count"):
        assert got.get_sample_value(DURATION + suffix, {"target": "ns/t"}) == want.get_sample_value(
            DURATION + suffix, {"target": "ns/t"}
        )


def test_a_collection_reads_every_request_observed_before_it() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    for i, d in enumerate(DURATIONS):
        metrics.observe("ns/t", 200 if i % 2 else 503, d)
    _assert_same_histogram(registry, _reference(DURATIONS))
    requests = PREFIX + "requests_total"
    assert registry.get_sample_value(requests, {"target": "ns/t", "code": "2xx"}) == 5
    assert registry.get_sample_value(requests, {"target": "ns/t", "code": "5xx"}) == 6


def test_later_requests_add_to_what_was_collected_once() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    for d in DURATIONS[:4]:
        metrics.observe("ns/t", 200, d)
    first = registry.get_sample_value(DURATION + "_count", {"target": "ns/t"})
    assert first == 4
    assert registry.get_sample_value(DURATION + "_count", {"target": "ns/t"}) == 4  # not twice
    for d in DURATIONS[4:]:
        metrics.observe("ns/t", 200, d)
    _assert_same_histogram(registry, _reference(DURATIONS))
    total = registry.get_sample_value(PREFIX + "requests_total", {"target": "ns/t", "code": "2xx"})
    assert total == len(DURATIONS)


def test_a_scrape_of_only_the_request_families_reads_them() -> None:
    # A restricted query (``/metrics?name[]=...``) collects only the collectors
    # whose described names match: the totals must be there too.
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.observe("ns/t", 200, 0.01)
    only = registry.restricted_registry([PREFIX + "requests_total"])
    text = generate_latest(only).decode()
    assert f'{PREFIX}requests_total{{code="2xx",target="ns/t"}} 1.0' in text


def test_held_waits_and_sheds_are_by_class_and_cause_and_never_by_tenant() -> None:
    target = Target(TargetSpec(name="ns/t"))
    gate = target.gate
    gate.held_by_class["critical"] = 2
    for _ in range(3):
        gate.sheds.note("sheddable", "at_zero")
    gate.sheds.note("standard", "tenant_share")
    registry = CollectorRegistry()
    metrics = Metrics(registry, targets=lambda: {"ns/t": target})
    metrics.observe_hold("ns/t", "critical", 0.3)
    metrics.observe_hold("ns/t", "critical", 2.0)
    metrics.count_bad_priority("ns/t")
    text = generate_latest(registry).decode()
    assert f'{PREFIX}hold_wait_seconds_count{{class="critical",target="ns/t"}} 2.0' in text
    assert f'{PREFIX}requests_held{{class="critical",target="ns/t"}} 2.0' in text
    shed = f"{PREFIX}shed_total"
    assert f'{shed}{{cause="at_zero",class="sheddable",target="ns/t"}} 3.0' in text
    assert f'{shed}{{cause="tenant_share",class="standard",target="ns/t"}} 1.0' in text
    assert f'{PREFIX}bad_priority_total{{target="ns/t"}} 1.0' in text
    assert "tenant=" not in text
