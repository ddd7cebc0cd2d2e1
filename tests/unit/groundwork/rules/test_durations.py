"""The duration grammar every reader shares (groundwork.rules.durations).

Covers: Go's forms (units ns to h, fractions, compounds, a bare 0) read to
seconds; a sign, a bare number, blanks inside, unknown units and an empty
text refused with a message that says what is allowed; the formatter writes
the largest whole unit, milliseconds included, and reads back.
"""

from __future__ import annotations

import pytest

from groundwork.rules.durations import format_duration, parse_duration_s


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("0", 0.0, id="bare zero, as Go"),
        pytest.param(" 0 ", 0.0, id="blanks around"),
        pytest.param("0s", 0.0, id="zero seconds"),
        pytest.param("90s", 90.0, id="seconds"),
        pytest.param("5m", 300.0, id="minutes"),
        pytest.param("1h", 3600.0, id="hours"),
        pytest.param("1h30m", 5400.0, id="compound"),
        pytest.param("2h0m0s", 7200.0, id="Go's own formatting"),
        pytest.param("1.5h", 5400.0, id="fraction"),
        pytest.param(".5s", 0.5, id="leading point"),
        pytest.param("1.s", 1.0, id="trailing point"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("250us", 0.00025, id="microseconds"),
        pytest.param("250µs", 0.00025, id="micro sign"),
        pytest.param("250μs", 0.00025, id="greek mu"),
        pytest.param("10ns", 1e-8, id="nanoseconds"),
    ],
)
def test_go_durations_read_to_seconds(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["", "  ", "90", "1.5", "1d", "-5s", "+5s", "-0", "5 m", "m", "1h-30m", "1.2.3s", "s5", "5M"],
)
def test_anything_else_is_refused_saying_what_is_allowed(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a duration.*such as 250ms, 90s, 5m or 1h30m"):
        parse_duration_s(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "0s"), (0.1, "100ms"), (0.001, "1ms"), (1.5, "1.5s"), (90.0, "90s"), (180.0, "3m"),
     (5400.0, "90m"), (3600.0, "1h"), (86400.0, "24h")],
)  # fmt: skip
def test_the_formatter_writes_the_largest_whole_unit(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration_s(text) == pytest.approx(seconds)
