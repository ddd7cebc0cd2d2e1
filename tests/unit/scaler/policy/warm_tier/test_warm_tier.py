"""The warm tier's pure decisions: the ladder, who sleeps, who wakes, what makes room."""

from __future__ import annotations

import dataclasses

import pytest

from scaler.policy.annotations import parse_scaling_config
from scaler.policy.api import ScalingConfig
from scaler.policy.idle.keep_alive import IdleGaps
from scaler.policy.invalid_annotation import InvalidAnnotation
from scaler.policy.warm_tier import (
    MemoryBook,
    Replica,
    Resident,
    Rung,
    choose_wake,
    keep_room_to_wake,
    make_room,
    mean_gap_s,
    place_pod,
    plan_wake,
    replicas_to_sleep,
    rung,
    sleep_due,
    sleep_or_zero,
)

A = "autoscaling.tidal.dev/"
WARM = dataclasses.replace(ScalingConfig(), sleep_after_s=30.0, scale_to_zero_grace_s=300.0)


@pytest.mark.parametrize(
    ("config", "idle_since", "now", "expected"),
    [
        (ScalingConfig(), 0.0, 1000.0, (False, None)),  # off unless set
        (WARM, None, 1000.0, (False, None)),  # busy
        (WARM, 100.0, 110.0, (False, 20.0)),
        (WARM, 100.0, 130.0, (True, None)),
        (WARM, 100.0, 500.0, (True, None)),
    ],
)
def test_sleep_due(
    config: ScalingConfig, idle_since: float | None, now: float, expected: tuple[bool, float | None]
) -> None:
    assert sleep_due(config, idle_since, now) == expected


def test_only_idle_awake_ready_replicas_sleep() -> None:
    replicas = [
        Replica("a"),
        Replica("b", busy=True),
        Replica("c", sleeping=True, level=1),
        Replica("d", ready=False),
        Replica("e"),
    ]
    assert replicas_to_sleep(WARM, replicas, 0.0, 29.9) == ()
    assert replicas_to_sleep(WARM, replicas, 0.0, 30.0) == ("a", "e")


@pytest.mark.parametrize(
    ("replicas", "expected"),
    [
        ([], Rung.ZERO),
        ([Replica("a", sleeping=True), Replica("b")], Rung.SERVING),
        ([Replica("a", sleeping=True), Replica("b", sleeping=True)], Rung.SLEEPING),
    ],
)
def test_rung(replicas: list[Replica], expected: Rung) -> None:
    assert rung(replicas) == expected


def test_wake_prefers_level_one_then_name() -> None:
    replicas = [
        Replica("z", sleeping=True, level=1),
        Replica("a", sleeping=True, level=2),
        Replica("m", sleeping=True, level=1),
        Replica("b"),
        Replica("c", sleeping=True, level=1, ready=False),
    ]
    chosen = choose_wake(replicas)
    assert chosen is not None and chosen.pod == "m"
    assert choose_wake([Replica("b")]) is None


def _res(pod: str, used: int, idle_since: float | None, *, awake: bool = True) -> Resident:
    return Resident(
        target=f"ns/{pod}", pod=pod, awake=awake, busy=idle_since is None, used_mib=used,
        idle_since_s=idle_since,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("residents", "need", "sleep", "fits"),
    [
        # GPU of 40 000: one awake (20 000) and the waker asleep (500): fits.
        ([_res("a", 20_000, 5.0), _res("w", 500, 0.0, awake=False)], 19_000, (), True),
        # Two awake: the idlest (smallest idle start) sleeps first.
        (
            [_res("a", 19_000, 50.0), _res("b", 19_000, 10.0), _res("w", 500, 0.0, awake=False)],
            19_000,
            ("b",),
            True,
        ),
        # The idlest is busy (None): the other one goes.
        (
            [_res("a", 19_000, 50.0), _res("b", 19_000, None), _res("w", 500, 0.0, awake=False)],
            19_000,
            ("a",),
            True,
        ),
        # Both busy: nothing sleeps, it cannot fit.
        (
            [_res("a", 19_000, None), _res("b", 19_000, None), _res("w", 500, 0.0, awake=False)],
            19_000,
            (),
            False,
        ),
        # Needs two evictions, oldest first.
        (
            [
                _res("a", 13_000, 30.0),
                _res("b", 13_000, 20.0),
                _res("c", 13_000, 40.0),
                _res("w", 500, 0.0, awake=False),
            ],
            25_000,
            ("b", "a"),
            True,
        ),
    ],
)
def test_make_room_sleeps_the_least_recently_used_idle_model(
    residents: list[Resident], need: int, sleep: tuple[str, ...], fits: bool
) -> None:
    plan = make_room(budget_mib=40_000, residents=residents, waking_pod="w", need_mib=need)
    assert (plan.sleep, plan.fits) == (sleep, fits)


