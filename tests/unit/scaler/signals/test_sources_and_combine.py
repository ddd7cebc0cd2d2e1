"""Demand sources and their combination, without the network.

Covers:
- activator reports: sums over activators; a target an activator does not mention counts zero
  from it; drop after three silent periods; stale between two and three
  periods; silence after activators were seen is unknown (stale), not absent;
- pod metrics text: vLLM running/waiting/KV cache (with the old
  ``gpu_cache_usage_perc`` name), Triton pending/GPU utilization and the
  queue/compute rate between two scrapes (counter reset skipped); text that is
  not a model server's is an error, never zeros; vLLM's TTFT buckets become
  the first tokens new at or under each bound, and the share within an
  objective is exact at a bound and interpolated between two;
- Prometheus answers: vector parsing by configurable labels, errors;
- combine: concurrency is the max of views, queue depth the sum; completeness
  per signal follows the freshness of its contributors; GPU from Prometheus
  before Triton.
"""

from __future__ import annotations

import pytest

from groundwork.rules.stats_report import parse_report
from scaler.policy.api import SignalKind
from scaler.signals.activator_reports import ActivatorReports
from scaler.signals.base import SourceReading
from scaler.signals.combine import Fed, combine, share_within
from scaler.signals.prometheus import by_pod
from scaler.signals.prometheus_query import PrometheusError, parse_vector
from scaler.signals.scrape import PodMetrics, ScrapeError, _with_rates, parse_pod_metrics
from tests.unit.scaler.fakes import FEEDS, reading

CONC, QUEUE = SignalKind.CONCURRENCY, SignalKind.QUEUE_DEPTH


def report(name: str, targets: dict[str, dict[str, object]], period_s: float = 1.0) -> object:
    return {"activator": name, "period_s": period_s, "targets": targets}


def test_reports_sum_over_activators_and_drop_after_three_periods() -> None:
    store = ActivatorReports()
    t = {"concurrency": 2.5, "in_flight": 2, "buffered": 1, "arrivals": 10, "pods": {"p1": 2}}
    assert store.record(parse_report(report("a", {"d/m": t})), now=100.0) == 1
    assert store.record(parse_report(report("b", {"d/m": t, "d/other": t})), now=100.5) == 2
    r = store.read("d/m", now=101.0)
    assert r is not None
    assert (r.signals[CONC], r.signals[QUEUE], r.reporters, r.fresh, r.busy) == (
        5.0,
        2.0,
        2,
        True,
        True,
    )
    assert r.pod_load == {"p1": 4.0}
    other = store.read("d/other", now=101.0)
    assert other is not None
    assert other.signals[CONC] == 2.5  # "a" does not mention it: zero from "a"
    # "b" keeps reporting; "a" goes silent.
    store.record(parse_report(report("b", {})), now=102.5)
    stale = store.read("d/m", now=102.6)  # "a" silent 2.6 periods: counted, not fresh
    assert stale is not None
    assert (stale.reporters, stale.fresh, stale.signals[CONC]) == (2, False, 2.5)
    store.record(parse_report(report("b", {})), now=103.1)
    assert store.reporting(now=103.1) == 1  # "a" silent 3.1 periods: dropped
    fresh = store.read("d/m", now=103.1)
    assert fresh is not None
    assert (fresh.fresh, fresh.signals[CONC], fresh.busy) == (True, 0.0, False)


def test_silence_after_reports_is_unknown_then_absent() -> None:
    store = ActivatorReports(expect_for_s=60.0)
    assert store.read("d/m", now=0.0) is None  # never any activator: no say
    store.record(parse_report(report("a", {})), now=10.0)
    gone = store.read("d/m", now=20.0)
    assert gone is not None
    assert (gone.fresh, gone.signals) == (False, {})
    assert store.read("d/m", now=80.0) is None


