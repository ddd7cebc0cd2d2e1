"""Reading an endpoint picker's metrics for one InferencePool (scaler.signals.epp_metrics).

Covers: the captured exposition of llm-d's router (tests/data, a pool in
its waiting room) read whole: queued requests and bytes by priority,
outcomes counted by the flow-control counter with the queue-duration
histogram's seconds, evictions for no endpoints, effective saturation,
ready endpoints, in-flight load, running requests, TTFT buckets; the same
text with only the older names gives the same queue and outcome figures
(from the histogram's counts) and says which older names it read; a pool
label naming another pool keeps those series out, and absent families read
as None; the Inference Extension's early flow-control series (no pool
label, no stage) count for the pool; a reading limited to some families
has only those; every family the router source
declares is in the fixture with exactly its labels; bad text and a
non-integer priority are errors that say what was wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scaler.signals.epp_metrics import (
    DISPATCHED,
    EVICTED_NO_ENDPOINTS,
    FAMILIES,
    QUEUE_SIZE,
    READY_ENDPOINTS,
    REJECTED_CAPACITY,
    REJECTED_OTHER,
    EppMetricsError,
    OutcomeCount,
    QueuedBand,
    read_epp_metrics,
)

FIXTURE = Path(__file__).resolve().parents[3] / "data" / "llm_d_router_epp_metrics.txt"
TEXT = FIXTURE.read_text()


def test_the_captured_exposition_reads_whole() -> None:
    reading = read_epp_metrics(TEXT, pool="llama")
    assert reading.queued == (QueuedBand(10, 1, 530), QueuedBand(0, 2, 824))
    assert (reading.queued_requests, reading.queued_bytes) == (3, 1354)
    assert reading.outcomes[:3] == (
        OutcomeCount(DISPATCHED, 8, pytest.approx(92.7045)),
        OutcomeCount(REJECTED_CAPACITY, 1, pytest.approx(0.00005)),
        OutcomeCount(REJECTED_OTHER, 1, 0.0),  # counted before any queue item existed
    )
    assert reading.evicted_no_endpoints == 3
    assert reading.left(EVICTED_NO_ENDPOINTS) == 3
    assert reading.saturation == 1.0
    assert reading.ready_endpoints == 0
    assert (reading.inflight_requests, reading.inflight_tokens) == (0, 0)
    assert reading.running_requests == 0
    assert reading.ttft is not None
    assert (reading.ttft.count, reading.ttft.sum_s) == (8, pytest.approx(94.59))
    assert dict(reading.ttft.buckets)[0.1] == 2
    assert reading.ttft.buckets[-1] == (float("inf"), 8)
    assert reading.legacy == frozenset()


def test_the_older_names_alone_give_the_same_queue_and_outcomes() -> None:
    older = "\n".join(line for line in TEXT.splitlines() if "llm_d_epp_" not in line)
    reading = read_epp_metrics(older, pool="llama")
    assert reading.queued == (QueuedBand(10, 1, 530), QueuedBand(0, 2, 824))
    # No counter under the older names: the histogram's counts, which miss the
    # rejection that never had a queue item.
    assert [(o.outcome, o.requests) for o in reading.outcomes] == [
        (DISPATCHED, 8),
        (REJECTED_CAPACITY, 1),
        (EVICTED_NO_ENDPOINTS, 3),
    ]
    assert (reading.saturation, reading.ready_endpoints) == (1.0, 0)
    assert reading.ttft is None and reading.inflight_tokens is None  # no older twin
    assert reading.legacy == {
        "inference_extension_flow_control_queue_size",
        "inference_extension_flow_control_queue_bytes",
        "inference_extension_flow_control_request_queue_duration_seconds",
        "inference_extension_flow_control_pool_saturation",
        "inference_pool_ready_pods",
        "inference_objective_running_requests",
    }


def test_another_pools_series_stay_out_and_absent_families_are_none() -> None:
    reading = read_epp_metrics(TEXT, pool="mistral")
    assert reading.queued == () and reading.outcomes == ()
    assert reading.saturation is None and reading.ready_endpoints is None
    # The EPP's own series carry no pool: they are the pool's it serves.
    assert reading.inflight_requests == 0
    empty = read_epp_metrics("", pool="llama")
    assert (empty.queued_requests, empty.saturation, empty.ttft) == (0, None, None)


def test_a_reading_limited_to_some_families_has_only_those() -> None:
    reading = read_epp_metrics(TEXT, pool="llama", families=(QUEUE_SIZE, READY_ENDPOINTS))
    assert reading.queued == (QueuedBand(10, 1, 0), QueuedBand(0, 2, 0))
    assert reading.ready_endpoints == 0
    assert reading.outcomes == () and reading.saturation is None and reading.ttft is None


def test_early_flow_control_series_without_pool_or_stage_count_for_the_pool() -> None:
    text = "\n".join(
        [
            "# TYPE inference_extension_flow_control_queue_size gauge",
            'inference_extension_flow_control_queue_size{fairness_id="a",priority="0"} 4',
            "# TYPE inference_extension_flow_control_pool_saturation gauge",
            "inference_extension_flow_control_pool_saturation 0.5",
            "# TYPE llm_d_epp_flow_control_pool_saturation gauge",
            'llm_d_epp_flow_control_pool_saturation{inference_pool="p",stage="decode"} 2',
            'llm_d_epp_flow_control_pool_saturation{inference_pool="p",stage="effective"} 1.5',
        ]
    )
    reading = read_epp_metrics(text, pool="p")
    assert reading.queued == (QueuedBand(0, 4, 0),)
    assert reading.saturation == 1.5  # the effective stage, under the current name


def test_every_family_is_in_the_fixture_with_exactly_its_labels() -> None:
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(TEXT):
        for sample in family.samples:
            name = family.name + "_total" if family.type == "counter" else family.name
            labels.setdefault(name, set()).update(set(sample.labels) - {"le"})
    for declared in FAMILIES:
        assert labels[declared.name] == set(declared.labels), declared.name
        if declared.legacy is not None:
            assert labels[declared.legacy] == set(declared.legacy_labels), declared.legacy


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("llm_d_epp_ready_endpoints one", "unparseable", id="bad-text"),
        pytest.param(
            "# TYPE llm_d_epp_flow_control_queue_size gauge\n"
            'llm_d_epp_flow_control_queue_size{priority="high"} 1',
            "priority label 'high' is not a whole number",
            id="bad-priority",
        ),
    ],
)
def test_unreadable_text_is_an_error_saying_why(text: str, message: str) -> None:
    with pytest.raises(EppMetricsError, match=message):
        read_epp_metrics(text, pool="p")
