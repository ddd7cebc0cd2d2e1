"""The demo's figures come from what was observed.

Covers: cold starts count zero-to-ready transitions (not samples); peak is
the highest ready count; final counts pods still terminating; TTFT
percentiles by nearest rank over successful requests only; failures counted;
the demo's pass/fail reasons; the attainment of a TTFT objective counts a
failed request as a miss.
"""

from __future__ import annotations

import pytest

from loadtests.demo.observe import ClusterSample, DemoTracker, RequestResult, percentile


def tracker_with(readies: list[int], *, pods_at_end: int = 0) -> DemoTracker:
    t = DemoTracker()
    for i, ready in enumerate(readies):
        last = i == len(readies) - 1
        t.sample(
            ClusterSample(at_s=i, desired=ready, ready=ready, pods=pods_at_end if last else ready)
        )
    return t


@pytest.mark.parametrize(
    ("readies", "cold_starts", "peak"),
    [
        pytest.param([0, 0, 0], 0, 0, id="never-woke"),
        pytest.param([0, 1, 3, 3, 0], 1, 3, id="one-wake"),
        pytest.param([0, 1, 0, 0, 2, 0], 2, 2, id="two-wakes"),
        pytest.param([1, 2, 0], 0, 2, id="started-warm"),
    ],
)
def test_cold_starts_and_peak(readies: list[int], cold_starts: int, peak: int) -> None:
    summary = tracker_with(readies).summary()
    assert summary.cold_starts == cold_starts
    assert summary.peak_replicas == peak


def test_final_counts_terminating_pods() -> None:
    assert tracker_with([0, 2, 0], pods_at_end=1).summary().final_replicas == 1


def test_ttft_percentiles_use_successes_only() -> None:
    t = tracker_with([0, 2, 0])
    for ttft in (0.1, 0.2, 0.3, 0.4):
        t.result(RequestResult(0.0, 200, ttft, 1.0))
    t.result(RequestResult(0.0, 504, None, 10.0, "timeout"))
    summary = t.summary()
    assert summary.requests == 5
    assert summary.succeeded == 4
    assert summary.failed == 1
    assert summary.ttft_p50_s == 0.2
    assert summary.ttft_p99_s == 0.4
    assert summary.problems() == ["1 request(s) failed"]


def test_attainment_counts_requests_within_the_objective_and_failures_as_misses() -> None:
    t = tracker_with([0, 2, 0])
    assert t.summary(slo_ttft_s=2.0).slo_attainment is None  # no request
    for ttft in (4.2, 0.1, 0.2, 2.0):  # the first waited for a cold start
        t.result(RequestResult(0.0, 200, ttft, 5.0))
    t.result(RequestResult(0.0, 504, None, 10.0, "timeout"))
    summary = t.summary(slo_ttft_s=2.0)
    assert (summary.slo_ttft_s, summary.slo_attainment) == (2.0, 0.6)
    assert summary.as_json()["slo_attainment"] == 0.6
    assert t.summary().as_json()["slo_attainment"] is None  # no objective, nothing measured


def test_a_good_run_has_no_problems() -> None:
    t = tracker_with([0, 1, 3, 0])
    t.result(RequestResult(0.0, 200, 0.5, 1.0))
    assert t.summary().problems() == []


def test_stream_without_done_is_a_failure() -> None:
    assert not RequestResult(0.0, 200, 0.1, 1.0, "stream ended without [DONE]").ok


def test_percentile_edges() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile([1.0, 2.0, 3.0], 0) == 1.0
