"""Workload traces: request arrival times and token counts, read from CSV.

The load tests' open-loop replay and the policy simulator both start from a
list of :class:`TraceRequest` records: when a request arrives (seconds since
the first request of the trace), how many prompt tokens it carries and how
many tokens it generates. This module turns the Azure LLM inference trace
CSVs (columns ``TIMESTAMP``, ``ContextTokens``, ``GeneratedTokens``) into such
records, cuts a window out of them and compresses time.

Main decision: offsets are relative to the first request of the file and are
taken from the wall-clock timestamps as written, with no time zone (the files
have none and only differences matter). A window is re-based to start at 0, so
a replay of "minutes 10 to 15" starts sending at once. Compression divides
offsets only; token counts stay as recorded, because a compressed trace is
meant to stress the same engine with the same requests, sooner.

The traces live beside the project, in ``../shared/traces/`` (they are not
copied into the repository). :func:`traces_dir` finds that folder, and
:func:`find_trace` turns a short name (``code``, ``conv``) or a path into a
file, with an error that says where it looked when the folder is missing.
``TIDAL_TRACES_DIR`` points elsewhere.

Pure: no locust (importing it patches the process with gevent), no I/O
beyond reading the file you name.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

__all__ = [
    "TRACES_DIR_ENV",
    "TraceError",
    "TraceRequest",
    "TraceSummary",
    "TracesMissingError",
    "compress",
    "find_trace",
    "parse_trace",
    "prepare",
    "read_trace",
    "summarize",
    "traces_dir",
    "window",
]

TRACES_DIR_ENV = "TIDAL_TRACES_DIR"

# Column names of the Azure LLM inference trace 2023.
_TIME_COLUMN = "TIMESTAMP"
_PROMPT_COLUMN = "ContextTokens"
_OUTPUT_COLUMN = "GeneratedTokens"


class TraceError(ValueError):
    """A trace file or a trace parameter is not usable; the message says why."""


class TracesMissingError(FileNotFoundError):
    """The traces folder (or the named trace) is not where it should be."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace."""

    offset_s: float  # seconds since the first request of the (windowed) trace
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """What a trace looks like, for logs and sanity checks."""

    requests: int
    duration_s: float
    requests_per_min: float
    median_prompt_tokens: int
    median_output_tokens: int
    longest_gap_s: float


def project_root() -> Path:
    """The checkout this module was loaded from (``loadtests/`` is at its top)."""
    return Path(__file__).resolve().parent.parent


def traces_dir() -> Path:
    """Where the traces are: ``$TIDAL_TRACES_DIR`` or ``../shared/traces`` beside the checkout.

    Raises :class:`TracesMissingError` naming the places looked at.
    """
    override = os.environ.get(TRACES_DIR_ENV)
    if override:
        path = Path(override)
        if not path.is_dir():
            raise TracesMissingError(
                f"{TRACES_DIR_ENV}={override!r} is not a folder; point it at the folder "
                "that holds the trace CSVs, or unset it to use ../shared/traces/"
            )
        return path
    root = project_root()
    path = root.parent / "shared" / "traces"
    if not path.is_dir():
        raise TracesMissingError(
            f"workload traces not found: expected the folder {path} "
            f"(../shared/traces/ beside the checkout {root}); "
            f"set {TRACES_DIR_ENV} to the folder that holds them"
        )
    return path


def find_trace(name: str) -> Path:
    """A trace file from a path, a file name in :func:`traces_dir`, or a short name.

    ``code`` and ``conv`` match ``azure_llm_2023_code.csv`` and
    ``azure_llm_2023_conv.csv`` (any CSV whose stem ends with ``_<name>``).
    """
    if not name:
        raise TraceError("empty trace name; give a path or a name such as 'code' or 'conv'")
    as_path = Path(name)
    if as_path.is_file():
        return as_path
    if as_path.parent != Path("."):
        raise TracesMissingError(f"trace file {name!r} does not exist")
    folder = traces_dir()
    for candidate in (folder / name, folder / f"{name}.csv"):
        if candidate.is_file():
            return candidate
    available = sorted(p.name for p in folder.glob("*.csv"))
    matches = [folder / p for p in available if Path(p).stem.endswith(f"_{name}")]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise TraceError(
            f"trace name {name!r} matches several files in {folder}: "
            f"{[m.name for m in matches]}; give the file name"
        )
    raise TracesMissingError(f"no trace {name!r} in {folder}; available: {available}")


