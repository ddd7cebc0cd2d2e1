"""Workload traces: request arrival times and token counts, read from CSV or JSONL.

The policy simulator (``tidal simulate``) and the load tests' open-loop
replay both start from a list of :class:`TraceRequest` records: when a
request arrives (seconds from the start of the trace), how many prompt tokens
it carries, how many tokens it generates, and (optionally) which model it is
for. This module turns trace files into such records, cuts a window out of
them and compresses time. ``loadtests.traces`` re-exports it: the parsing
lives here, once.

Formats (:class:`TraceFormat`): CSV with a header row, or JSON Lines (one
object per line). Field names are settings; the defaults are the Azure LLM
inference trace 2023 columns ``TIMESTAMP``, ``ContextTokens``,
``GeneratedTokens``. A timestamp is either a date-time
(``2023-11-16 18:17:03.9799600``, ISO-8601 ``T`` allowed) or a number in the
stated unit (``s`` or ``ms``).

Main decision: *absolute* timestamps (date-times, or numbers that can only be
epoch times) are re-based so that the earliest request is at 0, with no time
zone (only differences matter); *relative* timestamps (small numbers) are kept
as written, so an idle stretch before the first request is replayed too.
``timestamps="auto"`` picks by the value; a flag can force either. Rows are
sorted by time (stable) in case a file is not. A window is re-based to start
at 0, so a replay of "minutes 10 to 15" starts sending at once. Compression
divides offsets only; token counts stay as recorded, because a compressed
trace is meant to stress the same engine with the same requests, sooner.

The traces live beside the project, in ``../shared/traces/`` (they are not
copied into the repository). :func:`traces_dir` finds that folder, and
:func:`find_trace` turns a short name (``code``, ``conv``) or a path into a
file, with an error that says where it looked when the folder is missing.
``TIDAL_TRACES_DIR`` points elsewhere.

Pure: no I/O beyond reading the file you name.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

__all__ = [
    "TRACES_DIR_ENV",
    "TraceError",
    "TraceFormat",
    "TraceRequest",
    "TraceSummary",
    "TracesMissingError",
    "compress",
    "find_trace",
    "parse_trace",
    "prepare",
    "project_root",
    "read_trace",
    "summarize",
    "traces_dir",
    "window",
]

TRACES_DIR_ENV = "TIDAL_TRACES_DIR"

# Numbers at or above this many seconds are read as epoch times (1973 onwards):
# no relative trace is three years long.
_EPOCH_THRESHOLD_S = 1e8

TimeUnit = Literal["s", "ms"]
Timestamps = Literal["auto", "absolute", "relative"]
FileKind = Literal["auto", "csv", "jsonl"]


class TraceError(ValueError):
    """A trace file or a trace parameter is not usable; the message says why."""


class TracesMissingError(FileNotFoundError):
    """The traces folder (or the named trace) is not where it should be."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace."""

    offset_s: float  # seconds since the start of the (windowed) trace
    prompt_tokens: int
    output_tokens: int
    model: str = ""  # empty: the trace has one model


@dataclass(frozen=True, slots=True)
class TraceFormat:
    """How to read a trace file: field names, time unit, absolute or relative times.

    ``model_field`` is optional: when set, each row names its model and the
    simulator sizes each model on its own (a pool of many small deployments).
    """

    time_field: str = "TIMESTAMP"
    prompt_field: str = "ContextTokens"
    output_field: str = "GeneratedTokens"
    model_field: str | None = None
    time_unit: TimeUnit = "s"
    timestamps: Timestamps = "auto"
    kind: FileKind = "auto"

    def __post_init__(self) -> None:
        if self.time_unit not in ("s", "ms"):
            raise TraceError(f"time unit must be 's' or 'ms', got {self.time_unit!r}")
        if self.timestamps not in ("auto", "absolute", "relative"):
            raise TraceError(
                f"timestamps must be 'auto', 'absolute' or 'relative', got {self.timestamps!r}"
            )
        if self.kind not in ("auto", "csv", "jsonl"):
            raise TraceError(f"trace format must be 'auto', 'csv' or 'jsonl', got {self.kind!r}")
        for name in ("time_field", "prompt_field", "output_field"):
            if not getattr(self, name):
                raise TraceError(f"{name} must name a field, got an empty string")

    @property
    def fields(self) -> tuple[str, ...]:
        wanted = (self.time_field, self.prompt_field, self.output_field)
        return wanted if self.model_field is None else (*wanted, self.model_field)


AZURE_2023 = TraceFormat()


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
    """The checkout this module was loaded from (``scaler/sim/`` is two levels down)."""
    return Path(__file__).resolve().parents[2]


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


def _parse_datetime_s(text: str) -> float:
    # "2023-11-16 18:17:03.9799600": seven fractional digits, more than
    # datetime parses, so the fraction is read as a float on its own.
    whole, _, fraction = text.strip().replace("T", " ").rstrip("Z").partition(".")
    moment = datetime.strptime(whole, "%Y-%m-%d %H:%M:%S")
    if fraction and not fraction.isdigit():
        raise ValueError(f"bad fractional seconds {fraction!r}")
    # Naive datetimes: only differences matter, so any fixed zone would do.
    seconds = (moment - datetime(1970, 1, 1)).total_seconds()
    return seconds + (float(f"0.{fraction}") if fraction else 0.0)


