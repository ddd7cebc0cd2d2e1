"""Stay warm or go to zero on expected cost (scaler.policy.idle.keep_alive).

Covers:
- a rarely used model goes to zero as soon as it is idle, a busy one stays
  warm (the percentile rule kept the rarest warm longest);
- the keep-alive of least expected cost covers a periodic gap longer than
  a cold start when its miss costs more than the wait;
- a bursty model stays warm through the gaps it usually shows and lets go
  once the idle time is past them;
- a higher attainment goal keeps a model warm longer.
"""

from __future__ import annotations

from scaler.policy.idle.keep_alive import IdleGaps, best_keep_alive, keep_alive_odds


def idle_after(gaps: list[float], *, idle_since: float, started: float = 0.0) -> IdleGaps:
    return IdleGaps(started_s=started, gaps=tuple(gaps), idle_since_s=idle_since)


def test_rare_models_go_cold_and_busy_ones_stay_warm() -> None:
    # Ten requests over thirty hours: gaps of three hours, each longer than
    # a miss is worth in warm time (60 s / 1 % = 6,000 GPU-seconds).
    rare = idle_after([10_800.0] * 10, idle_since=108_000.0)
    odds = keep_alive_odds(
        rare, cold_start_s=60.0, request_rate=0.0, attainment=0.99, now=108_001.0
    )
    assert not odds.keep
    assert "allowed" in odds.why
    # A model seeing a request every 30 s keeps its replica.
    busy = idle_after([30.0] * 200, idle_since=6_000.0)
    odds = keep_alive_odds(
        busy, cold_start_s=60.0, request_rate=1 / 30, attainment=0.99, now=6_001.0
    )
    assert odds.keep


def test_bursty_model_lets_go_past_its_usual_gaps() -> None:
    gaps = [5.0, 10.0, 20.0, 40.0, 80.0] * 40
    gaps_state = idle_after(gaps, idle_since=0.0, started=-20_000.0)
    within = keep_alive_odds(
        gaps_state, cold_start_s=60.0, request_rate=0.0, attainment=0.99, now=30.0
    )
    assert within.keep and within.p_request > 0.9
    past = keep_alive_odds(
        gaps_state, cold_start_s=60.0, request_rate=0.0, attainment=0.99, now=20_000.0
    )
    assert not past.keep


def test_a_higher_goal_keeps_a_model_up_longer() -> None:
    state = idle_after([10_800.0] * 10, idle_since=108_000.0)
    loose = keep_alive_odds(
        state, cold_start_s=60.0, request_rate=0.0, attainment=0.99, now=108_600.0
    )
    strict = keep_alive_odds(
        state, cold_start_s=60.0, request_rate=0.0, attainment=0.9999, now=108_600.0
    )
    assert not loose.keep and strict.keep


def test_idle_gaps_are_recorded_when_demand_returns() -> None:
    gaps = IdleGaps(started_s=0.0).observe(busy=False, now=10.0).observe(busy=False, now=12.0)
    assert gaps.idle_for_s(15.0) == 5.0
    gaps = gaps.observe(busy=True, now=40.0)
    assert gaps.gaps == (30.0,) and gaps.idle_since_s is None


def test_a_periodic_gap_longer_than_a_cold_start_is_covered_when_the_miss_costs_more() -> None:
    # A job every 300 s: nothing within the next cold start at 100 s idle, but
    # 200 s more warm (GPU-seconds) is cheaper than a miss (6,000).
    gaps = [(300.0, 1.0)] * 20
    until, cost = best_keep_alive(gaps, since_s=100.0, miss_cost_s=6_000.0)
    assert (until, cost) == (300.0, 200.0)
    # Priced at 100 GPU-seconds, the same miss is not worth the wait.
    assert best_keep_alive(gaps, since_s=100.0, miss_cost_s=100.0) == (100.0, 100.0)
