"""Target values, pure: Go-style durations and their errors."""

from __future__ import annotations

import pytest

from activator.targets import parse_duration_s


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25), (12, 12.0), ("1.5s", 1.5)],
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration_s(text, key="k") == seconds


@pytest.mark.parametrize("bad", ["", "10", "5 m", "1d", "m5", "-1s"])
def test_bad_durations_say_what_is_allowed(bad: str) -> None:
    with pytest.raises(ValueError, match=r"k: .*Go-style"):
        parse_duration_s(bad, key="k")
