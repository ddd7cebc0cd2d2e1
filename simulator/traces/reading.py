"""Reading a trace file (CSV with a header row, or JSON Lines) into requests in time order.

Field names are settings (:class:`~simulator.traces.records.TraceFormat`);
a row that cannot be read is an error naming the file, the line and what
was expected. An optional class field gives each request a priority class
(as the activator's ``x-tidal-priority`` header: ``critical``,
``standard``, ``sheddable`` or a whole number; a bad one is an error naming
the row), and a tenant field its tenant, which the simulated activator
holds by. A JSON file holding one array of objects is read as JSONL; a
UTF-8 byte order mark is ignored.

Main decision: *absolute* timestamps (date-times, or numbers that can only be
epoch times) are re-based so that the earliest request is at 0, with no time
zone (only differences matter); *relative* timestamps (small numbers) are kept
as written, so an idle stretch before the first request is replayed too.
``timestamps="auto"`` picks by the value; a flag can force either.
:func:`read_trace` sorts rows by time (stable) in case a file is not in
order; :func:`stream_trace` reads one request at a time from a file that
is, and says which row is not.

Pure: no I/O beyond reading the file you name.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Literal

from groundwork.rules.priority import PRIORITY_ALLOWED, parse_priority
from simulator.traces.records import (
    AZURE_2023,
    TraceError,
    TraceFormat,
    TraceRequest,
    UnsortedTraceError,
)
from simulator.traces.values import MISSING, block_hashes, field_value, time_s, token_count

__all__ = ["parse_trace", "read_trace", "stream_trace"]

# Numbers at or above this many seconds are read as epoch times (1973 onwards):
# no relative trace is three years long.
_EPOCH_THRESHOLD_S = 1e8


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
        missing = [f for f in fmt.fields if field_value(row, f) is MISSING]
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
        if empty is not None and any(field_value(row, f) in (None, "") for f in needed):
            empty.append(line_number)
            continue
        try:
            at_s, is_datetime = time_s(field_value(row, fmt.time_field), fmt.time_unit)
            prompt = token_count(field_value(row, fmt.prompt_field))
            output = token_count(field_value(row, fmt.output_field))
        except (TypeError, ValueError) as error:
            raise TraceError(
                f"{source}:{line_number}: cannot read {_shown(row)} ({error}); expected "
                f"{fmt.time_field!r} as a date-time (ISO-8601) or a number of "
                f"{fmt.time_unit}, then whole token counts in {fmt.prompt_field!r} and "
                f"{fmt.output_field!r}"
            ) from error
        if prompt < 0 or output < 0:
            raise TraceError(f"{source}:{line_number}: negative token count in {_shown(row)}")
        model = "" if fmt.model_field is None else str(field_value(row, fmt.model_field))
        prefix: tuple[int | str, ...] = ()
        if fmt.prefix_field is not None:
            try:
                prefix = block_hashes(field_value(row, fmt.prefix_field))
            except ValueError as error:
                raise TraceError(
                    f"{source}:{line_number}: cannot read {fmt.prefix_field!r} ({error}); "
                    "expected a list of block hashes such as [12, 13, 14]"
                ) from error
        priority = 0
        if fmt.class_field is not None:
            written = field_value(row, fmt.class_field)
            parsed = parse_priority(str(written)) if written is not None else None
            if parsed is None:
                raise TraceError(
                    f"{source}:{line_number}: cannot read {fmt.class_field!r} as a class "
                    f"(got {written!r}); allowed: {PRIORITY_ALLOWED}"
                )
            priority = parsed
        tenant = "" if fmt.tenant_field is None else str(field_value(row, fmt.tenant_field))
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
