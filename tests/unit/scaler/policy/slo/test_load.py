"""Load in tokens and learned capacity (scaler.policy.slo.load).

Covers:
- capacity learns from saturated intervals (prompt tokens prefilled per
  saturated replica-second, as a ratio of sums) and not from one where a
  replica could idle or the replicas changed; the first replaces the prior;
- sizing in tokens (scaler.policy.slo.sizing): the same request rate needs
  more replicas with long prompts than with short ones; a burst short against
  the objective is absorbed by the queue while a sustained one at the same
  rate is not;
- before thirty saturated replica-seconds the fastest prefill a request showed
  lifts the prior; after them the saturated rate stands;
- the history keeps only the lookback; no request wants no replica;
- the load's tokens: the activators' estimate at arrival, rescaled to the
  servers' count once they have counted enough; the servers' count alone
  without an estimate.
"""

from __future__ import annotations

import pytest

from scaler.policy.api import LoadTotals
from scaler.policy.slo.load import (
    LOOKBACK_S,
    PRIOR_PREFILL_TOKENS_PER_S,
    Capacity,
    LoadHistory,
    estimate_scale,
    learn_capacity,
    with_interval,
)
from scaler.policy.slo.phases import PhaseFit
from scaler.policy.slo.sizing import SizingGoal, replicas_for


def totals(prefilled: float, awaiting: float) -> LoadTotals:
    return LoadTotals(prefilled_tokens=prefilled, awaiting_first_token=awaiting)


def test_capacity_learns_only_from_saturated_intervals() -> None:
    prior = Capacity()
    assert prior.tokens_per_s == PRIOR_PREFILL_TOKENS_PER_S
    before, after = totals(0, 20), totals(750_000, 20)
    learned = learn_capacity(prior, before, after, interval_s=15.0, ready_before=2, ready=2)
    assert (learned.tokens_per_s, learned.samples) == (25_000.0, 1)
    # Too few waiting for every replica to be busy: no sample.
    idle = learn_capacity(
        prior, totals(0, 3), totals(100_000, 3), interval_s=2.0, ready_before=2, ready=2
    )
    assert idle == prior
    # A replica became ready during the interval: no sample.
    grew = learn_capacity(prior, before, after, interval_s=2.0, ready_before=1, ready=2)
    assert grew == prior
    # Later samples blend in as sums: an interval in which a long prompt is
    # still prefilling (no first token yet) lowers the rate, the next raises it.
    waiting = learned.learn(0.0, 2.0)
    assert waiting.tokens_per_s < 25_000
    done = waiting.learn(100_000.0, 2.0)
    assert done.tokens_per_s == pytest.approx(25_000, rel=0.03)


def test_before_enough_saturation_the_fastest_prefill_lifts_the_prior() -> None:
    fast = LoadTotals(prefilled_tokens=0, best_prefill_tokens_per_s=24_000.0)
    lifted = learn_capacity(Capacity(), None, fast, interval_s=2.0, ready_before=1, ready=1)
    assert lifted.tokens_per_s == 24_000.0
    # A short saturated spell is not enough to replace it: its long prompts'
    # tokens land after it, so it reads low (20 replica-seconds here)...
    short = lifted.learn(18_000.0, 2.0).learn(160_000.0, 18.0)
    assert short.tokens_per_s == 24_000.0 and not short.trusted
    # ...thirty replica-seconds are, and then a slower fastest prefill changes nothing.
    trusted = short.learn(300_000.0, 20.0)
    assert trusted.trusted and 11_000 < trusted.tokens_per_s < 14_000
    assert trusted.at_least(30_000.0) == trusted


def steady(rate_rps: float, prompt: int, seconds: int, step_s: float = 2.0) -> LoadHistory:
    history = LoadHistory()
    t = 0.0
    while t < seconds:
        n = rate_rps * step_s
        history = history.add(t, t + step_s, n * prompt, n)
        t += step_s
    return history


def goal(mu: float = 20_000.0, max_replicas: int = 20) -> SizingGoal:
    return SizingGoal(
        slo_ttft_s=2.0,
        attainment=0.99,
        max_replicas=max_replicas,
        prefill_per_s=mu,
        fit=PhaseFit(),
    )


def size(history: LoadHistory, mu: float = 20_000.0) -> int:
    return replicas_for(history, goal(mu)).replicas


def test_long_prompts_need_more_replicas_than_short_ones_at_the_same_rate() -> None:
    short = steady(rate_rps=10, prompt=200, seconds=300)
    long = steady(rate_rps=10, prompt=6_000, seconds=300)
    assert size(short) == 1  # 2,000 tokens/s
    assert size(long) == 3  # 60,000 tokens/s on 20,000 per replica


def test_a_short_burst_is_absorbed_and_a_sustained_one_is_not() -> None:
    quiet = steady(rate_rps=1, prompt=1_000, seconds=200)
    # 60,000 tokens/s for 2 s: a replica's queue holds 2 s x 20,000 within the objective.
    blip = quiet.add(200, 202, 120_000, 60)
    sustained = quiet
    for t in range(200, 260, 2):
        sustained = sustained.add(t, t + 2, 120_000, 60)
    assert size(blip) <= 2
    assert size(sustained) == 3


def test_history_keeps_the_lookback_and_no_request_wants_nothing() -> None:
    history = steady(rate_rps=1, prompt=100, seconds=int(LOOKBACK_S) * 2)
    assert history.span_s == pytest.approx(LOOKBACK_S)
    assert history.request_rate() == pytest.approx(1.0)
    assert replicas_for(LoadHistory(), goal()).replicas == 0


def test_without_activator_token_counts_the_servers_count_is_the_load() -> None:
    before = LoadTotals(arrivals=10, served_prompt_tokens=1_000)
    after = LoadTotals(arrivals=30, served_prompt_tokens=41_000)
    history = with_interval(LoadHistory(), before, after, 0.0, 2.0)
    assert history.intervals[0][:4] == (0.0, 2.0, 40_000.0, 20.0)
    # With the activators' estimate and few tokens served yet, the estimate stands.
    counted = LoadTotals(arrivals=30, prompt_tokens=30_000, served_prompt_tokens=41_000)
    history = with_interval(LoadHistory(), LoadTotals(arrivals=10), counted, 0.0, 2.0)
    assert history.intervals[0][:4] == (0.0, 2.0, 30_000.0, 20.0)


def test_the_activators_estimate_is_rescaled_to_the_servers_count() -> None:
    before = LoadTotals(arrivals=100, prompt_tokens=200_000, served_prompt_tokens=240_000)
    after = LoadTotals(arrivals=110, prompt_tokens=210_000, served_prompt_tokens=240_000)
    history = with_interval(LoadHistory(), before, after, 0.0, 2.0)
    # Arrival timing from the estimate, size from the servers: 10,000 x 240/210.
    assert history.intervals[0][2] == pytest.approx(10_000 * 240 / 210)
    assert history.intervals[0][3] == 10
    # A ratio past a factor of two says other traffic, not another text: bounded.
    skewed = LoadTotals(prompt_tokens=100_000, served_prompt_tokens=900_000)
    assert estimate_scale(skewed) == 2.0
