"""One target's placement step (:mod:`scaler.policy.placement.plan`).

Covers, stepped on a wall clock: a spot policy on a fresh target asks for
the companion, the pin (with its Event) and the split; a notice on one spot
replica's node gives SpotFallback naming why, in that step; the replacement
Ready and the hold over give SpotRecovered; an outdated companion is
ensured again; going back to on-demand unpins, and deletes the companion
once the on-demand replicas serve the whole target;
on-demand with nothing left over writes nothing; a full spot pool (Pending
past the timeout) is covered.
"""

from __future__ import annotations

from dataclasses import replace

from scaler.policy import PlacementConfig, Split
from scaler.policy.placement.availability import CapacityType, PodFacts
from scaler.policy.placement.fallback import FallbackState
from scaler.policy.placement.plan import (
    ON_DEMAND_PINNED,
    SPOT_FALLBACK,
    SPOT_RECOVERED,
    plan_placement,
)

BASELINE = PlacementConfig(policy="spot-with-on-demand-baseline", on_demand_baseline=1)
T0 = 1_800_000_000.0


def spot(name: str, **kw: object) -> PodFacts:
    facts = PodFacts(
        name=name, capacity_type=CapacityType.SPOT, phase="Running", ready=True, created_at=T0
    )
    return replace(facts, **kw)  # type: ignore[arg-type]


def step(**kw: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "placement": BASELINE,
        "target": 4,
        "pods": (),
        "companion_name": "llama-spot",
        "companion_exists": True,
        "companion_current": True,
        "pinned": True,
        "pin_description": "karpenter.sh/capacity-type=on-demand",
        "state": FallbackState(),
        "now_wall": T0,
        "hold_s": 30.0,
        **kw,
    }
    return plan_placement(**args)  # type: ignore[arg-type]


def test_fresh_target_gets_companion_pin_and_split() -> None:
    plan = step(companion_exists=False, companion_current=False, pinned=False)
    assert plan.ensure_companion and plan.pin and not plan.delete_companion
    assert (plan.on_demand_replicas, plan.companion_replicas) == (1, 3)
    ((reason, message),) = plan.events
    assert reason == ON_DEMAND_PINNED
    assert "one-time rollout" in message and "llama-spot" in message


def test_notice_then_recovery() -> None:
    ready = [spot(f"s{i}") for i in range(3)]
    plan = step(pods=ready)
    assert plan.split == Split(3, 1) and plan.events == ()
    noticed = [replace(ready[0], node_under_notice=True), *ready[1:]]
    plan = step(pods=noticed, state=plan.state, now_wall=T0 + 10)
    assert plan.split == Split(3, 2, covering=1)
    ((reason, message),) = plan.events
    assert reason == SPOT_FALLBACK
    assert "1 node under interruption notice" in message
    # The replacement is created and loads, then is Ready: released after the hold.
    replacement = [*ready[1:], spot("s3", ready=False, created_at=T0 + 12)]
    plan = step(pods=replacement, state=plan.state, now_wall=T0 + 12)
    assert plan.split.covering == 1 and plan.events == ()
    ready_again = [*ready[1:], spot("s3", created_at=T0 + 12)]
    plan = step(pods=ready_again, state=plan.state, now_wall=T0 + 60)
    assert plan.split.covering == 1
    plan = step(pods=ready_again, state=plan.state, now_wall=T0 + 90)
    assert plan.split == Split(3, 1)
    ((reason, message),) = plan.events
    assert reason == SPOT_RECOVERED and "back to 1" in message


def test_cover_ending_at_zero_is_no_recovery() -> None:
    pending = [spot(f"s{i}", phase="Pending", ready=False) for i in range(3)]
    plan = step(pods=pending, now_wall=T0 + 180)
    assert plan.split.covering == 3
    for target in (0, 1):  # to zero, or to the baseline alone: no spot asked for
        after = step(pods=pending, target=target, state=plan.state, now_wall=T0 + 200)
        assert after.split.spot == 0 and after.state.covered == 0
        assert after.events == ()


def test_full_spot_pool_is_covered_after_the_pending_timeout() -> None:
    pending = [spot(f"s{i}", phase="Pending", ready=False) for i in range(3)]
    plan = step(pods=pending, now_wall=T0 + 60)
    assert plan.split == Split(3, 1)
    plan = step(pods=pending, state=plan.state, now_wall=T0 + 180)
    assert plan.split == Split(3, 4, covering=3)
    assert "3 pending past the timeout" in plan.events[0][1]


def test_outdated_companion_is_ensured() -> None:
    assert step(companion_current=False).ensure_companion
    assert not step().ensure_companion


def test_back_to_on_demand_removes_companion_and_pin() -> None:
    # Three of four replicas of the user's Deployment Ready: the spot half stays for now.
    plan = step(placement=PlacementConfig(), state=FallbackState(covered=2), user_ready=3)
    assert not plan.delete_companion and plan.unpin
    plan = step(placement=PlacementConfig(), state=FallbackState(covered=2), user_ready=4)
    assert plan.delete_companion and plan.unpin
    assert (plan.on_demand_replicas, plan.companion_replicas) == (4, None)
    assert plan.state == FallbackState() and plan.events == ()
    quiet = step(placement=PlacementConfig(), companion_exists=False, pinned=False)
    assert not (quiet.delete_companion or quiet.unpin or quiet.ensure_companion or quiet.pin)
