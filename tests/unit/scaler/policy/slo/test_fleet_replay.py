"""One series asked about many fleet sizes: the same answers as a fresh replay of each.

Covers (scaler.policy.slo.fleet_replay, and through sizing): a replay that
reuses what smaller fleets showed (only their busy intervals replayed, a
count from a given interval started where their queue was empty), that
resumes a replay stopped at an allowance, and that tells the queue's late
requests from those blocked behind long prompts, answers every question,
in any order, exactly as a replay of that one size over the whole series
does; and the goal's count is the same wherever its search starts.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from groundwork.rules.prompt_sizes import PROMPT_SIZE_BOUNDS
from scaler.policy.slo.blocking import PromptTail, prompt_tail
from scaler.policy.slo.fleet_replay import FleetReplay
from scaler.policy.slo.load import LoadHistory
from scaler.policy.slo.phases import PhaseFit
from scaler.policy.slo.replay import Step, decode_bound
from scaler.policy.slo.sizing import SizingGoal, replicas_for


def _series(rng: random.Random, length: int) -> list[Step]:
    """Quiet stretches, bursts past a small fleet, decode past its slots now and then."""
    out = []
    for i in range(length):
        burst = rng.random() < 0.08
        prefill = rng.expovariate(1.0) * (12.0 if burst else 1.5)
        decode = 4.0 * rng.random() if i % 50 < 5 else 0.5 * rng.random()
        requests = 0.0 if rng.random() < 0.1 else float(rng.randint(1, 30))
        load = rng.uniform(0.2, 6.0)
        out.append(
            Step(2.0, prefill, decode, requests, requests / 2.0, load, decode_bound(decode, 8))
        )
    return out


# A tail that blocks (prompts past their slack) and one that blocks only on a
# replica past its capacity (every class's excess zero), and none.
_TAILS = {
    "blocking": PromptTail(((0.7, 0.0), (0.25, 0.05), (0.05, 0.8))),
    "saturation only": PromptTail(((0.9, 0.0), (0.1, 0.0))),
    "none": PromptTail(),
}


@pytest.mark.parametrize("tail", _TAILS.values(), ids=_TAILS.keys())
@pytest.mark.parametrize("seed", range(4))
def test_every_answer_is_a_fresh_replays_in_any_order(tail: PromptTail, seed: int) -> None:
    rng = random.Random(seed)
    series = _series(rng, 300)
    replay = FleetReplay(series, 0.5, tail)
    replay.floor = rng.randint(1, 4)
    for _ in range(40):
        n = rng.randint(1, 12)
        ask = rng.choice(("whole", "stopped", "from", "between", "unblocked"))
        fresh = FleetReplay(series, 0.5, tail)
        first = rng.randrange(len(series))
        if ask == "whole":
            assert replay.late(n) == fresh.late(n)
        elif ask == "stopped":
            stop = rng.uniform(0, 400)
            # Past the stop, any count past it: the comparison is what is asked.
            assert (replay.late(n, stop) <= stop) == (fresh.late(n) <= stop)
        elif ask == "from":
            assert replay.late_between(n, first) == fresh.late_between(n, first)
        elif ask == "between":
            end = rng.randint(first, len(series))
            assert replay.late_between(n, first, end) == fresh.late_between(n, first, end)
        else:
            end = len(series) - 1
            alone = FleetReplay(series, 0.5)
            got = replay.late_between(n, first, end, blocked=False)
            assert got == alone.late_between(n, first, end)


@pytest.mark.parametrize("tail", _TAILS.values(), ids=_TAILS.keys())
def test_a_count_from_any_interval_above_a_replayed_size_is_a_fresh_replays(
    tail: PromptTail,
) -> None:
    series = _series(random.Random(5), 300)
    for below in (1, 2, 3):
        for n in range(below + 1, below + 4):
            for first in range(0, len(series), 7):
                replay = FleetReplay(series, 0.5, tail)
                replay.late(below)
                fresh = FleetReplay(series, 0.5, tail).late_between(n, first)
                assert replay.late_between(n, first) == fresh


def test_an_interval_without_requests_still_leaves_its_queue_to_the_next() -> None:
    # Prompt work with no servable request in it (the hopeless ones left out),
    # then requests that find its queue: late at two replicas, fewer at three.
    series = [Step(2.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0), Step(2.0, 0.1, 0.0, 10.0, 5.0, 0.0, 0.0)]
    replay = FleetReplay(series, 0.5)
    replay.late(1)
    assert replay.late(2) == FleetReplay(series, 0.5).late(2) > 0


def test_blocking_and_saturation_make_requests_late_the_queue_alone_does_not() -> None:
    # One replica's worth of prompt work per second, spread on two replicas whose
    # prompts wait past their slack: the fleet's queue is short, the tail is not.
    series = [Step(2.0, 2.0, 0.0, 10.0, 5.0, 1.0, 0.0) for _ in range(20)]
    blocking = FleetReplay(series, 0.5, _TAILS["blocking"])
    assert blocking.late(2) > 0 and blocking.late_between(2, 0, blocked=False) == 0
    # Past a replica's capacity (load over what decode leaves), all are blocked.
    saturated = [Step(2.0, 2.0, 0.0, 10.0, 5.0, 3.0, 0.0) for _ in range(20)]
    replay = FleetReplay(saturated, 0.5, _TAILS["saturation only"])
    assert replay.late(2) == 200 and replay.late_between(2, 0, blocked=False) == 0


def _over(sizes: list[int]) -> tuple[float, ...]:
    return tuple(float(sum(1 for s in sizes if s > b)) for b in PROMPT_SIZE_BOUNDS)


def test_the_goals_count_is_the_same_wherever_its_search_starts() -> None:
    rng = random.Random(7)
    history = LoadHistory()
    for t in range(0, 1200, 2):
        # A load that swings between one and six replicas' worth, with bursts.
        level = 3.5 + 2.5 * math.sin(t / 200) + (4 if rng.random() < 0.05 else 0)
        sizes = [int(rng.lognormvariate(7.5, 1.0)) for _ in range(rng.randint(2, 8))]
        scale = level * 25_000 * 2 / max(1, sum(sizes))
        sizes = [int(s * scale) for s in sizes]
        history = history.add(t, t + 2, sum(sizes), len(sizes), 300.0 * len(sizes), _over(sizes))
    goal = SizingGoal(
        slo_ttft_s=2.0,
        attainment=0.99,
        max_replicas=30,
        prefill_per_s=25_000.0,
        fit=PhaseFit(step_s=0.0067, per_seq_s=0.000052, slots=128),
        asked=4,
    )
    assert prompt_tail(
        history.prompts_over, history.requests, history.tokens, prefill_per_s=25e3, slo_ttft_s=2
    ).classes
    sizings = {replicas_for(history, replace(goal, search_from=s)) for s in (0, 1, 2, 5, 9, 30, 40)}
    assert len(sizings) == 1
    (sizing,) = sizings
    assert 3 <= sizing.replicas <= 30
