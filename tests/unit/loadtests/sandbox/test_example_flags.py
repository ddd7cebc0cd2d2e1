"""The example model's knobs on ``tidal sandbox up`` and ``tidal demo``.

Covers: defaults come from the command's own ExampleModel and reach the
Deployment's annotations; Go-style durations are parsed; a value outside an
annotation's range is refused with the flag's name (the scaler would
otherwise leave the Deployment at zero with an InvalidAnnotation event);
malformed values are argparse errors.
"""

from __future__ import annotations

import argparse

import pytest

from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.example_flags import add_model_flags, model_from_args

DEFAULTS = ExampleModel(startup_delay_s=4.0, window_s=6.0, grace_s=8.0, target_concurrency=4)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_model_flags(parser, DEFAULTS)
    return parser.parse_args(list(argv))


def test_defaults_are_the_commands_own() -> None:
    assert model_from_args(parse(), DEFAULTS) == DEFAULTS


def test_flags_reach_the_annotations() -> None:
    args = parse(
        "--startup-delay=1m30s",
        "--grace-period=500ms",
        "--window=10s",
        "--scale-down-delay=0s",
        "--target-concurrency=2",
        "--max-scale=7",
        "--speedup=5",
    )
    model = model_from_args(args, DEFAULTS)
    annotations = model.deployment()["metadata"]["annotations"]
    pod = model.deployment()["spec"]["template"]["metadata"]["annotations"]
    assert model.startup_delay_s == 90.0
    assert pod["sandbox.tidal.dev/startup-delay"] == "90s"
    assert pod["sandbox.tidal.dev/args"] == "--speedup 5.0"
    assert annotations["autoscaling.tidal.dev/scale-to-zero-grace-period"] == "500ms"
    assert annotations["autoscaling.tidal.dev/window"] == "10s"
    assert annotations["autoscaling.tidal.dev/scale-down-delay"] == "0s"
    assert annotations["autoscaling.tidal.dev/target-concurrency"] == "2"
    assert annotations["autoscaling.tidal.dev/max-scale"] == "7"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--window=5s"], "--window must be 6s..1h", id="window-too-short"),
        pytest.param(["--window=2h"], "--window must be 6s..1h", id="window-too-long"),
        pytest.param(["--grace-period=25h"], "--grace-period", id="grace-too-long"),
        pytest.param(["--scale-down-delay=2h"], "--scale-down-delay", id="delay-too-long"),
        pytest.param(["--max-scale=1001"], "--max-scale must be 1..1000", id="max-scale"),
    ],
)
def test_out_of_range_values_name_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        model_from_args(parse(*argv), DEFAULTS)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--startup-delay=soon"], id="not-a-duration"),
        pytest.param(["--grace-period=-1s"], id="negative-duration"),
        pytest.param(["--max-scale=0"], id="zero-replicas"),
        pytest.param(["--target-concurrency=two"], id="not-a-number"),
        pytest.param(["--speedup=0"], id="zero-speedup"),
    ],
)
def test_malformed_values_are_refused(argv: list[str]) -> None:
    with pytest.raises(argparse.ArgumentError):
        parse(*argv)