VLLM = """# HELP vllm:num_requests_running Number of requests running
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="llama"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="llama"} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="llama"} 0.42
"""
VLLM_OLD = VLLM.replace("kv_cache_usage_perc", "gpu_cache_usage_perc")
TRITON = """# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="a",version="1"} 4
nv_inference_pending_request_count{model="b",version="1"} 1
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model="a",version="1"} 1000
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{model="a",version="1"} 4000
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-1"} 0.5
nv_gpu_utilization{gpu_uuid="GPU-2"} 0.7
"""


def test_parse_vllm_and_old_kv_name() -> None:
    m = parse_pod_metrics(VLLM, engine="vllm")
    assert (m.running, m.waiting, m.kv_cache_utilization) == (3.0, 2.0, 0.42)
    assert parse_pod_metrics(VLLM_OLD, engine="vllm").kv_cache_utilization == 0.42


def _vllm_tokens(prompt: float, generated: float, ttft_count: float, ttft_sum: float) -> str:
    return f"""# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} 1
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{model_name="m"}} {prompt}
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{model_name="m"}} {generated}
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {ttft_count}
vllm:time_to_first_token_seconds_count{{model_name="m"}} {ttft_count}
vllm:time_to_first_token_seconds_sum{{model_name="m"}} {ttft_sum}
"""


def test_vllm_token_counters_become_what_is_new_between_scrapes() -> None:
    first = parse_pod_metrics(_vllm_tokens(1000, 50, 4, 2.0), engine="vllm")
    assert (first.prompt_tokens_total, first.generation_tokens_total) == (1000.0, 50.0)
    later = _with_rates(first, parse_pod_metrics(_vllm_tokens(4000, 80, 6, 3.0), engine="vllm"))
    assert (later.new_prompt_tokens, later.new_generation_tokens) == (3000.0, 30.0)
    assert (later.new_first_tokens, later.new_ttft_sum_s) == (2.0, 1.0)
    # A restarted server's counters start again: nothing new is counted.
    restarted = parse_pod_metrics(_vllm_tokens(10, 1, 1, 0.1), engine="vllm")
    assert _with_rates(later, restarted).new_prompt_tokens == 0.0


def _vllm_ttft(under_1s: float, under_2_5s: float, total: float) -> str:
    return f"""# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} 1
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="1.0",model_name="m"}} {under_1s}
vllm:time_to_first_token_seconds_bucket{{le="2.5",model_name="m"}} {under_2_5s}
vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {total}
vllm:time_to_first_token_seconds_count{{model_name="m"}} {total}
vllm:time_to_first_token_seconds_sum{{model_name="m"}} 1.0
"""


def test_vllm_ttft_buckets_become_new_first_tokens_per_bound() -> None:
    first = parse_pod_metrics(_vllm_ttft(10, 12, 14), engine="vllm")
    assert first.ttft_buckets_total == ((1.0, 10.0), (2.5, 12.0), (float("inf"), 14.0))
    later = _with_rates(first, parse_pod_metrics(_vllm_ttft(40, 72, 84), engine="vllm"))
    assert later.new_ttft_buckets == ((1.0, 30.0), (2.5, 60.0), (float("inf"), 70.0))
    restarted = parse_pod_metrics(_vllm_ttft(1, 1, 1), engine="vllm")
    assert _with_rates(later, restarted).new_ttft_buckets == ()


def test_share_within_an_objective_is_exact_at_a_bound_and_interpolated_between() -> None:
    buckets = ((1.0, 30.0), (2.5, 60.0), (float("inf"), 70.0))
    assert share_within(buckets, 2.5) == (60.0, 70.0)
    assert share_within(buckets, 2.0) == (50.0, 70.0)  # a third of 1..2.5 s less than 60
    assert share_within(buckets, 0.5) == (15.0, 70.0)  # from 0 at 0 s
    assert share_within(buckets, 9.0) == (60.0, 70.0)  # past the last bound: what it knows
    assert share_within((), 2.0) == (0.0, 0.0)


