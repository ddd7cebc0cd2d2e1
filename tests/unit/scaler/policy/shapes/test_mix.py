"""The cheapest mix across shapes (scaler.policy.shapes.mix).

Covers: one shape when it is the cheapest cover, a pair when max-scale keeps
the cheapest from covering alone, and never dearer than any cover of one or
two shapes (brute force over a table of needs and prices); a
capped shape gives what it has and the next cheapest covers the rest, and
with nothing else it is asked for anyway; max-scale and min-scale bound
the total; prompts the cheap shapes cannot prefill in time buy replicas of
one that can; a move to other shapes must save enough, and none is made
while moves are held unless what runs is capped; scale-in drops
the most expensive capacity per unit first.
"""

from __future__ import annotations

import itertools
import math

import pytest

from scaler.policy.shapes.mix import Mix, MixGoal, Offer, choose_mix, cost_per_hour

H100, SLICE, L4 = "h100", "mig-3g.40gb", "l4"
PRICES = {H100: 12.29, SLICE: 5.27, L4: 0.80}
GOAL = MixGoal(max_total=100)


def offer(name: str, need: int, **kw: object) -> Offer:
    return Offer(name, need, PRICES[name], **kw)  # type: ignore[arg-type]


def covers(mix: Mix, needs: dict[str, int]) -> bool:
    return sum(n / needs[name] for name, n in mix.replicas.items()) >= 1 - 1e-9


def test_the_cheapest_cover_alone() -> None:
    # 2 H100s ($24.58) against 4 slices ($21.08): slices.
    mix = choose_mix([offer(H100, 2), offer(SLICE, 4)], GOAL)
    assert dict(mix.replicas) == {SLICE: 4}
    assert mix.cost_per_h == pytest.approx(4 * 5.27)
    assert "4 x mig-3g.40gb" in mix.why


def test_a_pair_when_max_scale_keeps_the_cheapest_shape_from_covering_alone() -> None:
    # 30 L4s are the cheapest cover, but at most 13 replicas: 2 H100s and 10 L4s
    # ($32.58) beat 3 H100s ($36.87).
    mix = choose_mix([offer(H100, 3), offer(L4, 30)], MixGoal(max_total=13))
    assert dict(mix.replicas) == {H100: 2, L4: 10}
    assert dict(choose_mix([offer(H100, 3), offer(L4, 30)], GOAL).replicas) == {L4: 30}


@pytest.mark.parametrize(
    "needs",
    [
        pytest.param({H100: 1, SLICE: 3, L4: 9}, id="small-load"),
        pytest.param({H100: 3, SLICE: 7, L4: 40}, id="medium"),
        pytest.param({H100: 7, SLICE: 17, L4: 60}, id="large"),
        pytest.param({H100: 2, SLICE: 4}, id="two-shapes"),
    ],
)
@pytest.mark.parametrize(
    "prices",
    [
        pytest.param(PRICES, id="list-prices"),
        pytest.param({H100: 4.0, SLICE: 1.9, L4: 0.7}, id="cheap-h100"),
        pytest.param({H100: 10.0, SLICE: 3.5, L4: 0.2}, id="cheap-l4"),
    ],
)
def test_never_dearer_than_any_cover_of_one_or_two_shapes(
    needs: dict[str, int], prices: dict[str, float]
) -> None:
    offers = [Offer(name, need, prices[name]) for name, need in needs.items()]
    mix = choose_mix(offers, GOAL)
    assert covers(mix, needs)
    best = math.inf
    for a, b in itertools.product(needs, repeat=2):
        for n_a in range(needs[a] + 1):
            for n_b in range(needs[b] + 1):
                counts = {a: n_a} if a == b else {a: n_a, b: n_b}
                if sum(n / needs[s] for s, n in counts.items()) >= 1:
                    best = min(best, cost_per_hour(counts, prices))
    assert mix.cost_per_h <= best + 1e-9
    alone = min(prices[s] * n for s, n in needs.items())
    assert mix.cost_per_h <= alone + 1e-9


