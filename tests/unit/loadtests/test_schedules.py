"""Pure load schedules (loadtests.schedules), stepped with plain time values.

Covers:
- constant and step users, and their end;
- spike from zero: idle, spike, a drain that waits for running users, then
  an idle tail timed from the moment the last user stopped, then the end;
- the diurnal rate (trough at 0, peak at half a day, ratio as asked) and
  seeded Poisson arrivals that follow it;
- the open-loop pool size (requests in flight at once);
- the open-loop schedule: due times, claim order, lateness, and its end
  (all answered, or the drain timeout);
- parameter errors name the parameter; user classes that cannot run a shape
  are refused with the class that can.
"""

from __future__ import annotations

import pytest

from loadtests.schedules import (
    ConstantUsers,
    OpenLoopSchedule,
    ScheduleError,
    SpikeFromZero,
    StepUsers,
    Tick,
    diurnal_arrivals,
    diurnal_rate,
    user_class_problem,
    users_needed,
)
from loadtests.traces import TraceRequest


def test_constant_users_until_the_run_time() -> None:
    shape = ConstantUsers(users=4, spawn_rate=2, duration_s=10)
    assert shape.tick(0, 0) == Tick(4, 2)
    assert shape.tick(9.9, 4) == Tick(4, 2)
    assert shape.tick(10, 4) is None
    assert ConstantUsers(users=1, spawn_rate=1).tick(1e9, 1) == Tick(1, 1)


@pytest.mark.parametrize(
    ("elapsed_s", "users"),
    [
        pytest.param(0, 2, id="first step"),
        pytest.param(9.99, 2, id="end of first step"),
        pytest.param(10, 5, id="second step"),
        pytest.param(29.9, 8, id="last step is held"),
        pytest.param(30, None, id="then the test ends"),
    ],
)
def test_step_users(elapsed_s: float, users: int | None) -> None:
    shape = StepUsers(start_users=2, step_users=3, step_s=10, steps=3, spawn_rate=5)
    tick = shape.tick(elapsed_s, 0)
    assert (tick.users if tick else None) == users


def test_spike_from_zero_times_its_tail_from_when_users_stopped() -> None:
    spike = SpikeFromZero(idle_before_s=10, spike_users=8, spike_s=20, idle_after_s=30)
    assert spike.tick(0, 0) == Tick(0, 8)  # idle: every spike user starts within a second
    assert spike.phase(5) == "idle-before"
    assert spike.tick(10, 0) == Tick(8, 8)
    assert spike.phase(29) == "spike"
    # The spike is over, but 3 users are still finishing held requests.
    assert spike.tick(30, 3) == Tick(0, 8)
    assert spike.tick(100, 1) == Tick(0, 8)
    assert spike.phase(100) == "draining"
    # The last one stopped at 120 s: the tail runs 30 s from there.
    assert spike.tick(120, 0) == Tick(0, 8)
    assert spike.phase(149) == "idle-after"
    assert spike.tick(149.9, 0) == Tick(0, 8)
    assert spike.tick(150, 0) is None
    assert spike.phase(150) == "done"


def test_spike_bad_parameters_are_named() -> None:
    with pytest.raises(ScheduleError, match="spike users"):
        SpikeFromZero(idle_before_s=0, spike_users=0, spike_s=1, idle_after_s=1)
    with pytest.raises(ScheduleError, match="idle after"):
        SpikeFromZero(idle_before_s=0, spike_users=1, spike_s=1, idle_after_s=-1)


def test_diurnal_rate_swings_between_trough_and_peak() -> None:
    kwargs = {"peak_rps": 10.0, "peak_to_trough": 10.0, "day_s": 600.0}
    assert diurnal_rate(0, **kwargs) == pytest.approx(1.0)
    assert diurnal_rate(300, **kwargs) == pytest.approx(10.0)
    assert diurnal_rate(600, **kwargs) == pytest.approx(1.0)
    assert diurnal_rate(150, **kwargs) == pytest.approx(5.5)


