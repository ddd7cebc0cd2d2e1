"""The replay's pieces: decode as a rate, a replica's own queue, the load's level, the knee.

Covers (scaler.policy.slo.replay, .blocking, .level, .knee, and through
sizing):
- a long answer's decode is spread over the seconds it takes, so a few
  10,000-token answers among short ones do not look like a prefill backlog,
  while decode in progress past the fleet's slots makes requests late, and
  the square-root margin lets a large fleet run fuller than a small one;
- prompts heavy-tailed to 100,000 tokens block the requests behind them on
  their replica: the share blocked falls with each replica added, by less
  each time, within a few points of what fixed fleets of the long-prompt
  workload measure in simulation; light-tailed prompts block nothing;
- a history settles within a cold start for a steady load and not for
  bursts a minute apart; a decline past the history's own noise is found
  and the replay brought to it, a quiet minute between bursts is not;
- the knee stops where the next replica meets less than its share of the
  bill (the same place for a fleet of 3 and one of 20), looks past a flat
  step for a cliff, and sizing stops short of an expensive goal by it.
"""

from __future__ import annotations

import math
import random

import pytest

from groundwork.rules.prompt_sizes import PROMPT_SIZE_BOUNDS
from scaler.policy.slo.blocking import prompt_tail
from scaler.policy.slo.fleet_replay import late_requests
from scaler.policy.slo.knee import knee
from scaler.policy.slo.level import fallen_level, is_settled, stretches
from scaler.policy.slo.load import LoadHistory
from scaler.policy.slo.phases import PhaseFit
from scaler.policy.slo.replay import Step, decode_bound, steps
from scaler.policy.slo.sizing import SizingGoal, replicas_for

PREFILL = 25_000.0


def goal(**kw: object) -> SizingGoal:
    values: dict[str, object] = {
        "slo_ttft_s": 2.0,
        "attainment": 0.99,
        "max_replicas": 30,
        "prefill_per_s": PREFILL,
        "fit": PhaseFit(step_s=0.0067, per_seq_s=0.000052, slots=128),
        "cold_start_s": 60.0,
    }
    values.update(kw)
    return SizingGoal(**values)  # type: ignore[arg-type]


def test_a_long_answer_is_decoded_over_its_seconds_not_at_its_arrival() -> None:
    history = LoadHistory()
    rng = random.Random(1)
    for t in range(0, 600, 2):
        # Two short requests every two seconds, and now and then an answer of 10,000.
        long = 10_000 if rng.random() < 0.05 else 0
        history = history.add(t, t + 2, 2 * 300, 2, 2 * 400 + long)
    sizing = replicas_for(history, goal())
    assert sizing.replicas == 1


def test_decode_past_the_slots_is_late_and_a_large_fleet_runs_fuller() -> None:
    series = [Step(2.0, 0.0, 3.5, 10.0, 10.0, 0.0, decode_bound(3.5, 128)) for _ in range(10)]
    assert late_requests(series, 3.0, 1.5) == 100  # no slot for anyone
    assert late_requests(series, 4.0, 1.5) == 0
    small, large = decode_bound(2.0, 128), decode_bound(20.0, 128)
    assert small / 2.0 > large / 20.0


def test_steps_spread_decode_and_smooth_the_rates() -> None:
    spread = steps([(2.0, 0.0, 20.0, 1.0, 1.0)] + [(2.0, 0.0, 0.0, 1.0, 1.0)] * 9, 10.0, 128)
    assert spread[0].decode < 10.0  # not the whole lump in its first interval
    assert spread[5].decode > 0.0  # still being decoded ten seconds on


def _over(sizes: list[int]) -> tuple[float, ...]:
    return tuple(float(sum(1 for s in sizes if s > b)) for b in PROMPT_SIZE_BOUNDS)


def _long_prompts(n: int, seed: int = 1) -> list[int]:
    rng = random.Random(seed)
    sigma = math.log(85_000 / 7_000) / 2.326
    return [min(130_000, int(7_000 * math.exp(rng.gauss(0, sigma)))) for _ in range(n)]


