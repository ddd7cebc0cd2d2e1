"""Command-line knobs of the example model, shared by ``tidal sandbox up`` and ``tidal demo``.

Both commands start the same annotated fake-vLLM Deployment
(:class:`~loadtests.sandbox.example.ExampleModel`) and differ only in their
defaults: ``sandbox up`` keeps a model you can play with (a 10 s cold start,
half a minute of idle before zero), the demo squeezes the whole story into
about a minute. Durations are Go-style strings as in the annotations
(``10s``, ``1m30s``, ``500ms``), so what you type here is what you would
write on a real Deployment.

The flags are plain flags rather than pydantic settings: the sandbox is a
test world with a handful of knobs, none of them scaler or activator
settings (those keep their own flags, environment and files).
"""

from __future__ import annotations

import argparse
import dataclasses

from loadtests.sandbox.cluster.quantity import parse_duration
from loadtests.sandbox.example import ExampleModel

__all__ = ["add_model_flags", "duration_arg", "model_from_args"]


def _duration(seconds: float) -> str:
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{int(seconds * 1000)}ms"


def duration_arg(text: str) -> float:
    """A Go-style duration flag (``10s``, ``1m30s``, ``500ms``) in seconds."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {value}")
    return value


def add_model_flags(parser: argparse.ArgumentParser, defaults: ExampleModel) -> None:
    """Add the example model's knobs, each help naming its default and the annotation it sets."""
    group = parser.add_argument_group("the example model (an annotated fake-vLLM Deployment)")
    durations = (
        ("--startup-delay", defaults.startup_delay_s,
         "cold start of each replica: the fake vLLM listens only after this"),
        ("--grace-period", defaults.grace_s,
         "autoscaling.tidal.dev/scale-to-zero-grace-period: idle time before zero"),
        ("--window", defaults.window_s,
         "autoscaling.tidal.dev/window: stable averaging window, 6s..1h"),
        ("--scale-down-delay", defaults.scale_down_delay_s,
         "autoscaling.tidal.dev/scale-down-delay"),
    )  # fmt: skip
    for flag, default_s, meaning in durations:
        group.add_argument(
            flag,
            type=duration_arg,
            default=default_s,
            metavar="DURATION",
            help=f"{meaning} (default {_duration(default_s)})",
        )
    group.add_argument(
        "--target-concurrency",
        type=_positive_int,
        default=defaults.target_concurrency,
        metavar="N",
        help="autoscaling.tidal.dev/target-concurrency: requests per replica "
        f"(default {defaults.target_concurrency})",
    )
    group.add_argument(
        "--max-scale",
        type=_positive_int,
        default=defaults.max_scale,
        metavar="N",
        help=f"autoscaling.tidal.dev/max-scale (default {defaults.max_scale})",
    )
    group.add_argument(
        "--speedup",
        type=_positive_float,
        default=defaults.speedup,
        metavar="X",
        help="model time runs X times faster than wall time; 1 is an 8B model on an H100 "
        f"(default {defaults.speedup:g})",
    )


def model_from_args(args: argparse.Namespace, defaults: ExampleModel) -> ExampleModel:
    """The example model with the knobs ``args`` carries (see :func:`add_model_flags`).

    Raises ValueError, naming the flag, when a value is outside what the
    annotation allows (the scaler would otherwise reject the Deployment with
    an ``InvalidAnnotation`` event and leave it at zero, which looks like a
    hang).
    """
    if not 6.0 <= args.window <= 3600.0:
        raise ValueError(f"--window must be 6s..1h (the annotation's range), got {args.window}s")
    if args.grace_period > 86400.0:
        raise ValueError(f"--grace-period must be at most 24h, got {args.grace_period}s")
    if args.scale_down_delay > 3600.0:
        raise ValueError(f"--scale-down-delay must be at most 1h, got {args.scale_down_delay}s")
    if args.max_scale > 1000:
        raise ValueError(f"--max-scale must be 1..1000, got {args.max_scale}")
    return dataclasses.replace(
        defaults,
        startup_delay_s=args.startup_delay,
        grace_s=args.grace_period,
        window_s=args.window,
        scale_down_delay_s=args.scale_down_delay,
        target_concurrency=args.target_concurrency,
        max_scale=args.max_scale,
        speedup=args.speedup,
    )