def test_diurnal_arrivals_follow_the_rate_and_are_reproducible() -> None:
    kwargs = {"peak_rps": 20.0, "peak_to_trough": 10.0, "day_s": 600.0, "prompt_tokens": 100,
              "output_tokens": 10, "seed": 7}  # fmt: skip
    arrivals = diurnal_arrivals(**kwargs)  # type: ignore[arg-type]
    assert arrivals == diurnal_arrivals(**kwargs)  # type: ignore[arg-type]
    # Expected count: the mean rate (trough + peak) / 2 = 11/s over 600 s = 6,600.
    assert 6_300 <= len(arrivals) <= 6_900
    offsets = [a.offset_s for a in arrivals]
    assert offsets == sorted(offsets)
    night = sum(1 for t in offsets if t < 60 or t >= 540)
    noon = sum(1 for t in offsets if 240 <= t < 360)
    # A raised cosine from 2/s to 20/s: the busiest 2 minutes hold about 7x the quietest.
    assert 5 < noon / night < 10
    assert {(a.prompt_tokens, a.output_tokens) for a in arrivals} == {(100, 10)}


def test_users_needed_is_the_most_requests_in_flight() -> None:
    records = [TraceRequest(t, 1, 1) for t in (0.0, 0.5, 1.0, 5.0, 5.1, 5.2, 5.3)]
    assert users_needed(records, latency_s=1.0) == 4  # 5.0 .. 5.3
    assert users_needed(records, latency_s=0.1) == 1
    assert users_needed(records, latency_s=10) == 7
    assert users_needed([], latency_s=1) == 0


def test_open_loop_hands_out_requests_in_order_with_due_times() -> None:
    records = [TraceRequest(0.0, 10, 1), TraceRequest(1.5, 20, 2)]
    schedule = OpenLoopSchedule(records, origin_s=100.0, users=3, lead_in_s=2.0)
    assert schedule.tick(0, 0) == Tick(3, 3)
    first = schedule.claim()
    second = schedule.claim()
    assert first is not None
    assert second is not None
    assert (first.due_s, first.prompt_tokens) == (102.0, 10)
    assert (second.due_s, second.output_tokens) == (103.5, 2)
    assert schedule.claim() is None
    assert schedule.exhausted
    assert schedule.in_flight == 2
    assert schedule.tick(5, 3) == Tick(3, 3)  # still waiting for answers
    schedule.finish(first, sent_at_s=102.01)
    schedule.finish(second, sent_at_s=106.0)  # 2.5 s late: every user was busy
    assert schedule.late_sends == 1
    assert schedule.max_lag_s == pytest.approx(2.5)
    assert schedule.tick(6, 3) is None


def test_open_loop_gives_up_after_the_drain_timeout() -> None:
    schedule = OpenLoopSchedule(
        [TraceRequest(0.0, 1, 1)], origin_s=0.0, users=1, lead_in_s=1.0, drain_timeout_s=60
    )
    assert schedule.claim() is not None
    assert schedule.tick(60.9, 1) == Tick(1, 1)
    assert schedule.tick(61.1, 1) is None  # last due at 1 s, plus 60 s


def test_open_loop_bad_parameters_are_named() -> None:
    with pytest.raises(ScheduleError, match="at least one request"):
        OpenLoopSchedule([], origin_s=0, users=1)
    with pytest.raises(ScheduleError, match="users"):
        OpenLoopSchedule([TraceRequest(0, 1, 1)], origin_s=0, users=0)


@pytest.mark.parametrize(
    ("shape", "chosen", "expected"),
    [
        ("diurnal", {"OpenLoopUser": True, "OpenAIStreamingUser": False}, None),
        ("spike", {"OpenAIStreamingUser": False}, None),
        (
            "replay",
            {"OpenAIStreamingUser": False},
            "--shape replay is open loop (a schedule of send times) and runs the user class "
            "OpenLoopUser; name it on the command line instead of OpenAIStreamingUser",
        ),
        (
            "step",
            {"OpenLoopUser": True},
            "--shape step is closed loop (a pool of users) and runs one of the user classes "
            "OpenAIStreamingUser or TritonUser; name it on the command line instead of "
            "OpenLoopUser",
        ),
    ],
)
def test_user_class_problem_names_the_class_that_fits(
    shape: str, chosen: dict[str, bool], expected: str | None
) -> None:
    available = {"OpenLoopUser": True, "OpenAIStreamingUser": False, "TritonUser": False}
    assert user_class_problem(shape, chosen, available) == expected