def _time_s(value: object, unit: TimeUnit) -> tuple[float, bool]:
    """Seconds, and whether the value was a date-time (always absolute)."""
    if isinstance(value, bool):
        raise ValueError(f"a timestamp cannot be a boolean ({value!r})")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return _parse_datetime_s(value), True
    else:
        raise ValueError(f"a timestamp must be a number or a date-time, got {value!r}")
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"timestamp {value!r} is not a finite number")
    return (number / 1000.0 if unit == "ms" else number), False


def _count(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError(f"a token count cannot be a boolean ({value!r})")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return int(value.strip())
    raise ValueError(f"a token count must be a whole number, got {value!r}")


def _rows(
    lines: Iterable[str], *, kind: Literal["csv", "jsonl"], fmt: TraceFormat, source: str
) -> Iterable[tuple[int, Mapping[str, object]]]:
    if kind == "csv":
        reader = csv.DictReader(lines)
        missing = [c for c in fmt.fields if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(
                f"{source}: missing column(s) {missing}; a trace needs the columns "
                f"{list(fmt.fields)} (name others with --time-field, --prompt-field, "
                f"--output-field), found {reader.fieldnames}"
            )
        for line_number, row in enumerate(reader, start=2):
            yield line_number, row
        return
    for line_number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise TraceError(
                f"{source}:{line_number}: not a JSON object ({error.msg}); a JSONL trace has "
                f"one object per line with the fields {list(fmt.fields)}"
            ) from error
        if not isinstance(row, dict):
            raise TraceError(
                f"{source}:{line_number}: expected a JSON object with the fields "
                f"{list(fmt.fields)}, got {type(row).__name__}"
            )
        missing = [f for f in fmt.fields if f not in row]
        if missing:
            raise TraceError(
                f"{source}:{line_number}: missing field(s) {missing}; a trace needs the fields "
                f"{list(fmt.fields)} (name others with --time-field, --prompt-field, "
                f"--output-field), found {sorted(row)}"
            )
        yield line_number, row


def parse_trace(
    lines: Iterable[str],
    *,
    source: str = "<trace>",
    fmt: TraceFormat = AZURE_2023,
    kind: Literal["csv", "jsonl"] = "csv",
) -> list[TraceRequest]:
    """Records from the lines of a CSV (with a header) or JSONL trace, in arrival order.

    Offsets start at 0 at the earliest request for absolute timestamps and
    are kept as written for relative ones (see the module docstring).
    """
    raw: list[tuple[float, int, int, str]] = []
    saw_datetime = False
    for line_number, row in _rows(lines, kind=kind, fmt=fmt, source=source):
        try:
            at_s, is_datetime = _time_s(row[fmt.time_field], fmt.time_unit)
            prompt = _count(row[fmt.prompt_field])
            output = _count(row[fmt.output_field])
        except (TypeError, ValueError) as error:
            raise TraceError(
                f"{source}:{line_number}: cannot read {dict(row)!r} ({error}); expected "
                f"{fmt.time_field!r} as 'YYYY-MM-DD HH:MM:SS[.fffffff]' or a number of "
                f"{fmt.time_unit}, then whole token counts in {fmt.prompt_field!r} and "
                f"{fmt.output_field!r}"
            ) from error
        if prompt < 0 or output < 0:
            raise TraceError(f"{source}:{line_number}: negative token count in {dict(row)!r}")
        model = "" if fmt.model_field is None else str(row[fmt.model_field])
        saw_datetime = saw_datetime or is_datetime
        raw.append((at_s, prompt, output, model))
    if not raw:
        raise TraceError(f"{source}: the trace has no requests")
    raw.sort(key=lambda r: r[0])
    first_s = raw[0][0]
    if fmt.timestamps == "absolute":
        absolute = True
    elif fmt.timestamps == "relative":
        if saw_datetime:
            raise TraceError(
                f"{source}: timestamps are date-times, which are absolute; "
                "drop --timestamps relative or give offsets as numbers"
            )
        absolute = False
    else:
        absolute = saw_datetime or first_s >= _EPOCH_THRESHOLD_S
    if not absolute and first_s < 0:
        raise TraceError(f"{source}: relative timestamps must be >= 0, the earliest is {first_s} s")
    base = first_s if absolute else 0.0
    return [TraceRequest(at_s - base, p, o, m) for at_s, p, o, m in raw]


def _kind_of(path: Path, fmt: TraceFormat) -> Literal["csv", "jsonl"]:
    if fmt.kind != "auto":
        return fmt.kind
    return "jsonl" if path.suffix.lower() in (".jsonl", ".ndjson", ".json") else "csv"


def read_trace(path: Path, fmt: TraceFormat = AZURE_2023) -> list[TraceRequest]:
    """Read and parse one trace file (JSONL by a ``.jsonl``/``.ndjson`` suffix, else CSV)."""
    try:
        with path.open(newline="") as handle:
            return parse_trace(handle, source=str(path), fmt=fmt, kind=_kind_of(path, fmt))
    except UnicodeDecodeError as error:
        raise TraceError(f"{path}: not a text file ({error.reason}); expected CSV or JSONL") from (
            error
        )


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
        TraceRequest(r.offset_s - start_s, r.prompt_tokens, r.output_tokens, r.model)
        for r in records[lo:hi]
    ]


def compress(records: Sequence[TraceRequest], factor: float) -> list[TraceRequest]:
    """Divide every offset by ``factor`` (> 0): 10 plays ten trace seconds per second."""
    if not factor > 0:
        raise TraceError(f"time compression factor must be > 0, got {factor}")
    return [
        TraceRequest(r.offset_s / factor, r.prompt_tokens, r.output_tokens, r.model)
        for r in records
    ]


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
