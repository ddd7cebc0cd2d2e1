"""The warm tier's pure decisions: the ladder, who sleeps, who wakes, what makes room."""

from __future__ import annotations

import dataclasses

import pytest

from scaler.policy.annotations import InvalidAnnotation, parse_scaling_config
from scaler.policy.api import ScalingConfig
from scaler.policy.warm import (
    MemoryBook,
    Replica,
    Resident,
    Rung,
    choose_wake,
    make_room,
    replicas_to_sleep,
    rung,
    sleep_due,
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