def test_a_heavy_tail_blocks_the_requests_behind_it_less_with_each_replica() -> None:
    sizes = _long_prompts(4_000)
    tail = prompt_tail(_over(sizes), len(sizes), sum(sizes), prefill_per_s=PREFILL, slo_ttft_s=2.0)
    rate, load = 3.0, 3.0 * sum(sizes) / len(sizes) / PREFILL  # 3 requests/s: 1.5 replicas
    blocked = [tail.blocked_share(rate / n, load / n) for n in (3, 4, 5, 8)]
    assert blocked[0] > blocked[1] > blocked[2] > blocked[3] > 0
    assert blocked[0] - blocked[1] > blocked[1] - blocked[2]
    # Fixed fleets of the long-prompt workload (30 minutes at 180 a minute) met
    # 89.4, 92.7 and 93.6 % at 3, 4 and 5 replicas, about 4 % having prompts no
    # replica serves in time: the model is within seven points, on the safe side
    # (least-loaded balancing avoids some of the queues a random pick meets).
    for share, simulated in zip(blocked[:3], (0.894, 0.927, 0.936), strict=False):
        assert simulated - 0.07 < (1 - 0.04) * (1 - share) <= simulated + 0.01
    light = [min(8_000, int(1_000 * math.exp(random.gauss(0, 1.0)))) for _ in range(2_000)]
    short = prompt_tail(_over(light), len(light), sum(light), prefill_per_s=PREFILL, slo_ttft_s=2.0)
    assert short.blocked_share(1.0, 0.5) == 0.0


def _raw(works: list[float]) -> list[tuple[float, float, float, float, float]]:
    return [(10.0, w, 0.0, 10.0, 10.0) for w in works]


def test_a_steady_history_settles_and_bursts_do_not() -> None:
    rng = random.Random(2)
    steady = [Step(10.0, 5.0 + rng.gauss(0, 0.5), 0.0, 10.0) for _ in range(12)]
    assert is_settled(steady, cold_start_s=60.0, lookback_s=1800.0)
    bursty = [Step(10.0, 60.0 if i % 6 == 0 else 0.1, 0.0, 10.0) for i in range(60)]
    assert not is_settled(bursty, cold_start_s=60.0, lookback_s=1800.0)
    assert is_settled(bursty, cold_start_s=60.0, lookback_s=600.0)  # the whole reach seen


def test_a_decline_is_found_and_a_quiet_minute_between_bursts_is_not() -> None:
    rng = random.Random(3)
    declining = [10.0 + rng.gauss(0, 1)] * 60 + [5.0 + rng.gauss(0, 0.5) for _ in range(30)]
    level, recent_s = fallen_level(stretches(_raw(declining)), cold_start_s=60.0)
    assert level == pytest.approx(0.5, rel=0.15) and recent_s == 300.0
    bursts = [60.0 if i % 6 == 0 else 0.1 for i in range(90)] + [0.1] * 30
    assert fallen_level(stretches(_raw(bursts)), cold_start_s=20.0) == (1.0, 0.0)


def test_the_knee_is_relative_and_looks_past_a_flat_step() -> None:
    def concave(scale: int):  # type: ignore[no-untyped-def]
        # Met requests of a fleet of n replicas at scale: 1 - k / n of them.
        return lambda n: 1000.0 * scale * (1.0 - 0.3 * scale / n)

    small = knee(concave(1), 1, 30, threshold=0.1)
    large = knee(concave(7), 7, 30, threshold=0.1)
    assert 1 < small < 30 and large == pytest.approx(7 * small, abs=7)
    cliff = [100.0, 100.0, 100.0, 400.0, 400.0]  # the fourth replica serves a burst
    assert knee(lambda n: cliff[n - 1], 1, 5, threshold=0.1) == 4


def test_sizing_stops_short_of_a_goal_whose_last_replicas_buy_little() -> None:
    sizes = _long_prompts(3_600, seed=4)
    history = LoadHistory()
    for i in range(0, len(sizes), 6):  # 3 requests a second for 20 minutes
        chunk = sizes[i : i + 6]
        t = i / 3
        history = history.add(t, t + 2, sum(chunk), len(chunk), 400.0 * len(chunk), _over(chunk))
    sizing = replicas_for(history, goal())
    assert not sizing.reachable  # about 4 % no replica serves in time
    assert 3 <= sizing.replicas <= 8
    assert 0 < sizing.next_replica < 0.05
