"""The demo's screen: status line, summary table, and terminal vs. log output.

Covers: the status line carries phase, replicas, held/in-flight, requests and
TTFT, and '?' when the activator's metrics could not be read; the summary
table lists every README.md, "Watch it once" figure and says OK or lists the problems; on a
terminal the status line is redrawn in place (and cut to the width), while
anything else gets plain lines with no escape sequences at all.
"""

from __future__ import annotations

import io
import os
import shutil

import pytest

from loadtests.demo.observe import Summary
from loadtests.demo.view import Console, Status, format_status, summary_table


def status(**changes: object) -> Status:
    values: dict[str, object] = {
        "elapsed_s": 12.34,
        "phase": "wake",
        "desired": 1,
        "ready": 0,
        "pods": 1,
        "buffered": 1,
        "in_flight": 0,
        "done": 0,
        "failed": 0,
        "recent_ttft_s": None,
        "note": "first request waiting 2.0s",
    }
    values.update(changes)
    return Status(**values)  # type: ignore[arg-type]


def summary(**changes: object) -> Summary:
    values: dict[str, object] = {
        "requests": 10,
        "succeeded": 10,
        "failed": 0,
        "cold_starts": 1,
        "peak_replicas": 3,
        "final_replicas": 0,
        "ttft_p50_s": 0.012,
        "ttft_p99_s": 4.5,
        "max_buffered": 1,
    }
    values.update(changes)
    return Summary(**values)  # type: ignore[arg-type]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_status_line_shows_the_live_state() -> None:
    line = format_status(status(done=7, failed=1, recent_ttft_s=0.25))
    assert line.startswith("[  12.3s] wake")
    assert "desired 1 ready 0 pods 1" in line
    assert "held 1 in-flight 0" in line
    assert "done 7 failed 1" in line
    assert "TTFT 0.25s" in line
    assert line.endswith("| first request waiting 2.0s")


def test_status_line_without_activator_metrics_says_unknown() -> None:
    line = format_status(status(buffered=None, in_flight=None, note=""))
    assert "held ? in-flight ?" in line
    assert "TTFT -" in line
    assert not line.endswith("|")


def test_summary_table_lists_every_figure_and_says_ok() -> None:
    table = summary_table(summary(), extra=[("wall time", "41.00s")])
    for label, value in [
        ("requests", "10"),
        ("failed", "0"),
        ("cold starts", "1"),
        ("peak ready replicas", "3"),
        ("replicas and pods at the end", "0"),
        ("TTFT p50", "0.01s"),
        ("TTFT p99", "4.50s"),
        ("most requests held at once", "1"),
        ("wall time", "41.00s"),
    ]:
        (row,) = [r for r in table.splitlines() if r.startswith(label)]
        assert row.split()[-1] == value, row
    assert table.splitlines()[-1].startswith("OK:")
    assert "SLO" not in table  # no objective given
    with_slo = summary_table(summary(slo_ttft_s=2.0, slo_attainment=0.9))
    (row,) = [r for r in with_slo.splitlines() if r.startswith("SLO: TTFT within 2s")]
    assert row.endswith("  90.0 % of 10"), row


def test_summary_table_lists_problems() -> None:
    bad = summary(failed=2, succeeded=8, peak_replicas=1)
    table = summary_table(bad, problems=bad.problems())
    assert "NOT OK:" in table
    assert "  - 2 request(s) failed" in table
    assert "OK:" not in table.replace("NOT OK:", "")


def test_log_output_has_plain_lines_only() -> None:
    out = io.StringIO()
    console = Console(out)
    assert not console.tty
    console.status(status())
    console.event("ready replicas 0 -> 1")
    console.status(status(ready=1))
    console.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()
    assert lines[1] == "ready replicas 0 -> 1"


def test_terminal_output_redraws_the_status_line_under_events() -> None:
    out = FakeTerminal()
    console = Console(out)
    assert console.tty
    console.status(status())
    console.status(status(ready=1))
    console.event("ready replicas 0 -> 1")
    console.status(status(ready=1, note=""))
    console.close()
    text = out.getvalue()
    # Two redraws on one line, then the event replaces the status line and ends
    # with a newline; the status comes back below it and stays at the end.
    assert text.count("\n") == 2
    first, second, _ = text.split("\n")
    assert first.count("\r\x1b[K") == 3 and first.endswith("ready replicas 0 -> 1")
    assert second.startswith("\r\x1b[K[") and "ready 1" in second


def test_terminal_status_line_is_cut_to_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "get_terminal_size", lambda *a, **k: os.terminal_size((60, 24)))
    out = FakeTerminal()
    Console(out).status(status())
    assert len(out.getvalue().removeprefix("\r\x1b[K")) == 59
