"""The spot story's verdict and flags, without a sandbox.

Covers: a story that happened as told (four replicas, one preemption,
cover, recovery, both Events, no failure) has no problems and its JSON
carries every figure; each missing part is named (a failed request, no
cover, no recovery, no Event, short of three spot replicas); the flags are
checked with messages that say what is allowed; ``--story`` picks the
story and the default stays the scale story.
"""

from __future__ import annotations

import argparse

import pytest

from loadtests.demo.observe import RequestResult
from loadtests.demo.spot_figures import Half, SpotFigures
from loadtests.demo.spot_story import _story_from_args
from loadtests.demo.story import configure


def told() -> SpotFigures:
    return SpotFigures(
        results=[RequestResult(0.0, 200, 0.01, 0.5) for _ in range(10)],
        peak_on_demand=2,
        peak_spot=3,
        final_on_demand=Half(1, 1, 1),
        final_spot=Half(3, 3, 3),
        zones={"us-east-1a": 2, "us-east-1b": 1},
        preempted_node="gpu-spot-2",
        preemptions=1,
        fallback_s=0.2,
        cover_ready_s=4.0,
        recovered_s=20.0,
        events=["OnDemandPinned", "SpotFallback", "SpotRecovered"],
        cost={"dollars_per_hour": 11.89, "saving_dollars_per_hour": 8.61},
    )


def test_a_story_told_has_no_problems_and_every_figure() -> None:
    figures = told()
    assert figures.problems() == []
    doc = figures.as_json()
    assert (doc["requests"], doc["succeeded"], doc["failed"]) == (10, 10, 0)
    assert (doc["peak_spot"], doc["peak_on_demand"]) == (3, 2)
    assert (doc["final_spot"], doc["final_on_demand"]) == (3, 1)
    assert doc["fallback_s"] == 0.2 and doc["recovered_s"] == 20.0
    assert doc["saving_dollars_per_hour"] == 8.61
    assert doc["ttft_p50_s"] == 0.01


def test_each_missing_part_is_named() -> None:
    figures = told()
    figures.results.append(RequestResult(1.0, 502, None, 0.1, error="bad gateway"))
    figures.fallback_s = None
    figures.recovered_s = None
    figures.events = ["SpotFallback"]
    figures.peak_spot = 2
    problems = figures.problems()
    assert "1 request(s) failed" in problems
    assert "on-demand never covered the preempted spot replica" in problems
    assert "on-demand never went back to the baseline" in problems
    assert "no SpotRecovered Event" in problems
    assert any("expected 1 and 3" in p for p in problems)
    assert SpotFigures().problems()[0] == "no request was sent"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(list(argv))


def test_story_flag_and_spot_flags() -> None:
    assert parse().story == "scale"
    args = parse("--story", "spot", "--streams", "4", "--notice-s", "30")
    story = _story_from_args(args)
    assert (story.streams, story.notice_s) == (4, 30.0)
    with pytest.raises(ValueError, match="--streams must be 1 or more, got 0"):
        _story_from_args(parse("--story", "spot", "--streams", "0"))
    with pytest.raises(ValueError, match=r"--notice-s must be 1 to 300 seconds, got 0\.5"):
        _story_from_args(parse("--story", "spot", "--notice-s", "0.5"))
    with pytest.raises(SystemExit):
        parse("--story", "nope")
