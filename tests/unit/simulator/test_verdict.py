"""A row against the fixed-fleet frontier and the other rows (simulator.verdict).

Covers: the smallest fleet reaching a row's attainment and the GPU ratio to
it, none when the row is above every fleet; the best fleet a row could
afford and the attainment gap to it; dominance by 0.95x the GPU-hours at
the same attainment or by half a point more at no more GPU-hours, and not
just inside either margin; another row dominates as a fleet does; a
scorecard's fixed fleets and the oracle get no verdict, and each variant is
judged against its own frontier.
"""

from __future__ import annotations

import pytest

from simulator.verdict import Point, judge, row_verdicts

FLEETS = [
    Point("fleet 1", 0.70, 1000.0),
    Point("fleet 2", 0.947, 2000.0),
    Point("fleet 3", 0.981, 3000.0),
]


def test_the_fleet_at_the_rows_attainment_and_at_its_gpu_hours() -> None:
    verdict = judge(Point("tidal", 0.936, 2730.0), FLEETS)
    assert verdict.fleet_at_attainment == FLEETS[1]
    assert verdict.gpu_ratio == pytest.approx(1.365)
    assert verdict.fleet_at_gpu == FLEETS[1]
    assert verdict.attainment_gap == pytest.approx(0.011)
    assert verdict.dominated_by == (FLEETS[1],)


def test_above_every_fleet_there_is_no_ratio() -> None:
    verdict = judge(Point("tidal", 0.99, 900.0), FLEETS)
    assert verdict.gpu_ratio is None and verdict.fleet_at_gpu is None
    assert not verdict.dominated


@pytest.mark.parametrize(
    ("gpu", "dominated"),
    [(2000.0 / 0.95, True), (2000.0 / 0.96, False)],
)
def test_the_same_attainment_for_095x_the_gpu_hours_dominates(gpu: float, dominated: bool) -> None:
    assert judge(Point("tidal", 0.947, gpu), FLEETS).dominated is dominated


@pytest.mark.parametrize(("attainment", "dominated"), [(0.942, True), (0.9431, False)])
def test_half_a_point_more_for_no_more_gpu_hours_dominates(
    attainment: float, dominated: bool
) -> None:
    # Fleet 2 costs exactly as much and meets 94.7 %.
    assert judge(Point("tidal", attainment, 2000.0), FLEETS).dominated is dominated


def test_another_row_dominates_as_a_fleet_does() -> None:
    row = Point("tidal", 0.90, 1500.0)
    other = Point("keda-http", 0.91, 1400.0)
    assert judge(row, FLEETS, [other]).dominated_by == (other,)
    assert not judge(row, FLEETS).dominated


def test_scorecard_rows_get_a_verdict_against_their_own_variant() -> None:
    cheap = [Point("fleet 1", 0.99, 100.0)]
    rows = [
        ("always-on-1", 0.99, 100.0, 60.0),
        ("tidal", 0.99, 200.0, 60.0),
        ("oracle", 0.99, 50.0, 60.0),
        ("tidal", 0.99, 200.0, 5.0),
    ]
    verdicts = row_verdicts(rows, [(60.0, cheap), (5.0, FLEETS)])
    assert verdicts[0] is None and verdicts[2] is None
    assert verdicts[1] is not None and verdicts[1].dominated
    assert verdicts[3] is not None and not verdicts[3].dominated