def test_parse_triton_and_rates() -> None:
    m = parse_pod_metrics(TRITON, engine="triton")
    assert m.waiting == 5.0
    assert m.gpu_utilization == pytest.approx(0.6)
    assert m.queue_to_compute_ratio is None  # one scrape: no rate yet
    later = PodMetrics(waiting=0, queue_us_total=3000, compute_us_total=8000)
    assert _with_rates(m, later).queue_to_compute_ratio == pytest.approx(2000 / 4000)
    restarted = PodMetrics(waiting=0, queue_us_total=10, compute_us_total=20)
    assert _with_rates(m, restarted).queue_to_compute_ratio is None


@pytest.mark.parametrize(
    ("text", "engine"),
    [
        pytest.param("# TYPE foo gauge\nfoo 1\n", "vllm", id="vllm-without-series"),
        pytest.param(VLLM, "triton", id="triton-without-pending"),
        pytest.param("this is { not prometheus", "vllm", id="garbage"),
        pytest.param(VLLM, "generic", id="generic-engine"),
    ],
)
def test_unreadable_metrics_are_errors_not_zeros(text: str, engine: str) -> None:
    with pytest.raises(ScrapeError):
        parse_pod_metrics(text, engine=engine)


def test_parse_prometheus_vector() -> None:
    payload = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"exported_pod": "p1", "exported_namespace": "ns"}, "value": [1, "55"]},
                {"metric": {"pod": "dcgm-exporter", "namespace": "gpu"}, "value": [1, "10"]},
            ],
        },
    }
    samples = parse_vector(payload)
    got = by_pod(samples, pod_label="exported_pod", namespace_label="exported_namespace")
    assert got == {("ns", "p1"): 55.0}
    nan = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"pod": "p"}, "value": [1, "NaN"]}]}}  # fmt: skip
    assert parse_vector(nan) == []  # a division by zero in the query is no number
    with pytest.raises(PrometheusError, match="query failed"):
        parse_vector({"status": "error", "error": "bad query"})
    with pytest.raises(PrometheusError, match="vector"):
        parse_vector({"status": "success", "data": {"resultType": "matrix", "result": []}})
    with pytest.raises(PrometheusError, match="malformed"):
        parse_vector({"status": "success", "data": {"resultType": "vector", "result": [{}]}})


def by_name(readings: dict[str, SourceReading | None]) -> list[Fed]:
    """Readings keyed by source name, each with what that source measures."""
    return [(FEEDS[name], reading) for name, reading in readings.items()]


def r(source: str, *, fresh: bool = True, **kw: object) -> SourceReading:
    return reading(fresh=fresh, reporters=1, **kw)  # type: ignore[arg-type]


def test_combine_max_concurrency_sum_queue() -> None:
    c = combine(
        by_name(
            {
                "activator": r("activator", concurrency=6.0, queue_depth=2.0, busy=True),
                "scrape": r("scrape", concurrency=5.0, queue_depth=3.0, kv_cache_utilization=0.5),
            }
        )
    )
    assert c.values[SignalKind.CONCURRENCY] == 6.0
    assert c.values[SignalKind.QUEUE_DEPTH] == 5.0
    assert c.values[SignalKind.KV_CACHE_UTILIZATION] == 0.5
    assert all(c.complete[k] for k in (SignalKind.CONCURRENCY, SignalKind.QUEUE_DEPTH))
    assert c.demand.busy
    assert c.demand.all_sources_fresh


def test_combine_completeness_and_gpu_preference() -> None:
    c = combine(
        by_name(
            {
                "activator": r("activator", fresh=False),  # silent: no values, stale
                "scrape": r("scrape", concurrency=1.0, queue_depth=0.0, gpu_utilization=0.9),
                "prometheus": r("prometheus", gpu_utilization=0.3),
            }
        )
    )
    assert c.values[SignalKind.CONCURRENCY] == 1.0  # may still raise
    assert not c.complete[SignalKind.CONCURRENCY]
    assert c.values[SignalKind.GPU_UTILIZATION] == 0.3
    assert c.complete[SignalKind.GPU_UTILIZATION]
    assert not c.demand.all_sources_fresh
    nothing = combine(by_name({"activator": None, "scrape": None}))
    assert nothing.values == {}
    assert not nothing.complete[SignalKind.CONCURRENCY]
    assert not nothing.demand.all_sources_fresh
