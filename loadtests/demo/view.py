"""What the demo prints: a live status line, event lines, and the closing summary table.

Formatting is pure (:func:`format_status`, :func:`summary_table`) so it is
tested without a terminal. :class:`Console` decides *how* it reaches the
screen, and the one decision here is about terminals:

- on a TTY the status line is redrawn in place (``\\r`` and erase-to-end),
  and event lines ("2 replicas ready") are written above it, so the screen
  reads as a log of what happened with the live state underneath;
- anywhere else (CI, a pipe, a file) there are no cursor tricks at all:
  every line is a plain line, and the caller prints the status once a
  second, so a log stays readable and greppable.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from loadtests.demo.observe import Summary

__all__ = [
    "COLD_START_NOTE",
    "Console",
    "Status",
    "cold_start_rows",
    "format_status",
    "summary_table",
]


@dataclass(frozen=True, slots=True)
class Status:
    elapsed_s: float
    phase: str
    desired: int
    ready: int
    pods: int
    buffered: int | None  # None: the activator's metrics could not be read
    in_flight: int | None
    done: int
    failed: int
    recent_ttft_s: float | None  # median TTFT of requests finished in the last few seconds
    note: str = ""


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def format_status(s: Status, width: int | None = None) -> str:
    """One line: when, which phase, replicas, what the activator holds, requests, TTFT.

    With ``width`` (a terminal's columns) a line that would not fit is
    rebuilt shorter, keeping first what the README tells a user to watch (the
    replicas, ``activator held N`` and the note, such as ``first request
    waiting 2.8s``), then as much of the rest as fits; only then is it cut.
    """
    line = (
        f"[{s.elapsed_s:6.1f}s] {s.phase:<8} "
        f"replicas desired {s.desired} ready {s.ready} pods {s.pods} | "
        f"activator held {_count(s.buffered)} in-flight {_count(s.in_flight)} | "
        f"requests done {s.done} failed {s.failed} | TTFT {_seconds(s.recent_ttft_s)}"
    )
    if s.note:
        line += f" | {s.note}"
    if width is None or len(line) < width:
        return line
    essential = [
        f"[{s.elapsed_s:5.1f}s] {s.phase}",
        f"ready {s.ready}/{s.desired} pods {s.pods}",
        f"activator held {_count(s.buffered)}",
        *([s.note] if s.note else []),
    ]
    line = " | ".join(essential)
    for extra in (
        f"in-flight {_count(s.in_flight)}",
        f"done {s.done} failed {s.failed}",
        f"TTFT {_seconds(s.recent_ttft_s)}",
    ):
        if len(line) + 3 + len(extra) >= width:
            break
        line += " | " + extra
    return line[: max(width - 1, 20)]


#: The two cold-start figures of the summary, and why they differ.
FIRST_TTFT_LABEL = "first request TTFT (client: sent -> first token)"
COLD_START_LABEL = "cold start (Deployment: desired 0 -> 1 ready)"
COLD_START_NOTE = (
    "The two cold-start figures measure different spans: the first request's TTFT runs "
    "from the moment it was sent (before the scaler woke the model) to its first token; "
    "the cold start runs from the scaler's wake to the Deployment's status counting a "
    "ready replica, which trails the pod's readiness probe, while the activator probes "
    "the pod itself and forwards sooner. Either can be the larger."
)


def cold_start_rows(
    first_ttft_s: float | None, cold_start_s: float | None
) -> list[tuple[str, str]]:
    """The summary rows of the two cold-start figures, labelled by what each measures."""
    return [(FIRST_TTFT_LABEL, _seconds(first_ttft_s)), (COLD_START_LABEL, _seconds(cold_start_s))]


def _slo_rows(summary: Summary) -> list[tuple[str, str]]:
    if summary.slo_ttft_s is None:
        return []
    share = summary.slo_attainment
    measured = "-" if share is None else f"{100 * share:.1f} % of {summary.requests}"
    return [(f"SLO: TTFT within {summary.slo_ttft_s:g}s (client clock)", measured)]


def summary_table(
    summary: Summary,
    *,
    extra: Sequence[tuple[str, str]] = (),
    problems: Sequence[str] = (),
    notes: Sequence[str] = (),
) -> str:
    """The closing table: every figure the demo reports, notes that explain them, the verdict."""
    rows: list[tuple[str, str]] = [
        ("requests", str(summary.requests)),
        ("succeeded", str(summary.succeeded)),
        ("failed", str(summary.failed)),
        ("cold starts (0 ready -> ready)", str(summary.cold_starts)),
        ("peak ready replicas", str(summary.peak_replicas)),
        ("replicas and pods at the end", str(summary.final_replicas)),
        ("TTFT p50 (client clock)", _seconds(summary.ttft_p50_s)),
        ("TTFT p99 (client clock)", _seconds(summary.ttft_p99_s)),
        ("most requests held at once", str(summary.max_buffered)),
        *_slo_rows(summary),
        *extra,
    ]
    width = max(len(name) for name, _ in rows)
    lines = ["", "Summary", "-" * (width + 12)]
    lines += [f"{name:<{width}}  {value}" for name, value in rows]
    lines.append("-" * (width + 12))
    for note in notes:
        lines += [*textwrap.wrap(note, width=78), ""]
    if problems:
        lines.append("NOT OK:")
        lines += [f"  - {p}" for p in problems]
    else:
        lines.append(
            "OK: no request failed, the model woke from zero, scaled out, and went back to zero"
        )
    return "\n".join(lines)


class Console:
    """Writes event lines and the status line, redrawing in place only on a terminal."""

    def __init__(self, stream: TextIO, *, tty: bool | None = None) -> None:
        self._stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self._status_shown = False

    def _clear_status(self) -> None:
        if self.tty and self._status_shown:
            self._stream.write("\r\x1b[K")
            self._status_shown = False

    def event(self, text: str) -> None:
        """A line that stays: something happened."""
        self._clear_status()
        self._stream.write(text + "\n")
        self._stream.flush()

    def status(self, status: Status) -> None:
        """The live line: redrawn on a terminal, appended elsewhere."""
        if self.tty:
            # A line wider than the terminal wraps, and erase-to-end would then
            # clear only its last row: fit it to the width instead.
            width = shutil.get_terminal_size().columns
            self._stream.write("\r\x1b[K" + format_status(status, width))
            self._status_shown = True
        else:
            self._stream.write(format_status(status) + "\n")
        self._stream.flush()

    def close(self) -> None:
        """Leave the last status line on screen and move below it."""
        if self.tty and self._status_shown:
            self._stream.write("\n")
            self._stream.flush()
            self._status_shown = False