def test_make_room_sleeps_first_the_model_expected_latest() -> None:
    # b is the least recently used, but it comes back every 20 s; a every hour.
    residents = [
        dataclasses.replace(_res("a", 19_000, 50.0), mean_gap_s=3600.0),
        dataclasses.replace(_res("b", 19_000, 10.0), mean_gap_s=20.0),
        _res("w", 500, 0.0, awake=False),
    ]
    plan = make_room(budget_mib=40_000, residents=residents, waking_pod="w", need_mib=19_000)
    assert plan.sleep == ("a",)
    # Without a history a model is expected last: it goes before one that has one.
    residents[0] = _res("a", 19_000, 50.0)
    residents[1] = dataclasses.replace(residents[1], mean_gap_s=5000.0)
    plan = make_room(budget_mib=40_000, residents=residents, waking_pod="w", need_mib=19_000)
    assert plan.sleep == ("a",)


def test_a_new_pod_leaves_room_for_a_sleeping_one_to_wake() -> None:
    asleep = _res("s", 500, 0.0, awake=False)
    # Beside a busy pod and a sleeping one there is no room for a wake as well.
    no = place_pod(
        budget_mib=40_000, residents=[_res("a", 14_000, None), asleep],
        new_mib=14_000, wake_need_mib=14_000,
    )  # fmt: skip
    assert not no.fits
    # Beside an idle one it fits: the idle one can still be slept for the wake.
    yes = place_pod(
        budget_mib=40_000, residents=[_res("a", 14_000, 5.0), asleep],
        new_mib=14_000, wake_need_mib=14_000,
    )  # fmt: skip
    assert (yes.sleep, yes.fits) == ((), True)
    # No sleeping pod there: nothing to keep room for, only the new pod must fit.
    alone = place_pod(
        budget_mib=40_000, residents=[_res("a", 14_000, None)],
        new_mib=14_000, wake_need_mib=14_000,
    )  # fmt: skip
    assert alone.fits


def test_keep_room_to_wake_sleeps_an_idle_pod_beside_sleeping_ones() -> None:
    asleep = _res("s", 500, 0.0, awake=False)
    full = [_res("a", 19_000, 50.0), _res("b", 19_000, None), asleep]
    assert keep_room_to_wake(budget_mib=40_000, residents=full, wake_need_mib=19_000) == ("a",)
    awake_only = [_res("a", 19_000, 50.0), _res("b", 19_000, None)]
    assert keep_room_to_wake(budget_mib=40_000, residents=awake_only, wake_need_mib=19_000) == ()
    busy = [_res("a", 19_000, None), _res("b", 19_000, None), asleep]
    assert keep_room_to_wake(budget_mib=40_000, residents=busy, wake_need_mib=19_000) == ()


def test_a_wake_blocked_by_a_request_about_to_finish_waits_for_it() -> None:
    def busy(pod: str, until: float) -> Resident:
        return dataclasses.replace(_res(pod, 19_000, None), free_at_s=until)

    residents = [busy("a", 103.0), busy("b", 500.0), _res("w", 500, 0.0, awake=False)]
    kw = {"budget_mib": 40_000, "waking_pod": "w", "need_mib": 19_000, "now": 100.0}
    plan = plan_wake(residents=residents, max_wait_s=59.0, **kw)  # type: ignore[arg-type]
    assert (plan.sleep, plan.fits, plan.at_s) == (("a",), True, 103.0)
    # Not when the wait would be longer than the cold start it avoids.
    late = plan_wake(residents=residents, max_wait_s=2.0, **kw)  # type: ignore[arg-type]
    assert not late.fits
    # Room now: no wait.
    now = plan_wake(residents=residents[1:], max_wait_s=59.0, **kw)  # type: ignore[arg-type]
    assert (now.sleep, now.fits, now.at_s) == ((), True, 100.0)


