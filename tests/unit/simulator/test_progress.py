"""The progress bar of long runs (simulator.progress).

Covers: nothing is drawn before a run has taken a few seconds; after that
the bar shows rows done of all, simulated hours and requests per second,
counted by the worlds as they run (also in forked workers, through shared
memory); finishing erases it; without a bar started, counting costs
nothing and draws nothing.
"""

from __future__ import annotations

import io

import pytest

from simulator import progress
from simulator.runner import SimulationOptions, run_policies
from simulator.traces import TraceRequest

TRACE = [TraceRequest(i * 2.0, 500, 5) for i in range(400)]


def test_a_long_run_shows_rows_hours_and_rate_then_erases_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = io.StringIO()
    progress.start(rows=2, stream=out)
    progress.draw()
    assert out.getvalue() == ""  # a run this young shows nothing
    monkeypatch.setattr(progress, "SHOW_AFTER_S", 0.0)
    monkeypatch.setattr(progress, "_REDRAW_S", 0.0)
    try:
        run_policies(TRACE, SimulationOptions(policies=("hpa", "knative-kpa"), jobs=2))
        progress.draw()
        shown = out.getvalue().split("\r")[-1]
        assert "rows 2/2" in shown
        assert "0.4 simulated h" in shown  # two worlds of 800 s each
        assert "requests/s" in shown
    finally:
        progress.finish()
    assert out.getvalue().endswith("\r\033[K")


def test_without_a_bar_nothing_is_counted_or_drawn(capsys: pytest.CaptureFixture[str]) -> None:
    progress.advance(60.0, 10)
    progress.row_done()
    progress.draw()
    progress.finish()
    assert capsys.readouterr().err == ""