def _parse_timestamp_s(text: str) -> float:
    # "2023-11-16 18:17:03.9799600": seven fractional digits, more than
    # datetime parses, so the fraction is read as a float on its own.
    whole, _, fraction = text.strip().partition(".")
    moment = datetime.strptime(whole, "%Y-%m-%d %H:%M:%S")
    if fraction and not fraction.isdigit():
        raise ValueError(f"bad fractional seconds {fraction!r}")
    # Naive datetimes: only differences matter, so any fixed zone would do.
    seconds = (moment - datetime(1970, 1, 1)).total_seconds()
    return seconds + (float(f"0.{fraction}") if fraction else 0.0)


def parse_trace(lines: Iterable[str], *, source: str = "<trace>") -> list[TraceRequest]:
    """Records from CSV text with the trace columns, in arrival order.

    Rows are sorted by time (stable) in case a file is not; offsets start at
    0 at the earliest request.
    """
    reader = csv.DictReader(lines)
    wanted = (_TIME_COLUMN, _PROMPT_COLUMN, _OUTPUT_COLUMN)
    missing = [c for c in wanted if c not in (reader.fieldnames or [])]
    if missing:
        raise TraceError(
            f"{source}: missing column(s) {missing}; a trace needs the columns "
            f"{list(wanted)}, found {reader.fieldnames}"
        )
    raw: list[tuple[float, int, int]] = []
    for line_number, row in enumerate(reader, start=2):
        try:
            at_s = _parse_timestamp_s(row[_TIME_COLUMN])
            prompt = int(row[_PROMPT_COLUMN])
            output = int(row[_OUTPUT_COLUMN])
        except (TypeError, ValueError) as error:
            raise TraceError(
                f"{source}:{line_number}: cannot read {row!r} ({error}); expected "
                "'YYYY-MM-DD HH:MM:SS.fffffff', then two whole token counts"
            ) from error
        if prompt < 0 or output < 0:
            raise TraceError(f"{source}:{line_number}: negative token count in {row!r}")
        raw.append((at_s, prompt, output))
    if not raw:
        raise TraceError(f"{source}: the trace has no requests")
    raw.sort(key=lambda r: r[0])
    first_s = raw[0][0]
    return [TraceRequest(at_s - first_s, prompt, output) for at_s, prompt, output in raw]


def read_trace(path: Path) -> list[TraceRequest]:
    """Read and parse one trace CSV."""
    with path.open(newline="") as handle:
        return parse_trace(handle, source=str(path))


def window(
    records: Sequence[TraceRequest], *, start_s: float = 0.0, duration_s: float | None = None
) -> list[TraceRequest]:
    """The requests with ``start_s <= offset < start_s + duration_s``, re-based to start at 0.

    Offsets are kept relative to ``start_s`` (not to the first request in the
    window), so an idle stretch at the start of the window is replayed too.
    """
    if start_s < 0:
        raise TraceError(f"window start must be >= 0 s, got {start_s}")
    if duration_s is not None and duration_s <= 0:
        raise TraceError(
            f"window duration must be > 0 s (or unset for 'to the end'), got {duration_s}"
        )
    offsets = [r.offset_s for r in records]
    lo = bisect.bisect_left(offsets, start_s)
    hi = len(records) if duration_s is None else bisect.bisect_left(offsets, start_s + duration_s)
    return [
        TraceRequest(r.offset_s - start_s, r.prompt_tokens, r.output_tokens) for r in records[lo:hi]
    ]


def compress(records: Sequence[TraceRequest], factor: float) -> list[TraceRequest]:
    """Divide every offset by ``factor`` (> 0): 10 plays ten trace seconds per second."""
    if not factor > 0:
        raise TraceError(f"time compression factor must be > 0, got {factor}")
    return [TraceRequest(r.offset_s / factor, r.prompt_tokens, r.output_tokens) for r in records]


def prepare(
    records: Sequence[TraceRequest],
    *,
    start_s: float = 0.0,
    duration_s: float | None = None,
    compression: float = 1.0,
) -> list[TraceRequest]:
    """Window (in trace seconds), then compress: what a replay sends."""
    return compress(window(records, start_s=start_s, duration_s=duration_s), compression)


def summarize(records: Sequence[TraceRequest]) -> TraceSummary:
    """Counts, rate, medians and the longest idle gap of a trace."""
    if not records:
        raise TraceError("cannot summarize an empty trace")
    duration_s = records[-1].offset_s - records[0].offset_s
    prompts = sorted(r.prompt_tokens for r in records)
    outputs = sorted(r.output_tokens for r in records)
    gaps = [b.offset_s - a.offset_s for a, b in itertools.pairwise(records)]
    return TraceSummary(
        requests=len(records),
        duration_s=duration_s,
        requests_per_min=len(records) / duration_s * 60 if duration_s > 0 else float("inf"),
        median_prompt_tokens=prompts[len(prompts) // 2],
        median_output_tokens=outputs[len(outputs) // 2],
        longest_gap_s=max(gaps, default=0.0),
    )
