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
``GeneratedTokens``. A JSONL field name may be a dotted path into nested
objects (``usage.prompt_tokens``). A timestamp is either a date-time
(``2023-11-16 18:17:03.9799600``, or any ISO-8601 form, with or without a
zone) or a number in the stated unit (``s`` or ``ms``). An optional prefix
field holds the request's prompt as a list of block hashes (as the Mooncake
traces' ``hash_ids``): requests that share leading blocks share a prompt
prefix, which the engine model can serve from its prefix cache. Optional
class and tenant fields give each request a priority class (as the
activator's ``x-tidal-priority`` header: ``critical``, ``standard``,
``sheddable`` or a whole number; a bad one is an error naming the row) and a
tenant, which the simulated activator holds by.

Main decision: *absolute* timestamps (date-times, or numbers that can only be
epoch times) are re-based so that the earliest request is at 0, with no time
zone (only differences matter); *relative* timestamps (small numbers) are kept
as written, so an idle stretch before the first request is replayed too.
``timestamps="auto"`` picks by the value; a flag can force either. Rows are
sorted by time (stable) in case a file is not. A window is re-based to start
at 0, so a replay of "minutes 10 to 15" starts sending at once. Compression
divides offsets only; token counts stay as recorded, because a compressed
trace is meant to stress the same engine with the same requests, sooner.

The two Azure 2023 traces ship inside the package (``simulator/data/``,
CC-BY-4.0, attribution in its ``README.md`` and ``NOTICE``), so ``code`` and
``conv`` work offline after ``pip install``. :func:`find_trace` turns such a
short name or a path into a file; ``TIDAL_TRACES_DIR`` names another folder
of traces to look in. :func:`unit_warnings` says when a trace's span or rate
suggests its timestamps were read in the wrong unit.

Pure: no I/O beyond reading the file you name.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Literal

from groundwork.rules.priority import PRIORITY_ALLOWED, parse_priority