def _gaps(every_s: float, count: int, idle_for_s: float) -> tuple[IdleGaps, float]:
    gaps = IdleGaps(started_s=0.0)
    t = 0.0
    for _ in range(count):
        gaps = gaps.observe(busy=True, now=t).observe(busy=False, now=t + 1.0)
        t += every_s
    now = t - every_s + 1.0 + idle_for_s
    return gaps, now


def test_a_released_replica_stays_asleep_while_sleeping_costs_less_than_its_misses() -> None:
    config = ScalingConfig()  # 99 % attainment: a miss is worth 100 cold starts
    often, now = _gaps(120.0, 30, 300.0)  # every two minutes, idle five
    assert sleep_or_zero(config, often, share=1.0, cold_start_s=60.0, now=now)
    rare, now = _gaps(5_000.0, 3, 300.0)  # every 83 minutes
    assert not sleep_or_zero(config, rare, share=1.0, cold_start_s=60.0, now=now)
    # Sharing its GPU with three others it pays a quarter: kept longer.
    assert sleep_or_zero(config, rare, share=0.25, cold_start_s=60.0, now=now)
    assert mean_gap_s(often) == pytest.approx(119.0)  # each request takes 1 s
    assert mean_gap_s(IdleGaps(started_s=0.0)) is None
    with pytest.raises(ValueError, match="share of a GPU"):
        sleep_or_zero(config, rare, share=1.5, cold_start_s=60.0, now=now)


def test_make_room_rejects_negative_sizes() -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        make_room(budget_mib=1, residents=[], waking_pod="w", need_mib=-1)


def test_memory_is_learned_from_framebuffer_samples() -> None:
    book = MemoryBook()
    assert book.wake_need_mib("ns/m") is None
    book.observe("ns/m", mib=24_000, sleeping=False)
    book.observe("ns/m", mib=23_500, sleeping=False)  # a lower sample does not shrink it
    assert book.wake_need_mib("ns/m") == 24_000
    book.observe("ns/m", mib=600, sleeping=True)
    assert book.wake_need_mib("ns/m") == 23_400
    with pytest.raises(ValueError, match=">= 0 MiB"):
        book.observe("ns/m", mib=-1, sleeping=True)


@pytest.mark.parametrize(
    ("annotations", "after", "level"),
    [
        ({}, None, 1),
        ({A + "sleep-after": "30s"}, 30.0, 1),
        ({A + "sleep-after": "2m", A + "sleep-level": "2"}, 120.0, 2),
        # With a floor above zero the grace period never applies: any length will do.
        ({A + "sleep-after": "1h", A + "min-scale": "1"}, 3600.0, 1),
    ],
)
def test_annotations(annotations: dict[str, str], after: float | None, level: int) -> None:
    config = parse_scaling_config(annotations)
    assert (config.sleep_after_s, config.sleep_level) == (after, level)


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({A + "sleep-after": "soon"}, 'sleep-after: "soon" is not allowed; allowed: a duration'),
        ({A + "sleep-after": "0s"}, "a duration from 1s to 24h"),
        ({A + "sleep-level": "3"}, 'sleep-level: "3" is not allowed; allowed: 1 or 2'),
        (
            {A + "sleep-after": "10m"},
            "shorter than autoscaling.tidal.dev/scale-to-zero-grace-period \\(5m\\)",
        ),
        ({A + "sleep-after": "30s", A + "engine": "triton"}, "it has no sleep mode"),
    ],
)
def test_bad_annotations_say_what_is_allowed(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidAnnotation, match=message):
        parse_scaling_config(annotations)
