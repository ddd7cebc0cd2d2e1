"""One field of a trace row read as what it holds: a time, a token count, block hashes.

A timestamp is either a date-time (``2023-11-16 18:17:03.9799600``, or any
ISO-8601 form, with or without a zone) or a number in the stated unit (``s``
or ``ms``); the caller learns which, since a date-time is always absolute.
A token count is a whole number, also when a tool wrote it as ``12.0``. A
prefix is a list of block hashes (whole numbers or strings), as JSON or, in
a CSV cell, separated by spaces or commas. A JSONL field name may be a
dotted path into nested objects (``usage.prompt_tokens``). Each raises
``ValueError`` saying what it got; the reader adds the row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

from simulator.traces.records import TimeUnit

__all__ = ["MISSING", "block_hashes", "field_value", "time_s", "token_count"]


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


def time_s(value: object, unit: TimeUnit) -> tuple[float, bool]:
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


def token_count(value: object) -> int:
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


def block_hashes(value: object) -> tuple[int | str, ...]:
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


#: What :func:`field_value` returns for a field the row does not have.
MISSING = object()


def field_value(row: Mapping[str, object], name: str) -> object:
    """``row[name]``, or for a dotted name not in the row, the nested value (else MISSING)."""
    if name in row:
        return row[name]
    value: object = row
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value
