"""The pure pieces beside the policy: status document, deletion ranking, Event reasons,
freshness, and the setup-dependent annotation check.

Covers:
- the status document keeps the previous reason and time unless the scale
  changed; only its discrete content counts as a change; a bad annotation
  value parses as no status; with an objective it says which phase binds
  and what one more replica would buy, neither a change to write;
- deletion costs follow load (by name, then by ip), an unmeasured pod ranks
  as busy as the busiest, and unchanged costs are not returned;
- the Event reason names what happened (a Steady decision that moved the
  scale is ScaledUp/ScaledDown, a move to zero ScaledToZero);
- a reading recorded from a partial view is not fresh; each signal has its
  own freshness bound;
- a GPU target is refused without GPU metrics, and named with what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from scaler.policy.annotations import InvalidAnnotation, check_supported
from scaler.policy.api import Decision, Mode, Reason, ScalingConfig, SignalKind, SloReport
from scaler.policy.deletion import deletion_costs
from scaler.policy.events import change_message, change_reason
from scaler.policy.freshness import fresh_bounds, readings
from scaler.policy.status_doc import encode_status, parse_status, same_status, status_document
from scaler.policy.windows import SignalWindows


def test_status_keeps_reason_and_time_unless_changed() -> None:
    previous = status_document(
        Decision(desired=2, reason=Reason.SCALED_UP, mode=Mode.STABLE),
        None,
        changed=True,
        now_wall="t1",
    )
    assert previous["reason"] == "ScaledUp"
    assert previous["lastChangeTime"] == "t1"
    steady = Decision(desired=2, reason=Reason.STEADY, mode=Mode.PANIC)
    kept = status_document(steady, previous, changed=False, now_wall="t2")
    assert (kept["reason"], kept["lastChangeTime"], kept["mode"]) == ("ScaledUp", "t1", "panic")
    assert not same_status(kept, previous)  # the mode changed
    same_but_later = dict(previous, lastChangeTime="t9")
    assert same_status(same_but_later, previous)  # time is not content
    assert parse_status(encode_status(kept)) == kept
    assert parse_status("not json") is None
    assert parse_status("[1]") is None
    assert parse_status(None) is None


def test_status_before_any_change_has_no_reason() -> None:
    d = Decision(desired=1, reason=Reason.STEADY, mode=Mode.STABLE)
    first = status_document(d, None, changed=False, now_wall="now")
    assert (first["reason"], first["lastChangeTime"]) == (None, None)
    timeless = {"desired": 1, "reason": "ScaledUp"}  # written by an older version
    got = status_document(d, timeless, changed=False, now_wall="now", last_change_wall="then")
    assert (got["reason"], got["lastChangeTime"]) == ("ScaledUp", "then")
    assert status_document(d, timeless, changed=False, now_wall="now")["lastChangeTime"] == "now"


def test_status_with_an_objective_says_what_binds_and_what_the_next_replica_buys() -> None:
    report = SloReport(
        2.0, 0.99, 25_000.0, True, 4, 0.0, 3.0, binding="decode", next_replica=0.0042
    )
    d = Decision(desired=4, reason=Reason.SCALED_UP, mode=Mode.STABLE, slo=report)
    doc = status_document(d, None, changed=True, now_wall="t1")
    assert (doc["binding"], doc["nextReplica"]) == ("decode", 0.0042)
    # What the next replica buys moves every decision: it is no change to write.
    later = replace(report, next_replica=0.001)
    again = status_document(replace(d, slo=later), doc, changed=False, now_wall="t2")
    assert same_status(again, doc)
    plain = status_document(replace(d, slo=None), None, changed=True, now_wall="t1")
    assert "binding" not in plain and "nextReplica" not in plain


@dataclass(frozen=True)
class Pod:
    name: str
    ip: str | None
    deletion_cost: int | None = None


def test_deletion_costs_follow_load() -> None:
    pods = [Pod("p1", "10.0.0.1"), Pod("p2", "10.0.0.2", 0), Pod("p3", "10.0.0.3"), Pod("p4", None)]
    load = {"p1": 4.2, "p2": 0.0, "10.0.0.3:8000": 2.0}
    # p2 already at 0: unchanged; p4 unmeasured ranks as the busiest (4.2 -> 5).
    assert deletion_costs(pods, load) == {"p1": 5, "p3": 2, "p4": 5}
    assert deletion_costs(pods, {}) == {"p1": 0, "p3": 0, "p4": 0}


@pytest.mark.parametrize(
    ("reason", "desired", "before", "expected"),
    [
        (Reason.ACTIVATED, 1, 0, Reason.ACTIVATED),
        (Reason.STEADY, 3, 2, Reason.SCALED_UP),
        (Reason.NO_DATA, 1, 2, Reason.SCALED_DOWN),
        (Reason.HOLDING, 0, 2, Reason.SCALED_TO_ZERO),
        (Reason.SCALED_DOWN, 1, 3, Reason.SCALED_DOWN),
    ],
)
def test_change_reason_names_what_happened(
    reason: Reason, desired: int, before: int, expected: Reason
) -> None:
    decision = Decision(desired=desired, reason=reason, mode=Mode.STABLE, message="why")
    assert change_reason(decision, before) is expected
    assert change_message(decision, before) == f"scaled from {before} to {desired}: why"


def test_partial_view_is_not_fresh() -> None:
    config = ScalingConfig(window_s=60, target_queue_depth=4)
    windows = SignalWindows.for_config(config)
    windows.record(SignalKind.CONCURRENCY, 8.0, 100.0)
    windows.record(SignalKind.QUEUE_DEPTH, 2.0, 100.0)
    bounds = fresh_bounds(5.0, {SignalKind.QUEUE_DEPTH: 20.0})
    got = readings(
        windows,
        config,
        complete={SignalKind.CONCURRENCY: False, SignalKind.QUEUE_DEPTH: True},
        fresh_within_s=bounds,
        now=110.0,
    )
    assert set(got) == {SignalKind.CONCURRENCY, SignalKind.QUEUE_DEPTH}
    assert got[SignalKind.CONCURRENCY].stable == 8.0
    assert got[SignalKind.CONCURRENCY].fresh is False  # 10 s old and partial
    assert got[SignalKind.QUEUE_DEPTH].fresh is True  # its own bound is 20 s
    assert bounds[SignalKind.GPU_UTILIZATION] == 5.0


def test_gpu_target_needs_gpu_metrics() -> None:
    config = ScalingConfig(engine="vllm", target_gpu_utilization=0.7)
    with pytest.raises(InvalidAnnotation) as caught:
        check_supported(config, gpu_metrics=False)
    assert caught.value.key == "autoscaling.tidal.dev/target-gpu-utilization"
    assert caught.value.value == "70"
    assert "allowed" in str(caught.value)
    check_supported(config, gpu_metrics=True)
    check_supported(ScalingConfig(engine="triton", target_gpu_utilization=0.7), gpu_metrics=False)