def test_a_capped_shape_gives_what_it_has_and_the_next_cheapest_covers() -> None:
    # Slices are the cheapest, but only 2 can be had: 2 slices cover 2/6, an H100 the rest.
    mix = choose_mix([offer(H100, 3), offer(SLICE, 6, most=2)], GOAL)
    assert mix.replicas[SLICE] == 2
    assert covers(mix, {H100: 3, SLICE: 6})
    assert mix.replicas[H100] == 2
    out = choose_mix([offer(H100, 3), offer(SLICE, 6, most=0)], GOAL)
    assert dict(out.replicas) == {H100: 3}


def test_with_nothing_else_a_capped_shape_is_asked_for_anyway() -> None:
    mix = choose_mix([offer(SLICE, 4, most=0)], GOAL)
    assert dict(mix.replicas) == {SLICE: 4}


def test_max_and_min_scale_bound_the_total() -> None:
    # 30 L4s would be cheapest, but max-scale is 10: 3 H100s fit.
    mix = choose_mix([offer(H100, 3), offer(L4, 30)], MixGoal(max_total=10))
    assert mix.total <= 10 and covers(mix, {H100: 3, L4: 30})
    capped = choose_mix([offer(H100, 20), offer(L4, 200)], MixGoal(max_total=10))
    assert dict(capped.replicas) == {H100: 10} and "max-scale" in capped.why
    floor = choose_mix([offer(H100, 1), offer(SLICE, 1)], MixGoal(max_total=10, min_total=3))
    assert dict(floor.replicas) == {SLICE: 3}


def test_prompts_only_a_fast_shape_serves_buy_replicas_of_it() -> None:
    # 30 % of the requests are too long for an L4 (5 % on a slice, none on an H100);
    # the miss allowance is 0.5 %.
    offers = [
        offer(H100, 2, hopeless=0.0),
        offer(SLICE, 4, hopeless=0.05),
        offer(L4, 12, hopeless=0.30),
    ]
    goal = MixGoal(max_total=50, allowance=0.005, long_weight=2.0)
    mix = choose_mix(offers, goal)
    assert H100 in mix.replicas  # something serves the longest prompts
    # Without long prompts the L4s alone are cheapest.
    plain = choose_mix([offer(H100, 2), offer(SLICE, 4), offer(L4, 12)], goal)
    assert dict(plain.replicas) == {L4: 12}


def test_a_move_to_other_shapes_must_save_enough() -> None:
    offers = [Offer(H100, 2, 10.0), Offer(SLICE, 4, 4.0)]  # 4 slices save 20 %
    assert dict(choose_mix(offers, GOAL, current={H100: 2}).replicas) == {H100: 2}
    assert dict(choose_mix(offers, GOAL).replicas) == {SLICE: 4}
    cheaper = [Offer(H100, 2, 10.0), Offer(SLICE, 4, 3.5)]  # 30 %
    assert dict(choose_mix(cheaper, GOAL, current={H100: 2}).replicas) == {SLICE: 4}
    # Held (too little seen, or a move just made): what runs stays, whatever a move
    # saves, unless it is capped below what the load needs.
    held = MixGoal(max_total=100, held="the last move was 3s ago")
    kept = choose_mix(cheaper, held, current={H100: 2})
    assert dict(kept.replicas) == {H100: 2} and "the last move was 3s ago" in kept.why
    capped = [Offer(H100, 2, 10.0, most=1), Offer(SLICE, 4, 3.5)]
    assert SLICE in choose_mix(capped, held, current={H100: 2}).replicas


def test_scale_in_drops_the_most_expensive_capacity_per_unit_first() -> None:
    # Running 2 H100s and 3 slices. The demand falls to what 1 H100 ($12.29) or 2
    # slices ($10.54) meet: the H100s, dearer per unit, go.
    running = {H100: 2, SLICE: 3}
    mix = choose_mix([offer(H100, 1), offer(SLICE, 2)], GOAL, current=running)
    assert dict(mix.replicas) == {SLICE: 2}
    # To what 1 H100 or 3 slices ($15.81) meet: the slices go.
    mix = choose_mix([offer(H100, 1), offer(SLICE, 3)], GOAL, current=running)
    assert dict(mix.replicas) == {H100: 1}
    assert choose_mix([], GOAL).total == 0
    assert choose_mix([offer(H100, 0), offer(SLICE, 0)], GOAL, current=running).total == 0


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_total"):
        choose_mix([offer(H100, 1)], MixGoal(max_total=0))