__all__ = [
    "TRACES_DIR_ENV",
    "TraceError",
    "TraceFormat",
    "TraceRequest",
    "TraceSummary",
    "TracesMissingError",
    "UnsortedTraceError",
    "compress",
    "find_trace",
    "parse_trace",
    "prepare",
    "project_root",
    "read_trace",
    "stream_trace",
    "summarize",
    "traces_dir",
    "unit_warnings",
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


class UnsortedTraceError(TraceError):
    """A trace read as a stream is not in time order (read it whole: it is sorted then)."""


class TracesMissingError(FileNotFoundError):
    """The traces folder (or the named trace) is not where it should be."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace."""

    offset_s: float  # seconds since the start of the (windowed) trace
    prompt_tokens: int
    output_tokens: int
    model: str = ""  # empty: the trace has one model
    # The prompt as block hashes (the trace's prefix field); empty: unknown.
    prefix: tuple[int | str, ...] = ()
    # Its priority class (groundwork.rules.priority: higher first) and tenant, from
    # the trace's class and tenant fields; 0 and "" when it has none.
    priority: int = 0
    tenant: str = ""


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
    prefix_field: str | None = None
    class_field: str | None = None
    tenant_field: str | None = None
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
        for name in ("model_field", "prefix_field", "class_field", "tenant_field"):
            if getattr(self, name) == "":
                raise TraceError(f"{name} must name a field or be left out, got an empty string")

    @property
    def fields(self) -> tuple[str, ...]:
        optional = tuple(
            f
            for f in (self.model_field, self.prefix_field, self.class_field, self.tenant_field)
            if f is not None
        )
        return (self.time_field, self.prompt_field, self.output_field, *optional)


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
    """The checkout this module was loaded from (``simulator/`` is two levels down)."""
    return Path(__file__).resolve().parents[2]


#: The traces shipped with the package (the Azure 2023 code and conversation hours).
PACKAGED_TRACES = Path(__file__).resolve().parent / "data"


def traces_dir() -> Path:
    """Where named traces are: ``$TIDAL_TRACES_DIR`` when set, else the packaged ones.

    Raises :class:`TracesMissingError` when the variable names no folder.
    """
    override = os.environ.get(TRACES_DIR_ENV)
    if override:
        path = Path(override)
        if not path.is_dir():
            raise TracesMissingError(
                f"{TRACES_DIR_ENV}={override!r} is not a folder; point it at a folder "
                "of trace files, or unset it to use the traces shipped with Tidal"
            )
        return path
    return PACKAGED_TRACES


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
    raise TracesMissingError(
        f"no trace {name!r} in {folder}; available: {available}, or give a path to a "
        "CSV or JSONL file"
    )


def _parse_datetime_s(text: str) -> float:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        pass
    else:
        if moment.tzinfo is not None:
            return moment.timestamp()
        return (moment - datetime(1970, 1, 1)).total_seconds()
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
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            number = float(text)  # "12.0" from a tool that writes floats
            if not number.is_integer():
                raise ValueError(f"a token count must be a whole number, got {value!r}") from None
            return int(number)
    raise ValueError(f"a token count must be a whole number, got {value!r}")


def _prefix(value: object) -> tuple[int | str, ...]:
    """Block hashes: a JSON list, or (in CSV) a JSON list or space/comma-separated text."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return ()
        if text.startswith("["):
            value = json.loads(text)
        else:
            parts = text.replace(",", " ").split()
            if not all(part.replace("-", "").replace("_", "").isalnum() for part in parts):
                raise ValueError(f"expected block hashes separated by spaces, got {text!r}")
            return tuple(_block(part) for part in parts)
    if not isinstance(value, list):
        raise ValueError(f"a prefix is a list of block hashes, got {value!r}")
    return tuple(_block(item) for item in value)


def _block(item: object) -> int | str:
    if isinstance(item, bool) or not isinstance(item, int | str):
        raise ValueError(f"a block hash is a whole number or a string, got {item!r}")
    if isinstance(item, str):
        return int(item) if item.lstrip("-").isdigit() else item
    return item


_MISSING = object()


def _field(row: Mapping[str, object], name: str) -> object:
    """``row[name]``, or for a dotted name not in the row, the nested value (else _MISSING)."""
    if name in row:
        return row[name]
    value: object = row
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


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
        missing = [f for f in fmt.fields if _field(row, f) is _MISSING]
        if missing:
            raise TraceError(
                f"{source}:{line_number}: missing field(s) {missing}; a trace needs the fields "
                f"{list(fmt.fields)} (name others with --time-field, --prompt-field, "
                f"--output-field, --prefix-field; a dotted name reaches into nested objects), "
                f"found {sorted(row)}"
            )
        yield line_number, row


_Raw = tuple[float, int, int, str, tuple[int | str, ...], int, str]


def _parsed_rows(
    lines: Iterable[str],
    *,
    source: str,
    fmt: TraceFormat,
    kind: Literal["csv", "jsonl"],
    empty: list[int] | None,
) -> Iterator[tuple[_Raw, bool]]:
    """Each usable row as its raw fields, and whether its time was a date-time.

    With ``empty`` (a list to append line numbers to) a row with an empty
    or null time or token count is skipped and noted; without it, an error.
    """
    needed = (fmt.time_field, fmt.prompt_field, fmt.output_field)
    for line_number, row in _rows(lines, kind=kind, fmt=fmt, source=source):
        if empty is not None and any(_field(row, f) in (None, "") for f in needed):
            empty.append(line_number)
            continue
        try:
            at_s, is_datetime = _time_s(_field(row, fmt.time_field), fmt.time_unit)
            prompt = _count(_field(row, fmt.prompt_field))
            output = _count(_field(row, fmt.output_field))
        except (TypeError, ValueError) as error:
            raise TraceError(
                f"{source}:{line_number}: cannot read {_shown(row)} ({error}); expected "
                f"{fmt.time_field!r} as a date-time (ISO-8601) or a number of "
                f"{fmt.time_unit}, then whole token counts in {fmt.prompt_field!r} and "
                f"{fmt.output_field!r}"
            ) from error
        if prompt < 0 or output < 0:
            raise TraceError(f"{source}:{line_number}: negative token count in {_shown(row)}")
        model = "" if fmt.model_field is None else str(_field(row, fmt.model_field))
        prefix: tuple[int | str, ...] = ()
        if fmt.prefix_field is not None:
            try:
                prefix = _prefix(_field(row, fmt.prefix_field))
            except ValueError as error:
                raise TraceError(
                    f"{source}:{line_number}: cannot read {fmt.prefix_field!r} ({error}); "
                    "expected a list of block hashes such as [12, 13, 14]"
                ) from error
        priority = 0
        if fmt.class_field is not None:
            written = _field(row, fmt.class_field)
            parsed = parse_priority(str(written)) if written is not None else None
            if parsed is None:
                raise TraceError(
                    f"{source}:{line_number}: cannot read {fmt.class_field!r} as a class "
                    f"(got {written!r}); allowed: {PRIORITY_ALLOWED}"
                )
            priority = parsed
        tenant = "" if fmt.tenant_field is None else str(_field(row, fmt.tenant_field))
        yield (at_s, prompt, output, model, prefix, priority, tenant), is_datetime


def _empty_note(empty: list[int], fmt: TraceFormat) -> str:
    needed = (fmt.time_field, fmt.prompt_field, fmt.output_field)
    return (
        f"skipped {len(empty)} row(s) with an empty or null {' or '.join(map(repr, needed))} "
        f"(the first at line {empty[0]})"
    )


def _base(source: str, fmt: TraceFormat, first_s: float, saw_datetime: bool) -> float:
    """What to subtract from each time: the first request's for absolute timestamps."""
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
    return first_s if absolute else 0.0


def parse_trace(
    lines: Iterable[str],
    *,
    source: str = "<trace>",
    fmt: TraceFormat = AZURE_2023,
    kind: Literal["csv", "jsonl"] = "csv",
    notes: list[str] | None = None,
) -> list[TraceRequest]:
    """Records from the lines of a CSV (with a header) or JSONL trace, in arrival order.

    Offsets start at 0 at the earliest request for absolute timestamps and
    are kept as written for relative ones (see the module docstring). With
    ``notes`` (a list to append to), a row whose time or token count is
    empty or null (a failed request in some traces) is skipped and counted
    there; without it such a row is an error.
    """
    empty: list[int] | None = [] if notes is not None else None
    raw: list[_Raw] = []
    saw_datetime = False
    for row, is_datetime in _parsed_rows(lines, source=source, fmt=fmt, kind=kind, empty=empty):
        saw_datetime = saw_datetime or is_datetime
        raw.append(row)
    if empty and notes is not None:
        notes.append(_empty_note(empty, fmt))
    if not raw:
        raise TraceError(f"{source}: the trace has no requests")
    raw.sort(key=lambda r: r[0])
    base = _base(source, fmt, raw[0][0], saw_datetime)
    return [TraceRequest(at_s - base, p, o, m, x, c, t) for at_s, p, o, m, x, c, t in raw]


def stream_trace(
    path: Path, fmt: TraceFormat = AZURE_2023, *, notes: list[str] | None = None
) -> Iterator[TraceRequest]:
    """:func:`read_trace`, one request at a time, for a file already in time order.

    The first row decides the time base (its date-time, or its number against
    the epoch threshold, where the timestamps are ``auto``); a row earlier
    than the one before it is an error naming it (:func:`read_trace` sorts).
    A JSON file holding one array is read whole first.
    """
    kind = _kind_of(path, fmt)
    empty: list[int] | None = [] if notes is not None else None
    source = str(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            lines: Iterable[str] = handle
            if kind == "jsonl" and handle.read(1) == "[":
                handle.seek(0)
                lines = _array_lines(handle.read(), source)
            else:
                handle.seek(0)
            rows = _parsed_rows(lines, source=source, fmt=fmt, kind=kind, empty=empty)
            base: float | None = None
            last = -math.inf
            for number, ((at_s, p, o, m, x, c, t), is_datetime) in enumerate(rows, start=1):
                if base is None:
                    base = _base(source, fmt, at_s, is_datetime)
                if at_s < last:
                    raise UnsortedTraceError(
                        f"{source}: request {number} ({at_s}) comes before the one above it "
                        f"({last}); a trace read as a stream must be in time order"
                    )
                last = at_s
                yield TraceRequest(at_s - base, p, o, m, x, c, t)
            if base is None:
                raise TraceError(f"{source}: the trace has no requests")
    except UnicodeDecodeError as error:
        reason = f"not a text file ({error.reason}); expected CSV or JSONL"
        raise TraceError(f"{source}: {reason}") from error
    if empty and notes is not None:
        notes.append(_empty_note(empty, fmt))


def _shown(row: Mapping[str, object]) -> str:
    """A row for an error message, cut short (a prefix list may be thousands long)."""
    text = repr(dict(row))
    return text if len(text) <= 300 else text[:300] + "...}"


def _kind_of(path: Path, fmt: TraceFormat) -> Literal["csv", "jsonl"]:
    if fmt.kind != "auto":
        return fmt.kind
    return "jsonl" if path.suffix.lower() in (".jsonl", ".ndjson", ".json") else "csv"


def read_trace(
    path: Path, fmt: TraceFormat = AZURE_2023, *, notes: list[str] | None = None
) -> list[TraceRequest]:
    """Read and parse one trace file (JSONL by a ``.jsonl``/``.ndjson``/``.json`` suffix, else CSV).

    A JSON file holding one array of objects is read as JSONL; a UTF-8 byte
    order mark is ignored. ``notes``: see :func:`parse_trace`.
    """
    kind = _kind_of(path, fmt)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            if kind == "jsonl":
                text = handle.read()
                lines: Iterable[str] = text.splitlines()
                if text.lstrip().startswith("["):
                    lines = _array_lines(text, str(path))
                return parse_trace(lines, source=str(path), fmt=fmt, kind=kind, notes=notes)
            return parse_trace(handle, source=str(path), fmt=fmt, kind=kind, notes=notes)
    except UnicodeDecodeError as error:
        raise TraceError(f"{path}: not a text file ({error.reason}); expected CSV or JSONL") from (
            error
        )


def _array_lines(text: str, source: str) -> list[str]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as error:
        raise TraceError(
            f"{source}: starts like a JSON array but is not one ({error.msg} at line "
            f"{error.lineno}); give one JSON object per line, or one array of objects"
        ) from error
    if not isinstance(items, list):
        raise TraceError(f"{source}: expected an array of objects")
    return [json.dumps(item) for item in items]


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
    return [replace(r, offset_s=r.offset_s - start_s) for r in records[lo:hi]]


def compress(records: Sequence[TraceRequest], factor: float) -> list[TraceRequest]:
    """Divide every offset by ``factor`` (> 0): 10 plays ten trace seconds per second."""
    if not factor > 0:
        raise TraceError(f"time compression factor must be > 0, got {factor}")
    return [replace(r, offset_s=r.offset_s / factor) for r in records]


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


# A trace of one model's LLM requests longer than this, or faster than this
# on average, was almost surely read in the wrong unit: milliseconds read as
# seconds make the Azure hour 41 days; seconds read as milliseconds make it
# 3.6 s at 2,450 requests a second, which no fleet of ten GPUs serves.
_LONGEST_PLAUSIBLE_S = 7 * 86400.0
_FASTEST_PLAUSIBLE_RPS = 1_000.0


def unit_warnings(records: Sequence[TraceRequest], fmt: TraceFormat) -> list[str]:
    """Why the trace's span or rate suggests a wrong ``time_unit`` (empty: plausible)."""
    if len(records) < 2:
        return []
    span = records[-1].offset_s - records[0].offset_s
    out: list[str] = []
    if span > _LONGEST_PLAUSIBLE_S and fmt.time_unit == "s":
        out.append(
            f"the trace spans {span / 86400:.1f} days with timestamps read as seconds; if they "
            "are milliseconds, pass --time-unit ms"
        )
    rate = len(records) / span if span > 0 else math.inf
    if rate > _FASTEST_PLAUSIBLE_RPS:
        hint = (
            "if they are seconds, leave out --time-unit ms"
            if fmt.time_unit == "ms"
            else "check --time-field and --time-unit"
        )
        out.append(
            f"{len(records)} requests within {span:.3g} s ({rate:,.0f} per second) with "
            f"timestamps read as {'milliseconds' if fmt.time_unit == 'ms' else 'seconds'}; {hint}"
        )
    return out
