"""What each flag's value must be: a duration, a positive number, a list of either.

Each is an ``argparse`` type, so a bad value is refused before anything runs,
with argparse's usage line and a message naming what was wrong and what is
allowed. Durations are Go-style (``60s``, ``2m``), as in the annotations,
read by the one grammar both services use
(:func:`groundwork.rules.durations.parse_duration_s`).
"""

from __future__ import annotations

import argparse
from typing import Any, Protocol

from groundwork.rules.durations import parse_duration_s
from simulator.prefix_routing import ROUTINGS

__all__ = ["FlagGroup", "duration", "durations", "positive", "routings"]


def duration(text: str) -> float:
    """A Go-style duration in seconds (``90s``, ``5m``, ``1h``)."""
    try:
        return parse_duration_s(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def positive(text: str) -> float:
    """A number above 0."""
    try:
        value = float(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from error
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def durations(text: str) -> tuple[float, ...]:
    """A comma list of durations, each once."""
    values = tuple(duration(part.strip()) for part in text.split(","))
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{text!r}: each duration once")
    return values


def routings(text: str) -> tuple[str, ...]:
    """A comma list of the simulator's routings, each once."""
    names = tuple(name.strip() for name in text.split(","))
    unknown = [name for name in names if name not in ROUTINGS]
    if unknown or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"{text!r}: choose from {', '.join(ROUTINGS)}, or both as a comma list, each once"
        )
    return names


class FlagGroup(Protocol):
    """What a flag group is to the functions that fill it (argparse's own group type
    is private)."""

    def add_argument(self, *names: str, **options: Any) -> argparse.Action: ...
