"""Moving between shapes with no gap (scaler.policy.shapes.handover).

Covers: a move to slices keeps the Ready H100s until the slices are Ready,
then lets them go; only what is missing is kept, cheapest cover first;
a scale-down within one shape and a scale to zero keep nothing; replicas
that never became Ready are not kept.
"""

from __future__ import annotations

from scaler.policy.shapes.handover import cover, hand_over

H100, SLICE, L4 = "h100", "mig-3g.40gb", "l4"
PRICES = {H100: 12.29, SLICE: 5.27, L4: 0.8}


def test_the_old_shape_stays_until_the_new_one_is_ready() -> None:
    needs = {H100: 2, SLICE: 4}
    target = {SLICE: 4}
    # The slices are starting: both H100s stay.
    asks = hand_over(target, current={H100: 2}, ready={H100: 2}, needs=needs, prices=PRICES)
    assert asks == {SLICE: 4, H100: 2}
    # Two slices are Ready: one H100 is enough beside them.
    asks = hand_over(
        target, current={H100: 2, SLICE: 4}, ready={H100: 2, SLICE: 2}, needs=needs, prices=PRICES
    )
    assert asks == {SLICE: 4, H100: 1}
    # All Ready: the H100s go.
    asks = hand_over(
        target, current={H100: 1, SLICE: 4}, ready={H100: 1, SLICE: 4}, needs=needs, prices=PRICES
    )
    assert asks == {SLICE: 4}


def test_the_cheapest_cover_is_kept_first() -> None:
    needs = {H100: 1, SLICE: 3, L4: 12}
    # Moving from 1 H100 and 12 L4s (each covers the demand alone) to 3 slices; none
    # Ready yet. The L4s cover all of it at $9.60, the H100 at $12.29: the L4s stay.
    asks = hand_over(
        {SLICE: 3},
        current={H100: 1, L4: 12},
        ready={H100: 1, L4: 12},
        needs=needs,
        prices=PRICES,
    )
    assert asks == {SLICE: 3, L4: 12}


def test_scaling_down_or_to_zero_keeps_nothing() -> None:
    needs = {H100: 2}
    down = hand_over({H100: 2}, current={H100: 4}, ready={H100: 4}, needs=needs, prices=PRICES)
    assert down == {H100: 2}
    zero = hand_over({}, current={H100: 2}, ready={H100: 2}, needs={H100: 0}, prices=PRICES)
    assert zero == {}


def test_replicas_never_ready_are_not_kept() -> None:
    # The slices were Pending and their shape is capped at zero: the mix is back on H100s.
    needs = {H100: 2, SLICE: 4}
    asks = hand_over(
        {H100: 2}, current={H100: 0, SLICE: 4}, ready={SLICE: 0}, needs=needs, prices=PRICES
    )
    assert asks == {H100: 2}
    assert cover({H100: 1, SLICE: 2}, needs) == 1.0
