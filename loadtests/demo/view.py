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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from loadtests.demo.observe import Summary

__all__ = ["Console", "Status", "format_status", "summary_table"]


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


def format_status(s: Status) -> str:
    """One line: when, which phase, replicas, what the activator holds, requests, TTFT."""
    line = (
        f"[{s.elapsed_s:6.1f}s] {s.phase:<8} "
        f"replicas desired {s.desired} ready {s.ready} pods {s.pods} | "
        f"activator held {_count(s.buffered)} in-flight {_count(s.in_flight)} | "
        f"requests done {s.done} failed {s.failed} | TTFT {_seconds(s.recent_ttft_s)}"
    )
    if s.note:
        line += f" | {s.note}"
    return line


def summary_table(
    summary: Summary, *, extra: Sequence[tuple[str, str]] = (), problems: Sequence[str] = ()
) -> str:
    """The closing table: every figure of DESIGN §7, then the verdict."""
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
        *extra,
    ]
    width = max(len(name) for name, _ in rows)
    lines = ["", "Summary", "-" * (width + 12)]
    lines += [f"{name:<{width}}  {value}" for name, value in rows]
    lines.append("-" * (width + 12))
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
        line = format_status(status)
        if self.tty:
            # A line wider than the terminal wraps, and erase-to-end would then
            # clear only its last row: cut it to the width instead.
            width = shutil.get_terminal_size().columns
            self._stream.write("\r\x1b[K" + line[: max(width - 1, 20)])
            self._status_shown = True
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def close(self) -> None:
        """Leave the last status line on screen and move below it."""
        if self.tty and self._status_shown:
            self._stream.write("\n")
            self._stream.flush()
            self._status_shown = False
