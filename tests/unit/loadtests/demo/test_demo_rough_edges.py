"""The demo's screen where a first-time user tripped (issue 15).

Covers:
- on an 80-column terminal the live line keeps what the README says to
  watch (replicas, ``activator held N``, the note such as ``first request
  held 2.8s``) and fills the rest with what fits, where it used to be cut
  before them; wide terminals and logs keep the full line;
- the summary labels its two cold-start figures by what each measures and
  explains under the table why they differ.
"""

from __future__ import annotations

import io
import os
import shutil

import pytest

from loadtests.demo.observe import Summary
from loadtests.demo.view import (
    COLD_START_NOTE,
    Console,
    Status,
    cold_start_rows,
    format_status,
    summary_table,
)

WAKE = Status(
    elapsed_s=612.34,
    phase="wake",
    desired=1,
    ready=0,
    pods=1,
    buffered=1,
    in_flight=0,
    done=0,
    failed=0,
    recent_ttft_s=None,
    note="first request held 12.8s",
)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_80_columns_keep_what_the_readme_says_to_watch() -> None:
    line = format_status(WAKE, 80)
    assert len(line) <= 79
    assert "ready 0/1 pods 1" in line
    assert "activator held 1" in line
    assert line.endswith("first request held 12.8s")


def test_the_rest_fills_what_room_is_left() -> None:
    burst = Status(
        elapsed_s=30.0,
        phase="burst",
        desired=3,
        ready=3,
        pods=3,
        buffered=0,
        in_flight=16,
        done=120,
        failed=0,
        recent_ttft_s=0.05,
        note="",
    )
    line = format_status(burst, 80)
    assert "in-flight 16" in line
    assert "done 120" not in line  # no room left for it at 80 columns
    assert len(line) <= 79
    wider = format_status(burst, 100)
    assert wider.endswith("in-flight 16 | done 120 failed 0")


def test_wide_terminals_and_logs_get_the_full_line() -> None:
    assert format_status(WAKE, 400) == format_status(WAKE)
    assert "replicas desired 1 ready 0 pods 1" in format_status(WAKE)


def test_console_fits_the_line_to_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "get_terminal_size", lambda *a, **k: os.terminal_size((80, 24)))
    out = FakeTerminal()
    Console(out).status(WAKE)
    assert out.getvalue().removeprefix("\r\x1b[K").endswith("first request held 12.8s")


def test_cold_start_figures_are_labelled_and_explained() -> None:
    rows = cold_start_rows(6.4, 5.1)
    assert [value for _, value in rows] == ["6.40s", "5.10s"]
    first, cold = (label for label, _ in rows)
    assert "sent -> first token" in first
    assert "desired 0 -> 1 ready" in cold
    summary = Summary(
        requests=1,
        succeeded=1,
        failed=0,
        cold_starts=1,
        peak_replicas=2,
        final_replicas=0,
        ttft_p50_s=6.4,
        ttft_p99_s=6.4,
        max_buffered=1,
    )
    table = summary_table(summary, extra=rows, notes=[COLD_START_NOTE])
    text = " ".join(table.split())
    assert "The two cold-start figures measure different spans" in text
    assert "Either can be the larger" in text
    note_lines = table.split("-\n", 1)[1].split("\nOK:")[0].splitlines()
    assert note_lines
    assert all(len(line) <= 78 for line in note_lines)
