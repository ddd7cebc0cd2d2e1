"""Both phases of a replica's capacity and sizing for the one that binds.

Covers (scaler.policy.slo.phases, scaler.policy.slo.sizing, scaler.policy.slo.state):
- the step model is learned from busy intervals of an engine whose step is
  ``base + per_seq x batch + prefill / P``, at several mixes, within 10 %;
- the batch (slots) is learned where requests wait behind a capped batch of
  short prompts, and not where they wait behind long prompts; from the KV
  cache where it is half full or more; nothing is learned from queues on some
  replicas beside idle ones, nor the step model from a thrashing cache;
- short prompts with long answers need more replicas than their prompt
  tokens alone, and an inter-token objective asks for more still;
- prompts whose prefill alone exceeds the objective count against the
  allowance, are reported as a share, and never pin the count at the
  ceiling: the count is where one more replica stops buying its cost;
- the measured attainment under the goal while sizing promised it raises
  the headroom (once per window of three cold starts), and it fades back above the goal.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from groundwork.rules.prompt_sizes import PROMPT_SIZE_BOUNDS
from scaler.policy.api import LoadTotals
from scaler.policy.slo.floor import fading_floor, floor_window_s
from scaler.policy.slo.load import LoadHistory
from scaler.policy.slo.phases import PhaseFit, learn_phases
from scaler.policy.slo.sizing import Sizing, SizingGoal, hopeless_count, replicas_for
from scaler.policy.slo.state import MeasuredAttainment, SloState
from scaler.policy.windows import MaxHold

BASE_S, PER_SEQ_S, PREFILL = 0.0067, 0.000052, 25_000.0


def busy_second(batch: float, prompt_per_s: float) -> tuple[float, float, float]:
    """Steps, generated and prompt tokens of one replica-second of the true engine."""
    # 1 = steps x (base + per_seq x batch) + prompt / P
    steps = (1.0 - prompt_per_s / PREFILL) / (BASE_S + PER_SEQ_S * batch)
    return steps, steps * batch, prompt_per_s


def test_the_step_model_is_learned_from_busy_intervals_at_several_mixes() -> None:
    fit = PhaseFit()
    for _ in range(30):
        for batch, prompt in ((20, 2_000), (120, 8_000), (240, 1_000), (60, 15_000)):
            fit = fit.learn(*busy_second(batch, prompt), replica_seconds=1.0)
    assert fit.trusted
    assert fit.step_s == pytest.approx(BASE_S, rel=0.1)
    assert fit.per_seq_s == pytest.approx(PER_SEQ_S, rel=0.1)
    assert fit.prefill_tokens_per_s == pytest.approx(PREFILL, rel=0.1)


def reading(running: float, waiting: float, generated: float, prompt: float) -> LoadTotals:
    return LoadTotals(
        running=running,
        server_waiting=waiting,
        generated_tokens=generated,
        served_prompt_tokens=prompt,
        kv_cache_utilization=0.3,
    )


def test_the_batch_is_learned_behind_short_prompts_and_not_behind_long_ones() -> None:
    def learn(running: float, prompt_per_s: float) -> PhaseFit:
        fit = PhaseFit()
        _steps, generated, prompt = busy_second(running / 2, prompt_per_s)
        before = reading(running, 8, 0, 0)
        after = reading(running, 8, 2 * 2 * generated, 2 * 2 * prompt)  # 2 replicas, 2 s
        return learn_phases(
            fit, before, after, interval_s=2.0, ready_before=2, ready=2, prefill_per_s=12_000.0
        )

    decode_bound = learn(running=16, prompt_per_s=500)  # 8 a replica, answers long
    assert decode_bound.slots_learned and decode_bound.slots == 8
    prefill_bound = learn(running=4, prompt_per_s=20_000)  # 2 a replica, prompts long
    assert not prefill_bound.slots_learned


def test_the_kv_cache_tells_the_batch_and_uneven_queues_teach_nothing() -> None:
    def learn(before: LoadTotals, after: LoadTotals) -> PhaseFit:
        return learn_phases(
            PhaseFit(), before, after, interval_s=2.0, ready_before=2, ready=2, prefill_per_s=25e3
        )

    # 40 sequences a replica fill 80 % of its cache: it holds 45 before preempting.
    full = replace(reading(80, 0, 0, 0), kv_cache_utilization=0.8)
    kv = learn(full, replace(full, generated_tokens=4_000, served_prompt_tokens=1_000))
    assert kv.slots_learned and kv.slots == pytest.approx(45)
    # Requests queue on one replica behind long prompts while the other idles:
    # the sums look busy and capped, the fewest running on a replica says not.
    uneven = replace(reading(10, 20, 0, 0), running_least=0.0, waiting_least=0.0)
    after = replace(uneven, generated_tokens=200, served_prompt_tokens=2_000)
    assert learn(uneven, after) == PhaseFit()
    # A cache past full preempts and computes prompts again: not the step model.
    thrash = replace(reading(80, 20, 0, 0), kv_cache_utilization=0.95)
    learned = learn(thrash, replace(thrash, generated_tokens=500, served_prompt_tokens=9_000))
    assert learned.replica_seconds == 0.0


def steady(
    seconds: int, rate: float, prompt: float, output: float, over: tuple[float, ...] = ()
) -> LoadHistory:
    history = LoadHistory()
    for t in range(0, seconds, 2):
        history = history.add(
            t, t + 2, 2 * rate * prompt, 2 * rate, 2 * rate * output, tuple(2 * c for c in over)
        )
    return history


def goal(**kw: object) -> SizingGoal:
    values: dict[str, object] = {
        "slo_ttft_s": 2.0,
        "attainment": 0.99,
        "max_replicas": 30,
        "prefill_per_s": PREFILL,
        "fit": PhaseFit(step_s=BASE_S, per_seq_s=PER_SEQ_S, slots=256),
    }
    values.update(kw)
    return SizingGoal(**values)  # type: ignore[arg-type]


def test_long_answers_bind_decode_and_an_inter_token_objective_asks_for_more() -> None:
    chat = steady(300, rate=60, prompt=100, output=500)  # 6,000 prompt, 30,000 generated/s
    prompts_only = steady(300, rate=60, prompt=100, output=0)
    decode = replicas_for(chat, goal())
    assert replicas_for(prompts_only, goal()).replicas == 1
    assert decode.binding == "decode" and decode.replicas >= 3  # a full batch: 13,000/s
    tight = replicas_for(chat, goal(slo_tpot_s=0.012))
    assert tight.replicas > decode.replicas


def test_prompts_no_replica_can_serve_in_time_never_pin_the_ceiling() -> None:
    # 2 requests/s of 8,000 tokens; 4 % over 50,000 (2 s at 25,000 tokens/s).
    over = tuple(0.08 if bound <= 50_000 else 0.0 for bound in PROMPT_SIZE_BOUNDS)
    history = steady(600, rate=2, prompt=8_000, output=100, over=over)
    sizing = replicas_for(history, goal())
    assert sizing.hopeless_share == pytest.approx(0.04, rel=0.05)
    assert not sizing.reachable
    assert sizing.replicas < 5
    assert "no replica prefills in time" in sizing.why
    assert hopeless_count(over, 2 * PREFILL) == pytest.approx(0.08)


def test_measured_misses_the_replay_does_not_predict_raise_the_headroom() -> None:
    steady_load = steady(120, rate=10, prompt=100, output=100)
    sizing = replicas_for(steady_load, goal(ready=1, recent_s=60.0))
    assert sizing.predicted == 1.0  # one replica serves it all in time
    missed = MeasuredAttainment().add(100.0, within=58, counted=100)
    # The same replica ready for the whole window.
    state = SloState(gaps=SloState.start(0.0).gaps, measured=missed, ready_since_s=0.0)

    def correct(s: SloState, sizing_now: Sizing, now: float, interval_s: float = 2) -> SloState:
        return s.corrected(sizing_now, goal=0.99, now=now, interval_s=interval_s, cold_start_s=20)

    raised = correct(state, sizing, 120.0)
    assert raised.headroom == pytest.approx(1.2)
    assert correct(raised, sizing, 130.0).headroom == pytest.approx(1.2)  # once a window
    # A burst the replicas there could not serve: the replay predicts the misses too.
    burst = steady_load.add(118, 120, 2_000_000, 100, 100)
    predicted_misses = replicas_for(burst, goal(ready=1, recent_s=60.0))
    assert predicted_misses.predicted is not None and predicted_misses.predicted < 0.9
    assert correct(state, predicted_misses, 120.0).headroom == 1.0
    # Out of reach (a tail no replica can help): sized at least cost, not corrected.
    assert correct(state, replace(sizing, reachable=False), 120.0).headroom == 1.0
    met = MeasuredAttainment().add(1000.0, within=100, counted=100)
    fades = SloState(gaps=state.gaps, measured=met, headroom=2.0)
    assert 1.0 < correct(fades, sizing, 1000.0, interval_s=600.0).headroom < 1.5


def test_the_floor_from_a_peak_fades_one_replica_per_cold_start() -> None:
    window = floor_window_s(60.0, 6)
    hold = MaxHold().record(6, 0.0, window_s=window).record(2, 30.0, window_s=window)
    floors = [fading_floor(hold, t, cold_start_s=60.0) for t in (30.0, 59.0, 60.0, 200.0, 330.0)]
    assert floors == [6, 6, 5, 3, 1]  # a count recorded once fades the same way
