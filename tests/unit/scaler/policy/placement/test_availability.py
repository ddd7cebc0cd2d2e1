"""Which spot replicas count as available and ready (docs/placement.md).

Covers, as a table: Ready; starting (Running, loading) at any age; Pending
within and past ``pending-timeout``; a node under interruption notice (even
when Ready); evicted; terminating; failed; on-demand pods ignored. Then the
counts over a mixed set, with the reason per unavailable pod, and bad input.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaler.policy.placement.availability import (
    CapacityType,
    PodFacts,
    SpotCounts,
    Unavailable,
    count_spot,
    unavailable_reason,
)

SPOT = PodFacts(name="p", capacity_type=CapacityType.SPOT, created_at=100.0)
TIMEOUT = 180.0


@pytest.mark.parametrize(
    ("pod", "now", "expected"),
    [
        pytest.param(replace(SPOT, ready=True), 10_000.0, None, id="ready"),
        pytest.param(replace(SPOT, phase="Running"), 10_000.0, None, id="running, loading"),
        pytest.param(replace(SPOT, phase="Pending"), 279.0, None, id="pending within timeout"),
        pytest.param(
            replace(SPOT, phase="Pending"), 280.0, Unavailable.PENDING_TIMEOUT, id="pending past"
        ),
        pytest.param(
            replace(SPOT, ready=True, node_under_notice=True),
            101.0,
            Unavailable.NOTICE,
            id="ready but node has a notice",
        ),
        pytest.param(replace(SPOT, evicted=True), 101.0, Unavailable.EVICTED, id="evicted"),
        pytest.param(
            replace(SPOT, ready=True, terminating=True),
            101.0,
            Unavailable.TERMINATING,
            id="terminating",
        ),
        pytest.param(replace(SPOT, phase="Failed"), 101.0, Unavailable.FAILED, id="failed"),
    ],
)
def test_unavailable_reason(pod: PodFacts, now: float, expected: Unavailable | None) -> None:
    assert unavailable_reason(pod, now=now, pending_timeout_s=TIMEOUT) == expected


def test_counts_over_a_mixed_pool() -> None:
    pods = [
        replace(SPOT, name="ready-1", ready=True),
        replace(SPOT, name="ready-2", ready=True),
        replace(SPOT, name="loading", phase="Running"),
        replace(SPOT, name="pending-new", phase="Pending", created_at=250.0),
        replace(SPOT, name="pending-old", phase="Pending"),
        replace(SPOT, name="doomed", ready=True, node_under_notice=True),
        replace(SPOT, name="od", capacity_type=CapacityType.ON_DEMAND, ready=True),
    ]
    counts = count_spot(pods, now=300.0, pending_timeout_s=TIMEOUT)
    assert counts == SpotCounts(
        available=4,
        ready=2,
        unavailable={"pending-old": Unavailable.PENDING_TIMEOUT, "doomed": Unavailable.NOTICE},
    )


def test_negative_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="pending_timeout_s must be >= 0"):
        count_spot([SPOT], now=0.0, pending_timeout_s=-1.0)
